"""Plausibility metrics on hand-computed cases (SPEC §9)."""
import math

import numpy as np
import pytest

from learned_attribution.core.metrics.plausibility import (
    all_tokens_masks,
    bootstrap_ci,
    budget_k,
    evaluate,
    finite_scores,
    paired_bootstrap_diff,
    precision_recall_f1,
    random_scores,
    threshold_mask,
    top_k_mask,
)


def _one(scores, gold, mask):
    return evaluate([np.asarray(scores, float)], [np.asarray(gold)], [np.asarray(mask, bool)])


# --- budgets and masks -------------------------------------------------------------------------

@pytest.mark.parametrize("n, rho, expected", [
    (10, 0.25, 3),   # 2.5 rounds up (Python's round gives 2)
    (10, 0.35, 4),   # 0.35 * 10 = 3.4999999999999996 in floats: still a half, rounds up
    (10, 0.34, 3),
    (10, 0.01, 1),   # at least one token
    (10, 0.0, 1),
    (4, 0.5, 2),
    (7, 1.0, 7),
])
def test_budget_k_rounds_half_up_with_minimum_one(n, rho, expected):
    assert budget_k(n, rho) == expected


@pytest.mark.parametrize("n, rho", [(0, 0.3), (-1, 0.3), (5, 1.5), (5, -0.1)])
def test_budget_k_rejects_bad_input(n, rho):
    with pytest.raises(ValueError):
        budget_k(n, rho)


def test_top_k_ties_at_the_boundary_go_to_the_earlier_position():
    scores = np.array([0.2, 0.9, 0.5, 0.9, 0.5])
    assert top_k_mask(scores, 1).tolist() == [False, True, False, False, False]
    assert top_k_mask(scores, 2).tolist() == [False, True, False, True, False]
    assert top_k_mask(scores, 3).tolist() == [False, True, True, True, False]  # 0.5 at 2 beats 0.5 at 4
    assert top_k_mask(np.zeros(4), 2).tolist() == [True, True, False, False]
    assert top_k_mask(scores, 9).all()


def test_threshold_mask_keeps_passing_tokens_and_falls_back_to_the_best_one():
    assert threshold_mask(np.array([0.6, 0.2, 0.5]), 0.5).tolist() == [True, False, True]  # >= passes
    # Nothing passes: the single highest token, the earlier one on a tie.
    assert threshold_mask(np.array([0.2, 0.4, 0.4, 0.1]), 0.5).tolist() == [False, True, False, False]


# --- per-example values ----------------------------------------------------------------------

def test_precision_recall_f1_by_hand():
    gold = np.array([1, 1, 0, 0, 1])
    p, r, f = precision_recall_f1(np.array([1, 0, 1, 0, 0], bool), gold)
    assert (p, r) == (0.5, pytest.approx(1 / 3))
    assert f == pytest.approx(2 * 0.5 * (1 / 3) / (0.5 + 1 / 3))  # 0.4
    assert precision_recall_f1(np.array([0, 0, 1, 1, 0], bool), gold) == (0.0, 0.0, 0.0)
    assert precision_recall_f1(np.zeros(5, bool), gold) == (0.0, 0.0, 0.0)  # empty mask: precision 0


def test_perfect_scores():
    result = _one([0.1, 0.9, 0.8, 0.2, 0.3], [0, 1, 1, 0, 0], top_k_mask(np.array([0.1, 0.9, 0.8, 0.2, 0.3]), 2))
    assert (result.f1, result.precision, result.recall) == (1.0, 1.0, 1.0)
    assert result.auroc == 1.0 and result.auroc_pooled == 1.0
    assert result.auprc == 1.0
    assert (result.n_auroc_undefined, result.n_constant_scores, result.n_nonfinite_scores) == (0, 0, 0)


def test_inverted_scores():
    scores = -np.array([0.1, 0.9, 0.8, 0.2, 0.3])
    result = _one(scores, [0, 1, 1, 0, 0], top_k_mask(scores, 2))
    assert result.auroc == 0.0
    assert result.f1 == 0.0  # top-2 are positions 0 and 3, both negative
    # Positives ranked 4th and 5th: AP = 1/2 * 1/4 + 1/2 * 2/5.
    assert result.auprc == pytest.approx(0.325)


