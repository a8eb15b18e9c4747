"""A new plausibility metric is one registered function (`core/metrics/registry.py`): a toy one registered here flows
into `evaluate`'s per-example table and summary and into the scoring protocol's metric table with its interval, and
the registered AUPRC is the one the tables always had."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from learned_attribution.core.metrics import EXAMPLE_METRICS, evaluate, register_metric
from learned_attribution.core.metrics.plausibility import average_precision
from learned_attribution.services.evaluation.protocol import METRIC_COLUMNS, score_methods


@pytest.fixture
def top_token_hit():
    """A toy metric: 1 where the highest-scored token is a rationale token."""
    @register_metric("top_token_hit")
    def hit(scores: np.ndarray, gold: np.ndarray) -> float:
        return float(gold[int(np.argmax(scores))])

    yield hit
    del EXAMPLE_METRICS["top_token_hit"]


def test_auprc_is_registered_and_undefined_where_the_gold_has_one_class():
    assert list(EXAMPLE_METRICS) == ["auprc"]
    gold, scores = np.array([0, 1, 0, 1]), np.array([0.1, 0.9, 0.8, 0.2])
    assert EXAMPLE_METRICS["auprc"](scores, gold) == average_precision(gold, scores)
    assert np.isnan(EXAMPLE_METRICS["auprc"](scores, np.ones(4)))


def test_registering_a_name_twice_is_refused():
    with pytest.raises(ValueError, match="'auprc' is registered twice"):
        register_metric("auprc")(lambda scores, gold: 0.0)


def test_a_registered_metric_reaches_the_metric_table(top_token_hit):
    scores = [np.array([0.9, 0.1, 0.0]), np.array([0.2, 0.1, 0.7]), np.array([0.5, 0.6, 0.1])]
    gold = [np.array([1, 0, 0]), np.array([1, 0, 0]), np.array([0, 1, 1])]
    result = evaluate(scores, gold, [s > 0.4 for s in scores])
    assert result.per_example["top_token_hit"].tolist() == [1.0, 0.0, 1.0]
    assert result.summary()["top_token_hit"] == pytest.approx(2 / 3)

    examples = pd.DataFrame({"example_id": ["a", "b", "c"], "correct": [True, True, False],
                             "token_labels": [[-100, *g, -100] for g in gold]})
    token_scores = pd.DataFrame({"method": "toy", "family": "gradient", "example_id": ["a", "b", "c"],
                                 "scores": [list(s) for s in scores]})
    table = score_methods(token_scores, examples, rho=0.34, thresholds={}, fold="heldout_x", held_out_task="x",
                          n_boot=50, seed=0)
    assert list(table.columns) == [*METRIC_COLUMNS, "top_token_hit", "top_token_hit_low", "top_token_hit_high"]
    row = table[(table["method"] == "toy") & (table["rule"] == "matched") & (table["subset"] == "all")].iloc[0]
    assert row["top_token_hit"] == pytest.approx(2 / 3)
    assert 0 <= row["top_token_hit_low"] <= row["top_token_hit"] <= row["top_token_hit_high"] <= 1
    incorrect = table[(table["subset"] == "incorrect") & (table["method"] == "toy")]
    assert incorrect["top_token_hit"].tolist() == [1.0, 1.0]  # example c alone, under the matched and own rules
    assert table[table["method"] == "all_tokens"]["top_token_hit"].notna().all()  # the floors are scored too
