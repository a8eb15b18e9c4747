"""A student of real-valued attributions in the one learned-explainer core: the `distill` objective
with per-example Spearman early stopping, and the fidelity metrics it is judged by."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.stats import spearmanr

from learned_attribution.core.metrics.fidelity import (example_spearman, mean_example_spearman, top_k_agreement,
                                                       top_k_overlap)
from learned_attribution.core.models.learned import Variant, fit_variant
from learned_attribution.core.models.learned.losses import distillation_loss


def test_example_spearman_equals_scipy_per_group_with_ties():
    rng = np.random.default_rng(0)
    groups = np.repeat([3, 1, 2], [7, 5, 9])
    a, b = rng.integers(0, 3, len(groups)).astype(float), rng.integers(0, 4, len(groups)).astype(float)
    expected = [spearmanr(a[groups == g], b[groups == g]).correlation for g in (1, 2, 3)]
    np.testing.assert_allclose(example_spearman(a, b, groups), expected)
    assert np.isnan(example_spearman([1.0, 1.0], [0.0, 1.0], [0, 0])[0])  # a constant side: undefined
    table = pd.DataFrame({"example_id": ["a", "b", "c"], "scores": [[1.0, 2, 3], [3.0, 2, 1], [1.0, 1, 1]]})
    reference = pd.DataFrame({"example_id": ["c", "b", "a"], "scores": [[1.0, 2, 3]] * 3})
    assert mean_example_spearman(table, reference) == 0.0  # +1 and -1; c's constant scores are left out


def test_top_k_overlap_known_answers():
    assert top_k_overlap([0.9, 0.1, 0.8, 0.2], [0.7, 0.6, 0.5, 0.0], 0.5) == 0.5  # {0, 2} vs {0, 1}
    assert top_k_overlap([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], 0.1) == 1.0  # k = 1 at least


def test_top_k_agreement_counts_tokens_and_caps_k_at_the_text():
    scores = [0.9, 0.1, 0.8, 0.2, 0.7, 0.0, 0.3]  # top 3: {0, 2, 4}
    reference = [0.8, 0.9, 0.1, 0.0, 0.7, 0.2, 0.3]  # top 3: {1, 0, 4}
    assert top_k_agreement(scores, reference, 3) == pytest.approx(2 / 3)
    assert top_k_agreement(scores, reference, 1) == 0.0  # 0 against 1
    assert top_k_agreement([3.0, 1.0], [1.0, 3.0], 5) == 1.0  # k capped at the 2 tokens: both agree on both


def test_the_distillation_loss_is_lowest_for_the_teachers_own_ranking_and_scale():
    targets = torch.tensor([[0.1, 2.0, 0.5, -1.0, 0.0]])
    mask = torch.tensor([[True, True, True, True, False]])
    same = distillation_loss(targets.clone(), targets, mask)
    scaled = distillation_loss(3 * targets + 1, targets, mask)  # the same z-scores, a sharper softmax
    reversed_ = distillation_loss(-targets, targets, mask)
    assert same < reversed_ and scaled < reversed_
    padded = distillation_loss(torch.tensor([[0.1, 2.0, 0.5, -1.0, 99.0]]), targets, mask)
    assert padded == pytest.approx(float(same))  # padding never counts


def teacher_rows(task: str, n_examples: int, seed: int) -> pd.DataFrame:
    """Signal rows whose teacher score is a noisy non-linear function of two of the three columns."""
    rng = np.random.default_rng(seed)
    rows = []
    for example in range(n_examples):
        n = int(rng.integers(5, 12))
        x = rng.normal(size=(n, 3))
        teacher = np.tanh(x[:, 0]) + 0.5 * x[:, 1] ** 2 + 0.1 * rng.normal(size=n)
        rows += [{"task": task, "example_id": f"{task}{example}", "token_label": teacher[i],
                  "s0": x[i, 0], "s1": x[i, 1], "s2": x[i, 2]} for i in range(n)]
    return pd.DataFrame(rows)


def test_a_student_learns_the_teachers_ranking_and_stops_on_validation_spearman(training_settings):
    train, val, test = teacher_rows("t", 120, 0), teacher_rows("t", 30, 1), teacher_rows("t", 30, 2)
    variant = Variant("student", feature_sets=("saliency",), objective="distill", stopping="example_spearman")
    settings = training_settings(hidden=16, batch_size=16, max_epochs=40, patience=4, seeds=2, learning_rate=1e-2)
    student = fit_variant(variant, train, val, target=None, stats_tables={}, columns=["s0", "s1", "s2"], rho=0.2, settings=settings)
    assert len(student.history) < settings.max_epochs  # it stopped on its validation Spearman
    predicted = student.predict(test[["s0", "s1", "s2"]].to_numpy(np.float32), test["example_id"].to_numpy())
    rho = np.nanmean(example_spearman(predicted, test["token_label"], test["example_id"]))
    assert rho > 0.8
    with pytest.raises(ValueError, match="distill .* goes with stopping example_spearman"):
        Variant("wrong", objective="distill")
