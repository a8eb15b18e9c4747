"""AUROC and matched F1 split by whether the explained decision was right (services/evaluation/protocol.py): the
learned explainers' `by_prediction` columns and a baseline's, read from its fold's metrics table, by hand."""
import math

import numpy as np
import pandas as pd
import pytest

from learned_attribution.services.evaluation.learned_scores import BY_PREDICTION_COLUMNS, as_learned_row, by_prediction

SCORES = [np.array([0.9, 0.1, 0.5]), np.array([0.2, 0.8]), np.array([0.3, 0.7, 0.1]), np.array([0.6, 0.4, 0.5, 0.1])]
GOLD = [np.array([1, 0, 0]), np.array([1, 0]), np.array([0, 1, 0]), np.array([0, 0, 1, 1])]


def test_each_subset_is_scored_on_its_own_examples():
    row = by_prediction(SCORES, GOLD, [True, True, False, False], rho=0.5, n_boot=200, seed=0)
    # correct: AUROC 1 and 0; top-2 of 3 holds the one rationale token (F1 2/3), top-1 of 2 misses it (F1 0)
    assert row["auroc_correct"] == pytest.approx(0.5) and row["f1_matched_correct"] == pytest.approx(1 / 3)
    # incorrect: AUROC 1 and 1/4 (0.5 beats 0.4 only); F1 2/3 and 1/2
    assert row["auroc_incorrect"] == pytest.approx(0.625) and row["f1_matched_incorrect"] == pytest.approx(7 / 12)
    assert row["auroc_incorrect_low"] <= 0.625 <= row["auroc_incorrect_high"]
    assert set(row) == set(BY_PREDICTION_COLUMNS)
    swapped = by_prediction(SCORES, GOLD, [False, False, True, True], rho=0.5, n_boot=200, seed=0)
    assert swapped["auroc_correct"] == row["auroc_incorrect"] and swapped["auroc_incorrect"] == row["auroc_correct"]
    none_wrong = by_prediction(SCORES, GOLD, [True] * 4, rho=0.5, n_boot=200, seed=0)
    assert math.isnan(none_wrong["auroc_incorrect"]) and none_wrong["auroc_correct"] == pytest.approx(0.5625)


def metric(method, rule, subset, auroc, f1):
    return {"method": method, "rule": rule, "subset": subset, "n_examples": 10, "auroc": auroc,
            "auroc_low": auroc - 0.1, "auroc_high": auroc + 0.1, "auprc": 0.5, "auprc_low": 0.4, "auprc_high": 0.6,
            "f1": f1, "f1_low": f1 - 0.1, "f1_high": f1 + 0.1}


def test_a_baseline_row_carries_its_own_subset_rows():
    metrics = pd.DataFrame([metric("saliency", "matched", "all", 0.70, 0.40),
                            metric("saliency", "matched", "correct", 0.75, 0.45),
                            metric("saliency", "matched", "incorrect", 0.60, 0.30),
                            metric("saliency", "own", "incorrect", 0.11, 0.11),  # another rule
                            metric("gae", "matched", "incorrect", 0.22, 0.22)])  # another method
    row = as_learned_row(metrics.iloc[0], metrics)
    assert (row["auroc"], row["f1_matched"]) == (0.70, 0.40)
    assert (row["auroc_correct"], row["f1_matched_correct"]) == (0.75, 0.45)
    assert (row["auroc_incorrect"], row["auroc_incorrect_low"], row["f1_matched_incorrect_high"]) == \
        (0.60, pytest.approx(0.50), pytest.approx(0.40))
    alone = as_learned_row(metrics.iloc[0], metrics.iloc[:1])
    assert all(math.isnan(alone[c]) for c in BY_PREDICTION_COLUMNS)