def test_constant_scores_are_counted_and_get_auroc_one_half():
    scores = np.full(4, 0.5)
    result = _one(scores, [1, 0, 0, 1], top_k_mask(scores, 2))
    assert result.n_constant_scores == 1
    assert result.auroc == 0.5
    assert result.auprc == pytest.approx(0.5)  # the rationale density
    assert (result.precision, result.recall, result.f1) == (0.5, 0.5, 0.5)  # positions 0, 1 by the tie rule
    assert bool(result.per_example["constant_scores"].iloc[0])


def test_one_token_example_is_excluded_from_auroc_and_counted_but_has_f1():
    scores = [np.array([0.3]), np.array([0.9, 0.1, 0.2]), np.array([0.4, 0.6, 0.5])]
    gold = [np.array([1]), np.array([1, 0, 0]), np.array([1, 1, 1])]
    masks = [np.array([True]), np.array([True, False, False]), np.array([False, True, False])]
    result = evaluate(scores, gold, masks)
    assert result.n_examples == 3
    assert result.n_auroc_undefined == 2  # the one-token and the all-positive example
    assert result.auroc == 1.0 and result.auprc == 1.0  # from the middle example only, not dragged to 0 or 1
    table = result.per_example
    assert table["auroc"].isna().tolist() == [True, False, True]
    assert table["f1"].tolist() == pytest.approx([1.0, 1.0, 0.5])  # 1/3 recall, precision 1 -> F1 0.5
    assert result.f1 == pytest.approx(2.5 / 3)
    assert result.n_constant_scores == 0  # a single token is not a "constant" method output


def test_all_tokens_floor_f1_is_2d_over_1_plus_d():
    gold = [np.array([1, 0, 0, 0]), np.array([1, 1, 0]), np.array([1, 1, 1, 1, 1, 0, 0, 0, 0, 0])]
    masks = all_tokens_masks(gold)
    assert [m.tolist() for m in masks] == [[True] * 4, [True] * 3, [True] * 10]
    result = evaluate([np.ones(len(g)) for g in gold], gold, masks)
    densities = np.array([0.25, 2 / 3, 0.5])
    expected = 2 * densities / (1 + densities)
    assert result.per_example["f1"].to_numpy() == pytest.approx(expected)
    assert result.f1 == pytest.approx(expected.mean())
    assert result.recall == 1.0
    assert result.auroc == 0.5 and result.n_constant_scores == 3


def test_micro_and_macro_differ_as_computed_by_hand():
    gold = [np.array([1, 0, 0, 0]), np.array([1, 1, 1, 1, 0, 0])]
    masks = [np.array([1, 1, 0, 0], bool), np.array([1, 0, 0, 0, 0, 0], bool)]
    scores = [m.astype(float) for m in masks]
    result = evaluate(scores, gold, masks)
    # Example A: P 1/2, R 1, F1 2/3.  Example B: P 1, R 1/4, F1 2/5.
    assert result.precision == pytest.approx(0.75)
    assert result.recall == pytest.approx(0.625)
    assert result.f1 == pytest.approx((2 / 3 + 2 / 5) / 2)
    # Pooled: TP 2, FP 1, FN 3 -> P 2/3, R 2/5, F1 1/2.
    assert result.precision_micro == pytest.approx(2 / 3)
    assert result.recall_micro == pytest.approx(0.4)
    assert result.f1_micro == pytest.approx(0.5)


def test_pooled_auroc_differs_from_the_per_example_mean():
    scores = [np.array([0.9, 0.1]), np.array([0.05, 0.02])]
    gold = [np.array([1, 0]), np.array([1, 0])]
    result = evaluate(scores, gold, [top_k_mask(s, 1) for s in scores])
    assert result.auroc == 1.0
    # Pooled positives {0.9, 0.05} vs negatives {0.1, 0.02}: 3 of 4 pairs ordered right.
    assert result.auroc_pooled == pytest.approx(0.75)


