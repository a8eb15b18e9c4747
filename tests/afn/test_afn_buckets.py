"""Percentile threshold, HIGH/LOW buckets and ranks on hand-made strengths."""
import math

import numpy as np
import pytest

from learned_attribution.services.afn.buckets import activation_threshold, high_mask, normalized_ranks, strength_ranks


def test_four_distinct_tokens_have_one_high():
    # linear 75th percentile of 1..4: position 0.75 * 3 = 2.25 -> 3 + 0.25 * (4 - 3) = 3.25
    assert activation_threshold([1, 2, 3, 4]) == pytest.approx(3.25)
    assert high_mask([4, 1, 3, 2]).tolist() == [True, False, False, False]


def test_eight_tokens_give_a_quarter_high():
    strengths = [8, 1, 7, 2, 6, 3, 5, 4]
    assert activation_threshold(strengths) == pytest.approx(6.25)  # 1 + 0.75 * 7
    assert high_mask(strengths).tolist() == [True, False, True, False, False, False, False, False]


def test_one_token_is_never_high():
    assert activation_threshold([2.5]) == 2.5
    assert high_mask([2.5]).tolist() == [False]
    assert math.isnan(normalized_ranks([2.5])[0])


def test_ties_follow_the_strict_rule():
    assert high_mask([2, 2, 2, 2]).tolist() == [False] * 4  # tau = 2, nothing strictly above
    # tau = 5 + 0.25 * (5 - 5) = 5: the tied top pair is not above it
    assert activation_threshold([1, 2, 5, 5]) == pytest.approx(5.0)
    assert high_mask([1, 2, 5, 5]).tolist() == [False] * 4
    # a tie below the threshold does not matter: tau = 3 + 0.25 * 6 = 4.5
    assert high_mask([3, 3, 3, 9]).tolist() == [False, False, False, True]


def test_other_percentile():
    assert high_mask([1, 2, 3, 4], percentile=50).tolist() == [False, False, True, True]  # tau = 2.5


def test_ranks_average_ties():
    assert strength_ranks([3, 1, 3]).tolist() == [1.5, 3.0, 1.5]
    assert strength_ranks([0.2, 0.9, 0.5]).tolist() == [3.0, 1.0, 2.0]
    assert normalized_ranks([4, 1, 2]).tolist() == [0.0, 1.0, 0.5]


@pytest.mark.parametrize("bad", [[], [[1.0, 2.0]], [1.0, np.nan]])
def test_bad_strengths_raise(bad):
    with pytest.raises(ValueError):
        high_mask(bad)


def test_bad_percentile_names_the_parameter():
    with pytest.raises(ValueError, match="afn.percentile"):
        activation_threshold([1, 2], percentile=120)