def test_nonfinite_scores_are_counted_and_scored_as_the_minimum_finite_value():
    raw = np.array([np.nan, 0.9, np.inf, 0.1])
    assert finite_scores(raw).tolist() == [0.1, 0.9, 0.1, 0.1]
    gold = np.array([0, 1, 0, 1])
    result = evaluate([raw], [gold], [top_k_mask(raw, 2)])
    assert result.n_nonfinite_scores == 1
    # Positives {0.9, 0.1} vs negatives {0.1, 0.1}: 1 + 1 + 1/2 + 1/2 over 4 pairs.
    assert result.auroc == pytest.approx(0.75)
    assert top_k_mask(raw, 2).tolist() == [True, True, False, False]  # inf is not rewarded
    all_nan = evaluate([np.full(3, np.nan)], [np.array([1, 0, 0])], [np.array([1, 0, 0], bool)])
    assert (all_nan.n_nonfinite_scores, all_nan.n_constant_scores, all_nan.auroc) == (1, 1, 0.5)


def test_evaluate_rejects_bad_input_naming_the_example():
    good = np.array([1, 0])
    with pytest.raises(ValueError, match="example 1.*empty"):
        evaluate([np.ones(2), np.ones(2)], [good, np.array([0, 0])], [np.ones(2, bool)] * 2)
    with pytest.raises(ValueError, match="example 0.*lengths"):
        evaluate([np.ones(3)], [good], [np.ones(2, bool)])
    with pytest.raises(ValueError, match=r"gold_list\[0\].*0/1"):
        evaluate([np.ones(2)], [np.array([2, 0])], [np.ones(2, bool)])
    with pytest.raises(ValueError, match="one entry per example"):
        evaluate([np.ones(2)], [good, good], [np.ones(2, bool)])


def test_summary_and_per_example_table():
    result = _one([0.9, 0.1], [1, 0], [True, False])
    summary = result.summary()
    assert "per_example" not in summary and summary["n_examples"] == 1 and summary["f1"] == 1.0
    assert list(result.per_example.columns) == ["example", "n_tokens", "n_gold", "f1", "precision", "recall",
                                                "auroc", "auprc", "nonfinite_scores", "constant_scores"]


def test_random_scores_are_reproducible_per_seed():
    first, again, other = random_scores([3, 1, 5], 7), random_scores([3, 1, 5], 7), random_scores([3, 1, 5], 8)
    assert [len(s) for s in first] == [3, 1, 5]
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    assert not np.array_equal(first[0], other[0])
    assert all(((s >= 0) & (s < 1)).all() for s in first)


# --- bootstrap -------------------------------------------------------------------------------

def test_bootstrap_ci_contains_the_mean_is_deterministic_and_drops_nans():
    values = np.random.default_rng(0).normal(0.6, 0.2, size=200)
    low, high = bootstrap_ci(values, n_boot=500, seed=3)
    assert low < values.mean() < high
    # The standard error is 0.2 / sqrt(200) = 0.014; a 95% interval is about 4 of them wide.
    assert 0.03 < high - low < 0.08
    assert bootstrap_ci(values, n_boot=500, seed=3) == (low, high)
    assert bootstrap_ci(values, n_boot=500, seed=4) != (low, high)
    assert bootstrap_ci(np.append(values, [np.nan, np.nan]), n_boot=500, seed=3) == (low, high)
    assert bootstrap_ci(np.full(10, 0.3)) == pytest.approx((0.3, 0.3))
    assert all(math.isnan(v) for v in bootstrap_ci([np.nan]))


def test_paired_bootstrap_sees_a_consistent_gain_that_unpaired_intervals_miss():
    noise = np.random.default_rng(1).uniform(0, 1, size=100)
    gain = np.random.default_rng(2).normal(0.05, 0.01, size=100)
    b, a = noise, noise + gain
    mean_diff, low, high = paired_bootstrap_diff(a, b, n_boot=500, seed=0)
    assert mean_diff == pytest.approx(gain.mean())
    assert 0 < low < mean_diff < high < 0.1
    # Unpaired, the two methods' intervals overlap: the per-example pairing is what reveals the gain.
    a_low, a_high = bootstrap_ci(a, n_boot=500, seed=0)
    b_low, b_high = bootstrap_ci(b, n_boot=500, seed=0)
    assert a_low < b_high
    assert paired_bootstrap_diff(a, b, n_boot=500, seed=0) == (mean_diff, low, high)
    # A pair with a NaN on either side is dropped.
    with_nan = paired_bootstrap_diff(np.append(a, np.nan), np.append(b, 0.5), n_boot=500, seed=0)
    assert with_nan == (mean_diff, low, high)
    with pytest.raises(ValueError, match="values_a and values_b"):
        paired_bootstrap_diff(a, b[:-1])
