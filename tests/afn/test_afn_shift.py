"""Delta_i, R_H and per-pair summaries on hand-made hidden states."""
import math

import numpy as np
import pytest

from learned_attribution.services.afn.alignment import TokenUnit
from learned_attribution.services.afn.shift import contribution_ratio, pair_shift, unit_shifts


def test_contribution_ratio_on_hand_made_shifts():
    assert contribution_ratio([1, 2, 3, 4], [False, False, False, True]) == pytest.approx(0.4)
    assert contribution_ratio([1, 1, 1, 1], [True, False, False, False]) == pytest.approx(0.25)
    assert contribution_ratio([0.5, 0, 0, 0], [True, False, False, False]) == pytest.approx(1.0)
    assert contribution_ratio([2, 6], [False, False]) == 0.0
    assert math.isnan(contribution_ratio([0, 0], [True, False]))
    assert math.isnan(contribution_ratio([], []))


def test_contribution_ratio_rejects_bad_input():
    with pytest.raises(ValueError, match="negative"):
        contribution_ratio([-1, 2], [True, False])
    with pytest.raises(ValueError, match="shape"):
        contribution_ratio([1, 2], [True])


def test_unit_shift_compares_mean_states():
    hidden_a = np.array([[[0.0, 0.0], [2.0, 0.0], [4.0, 8.0]]])  # one layer, three tokens
    hidden_b = np.array([[[0.0, 0.0], [0.0, 0.0]]])
    units = [TokenUnit((0,), (0,), None, None, False), TokenUnit((1, 2), (1,), 0, 0, True)]
    # mean of A's tokens 1 and 2 = (3, 4): distance 5 from B's (0, 0)
    np.testing.assert_allclose(unit_shifts(hidden_a, hidden_b, units), [[0.0, 5.0]])


def test_pair_shift_and_r_h_by_hand():
    # A: [CLS] w0 w1 w2 w3 [SEP]; one layer, 2-d states. Strengths of w0..w3: 1, 2, 3, 10 -> tau = 4.75, HIGH = w3.
    hidden_a = np.array([[[0, 0], [1, 0], [2, 0], [3, 0], [10, 0], [0, 1]]], dtype=float)
    shifts = np.array([[0, 1], [0, 1], [0, 2], [0, 3], [0, 4], [0, 0]], dtype=float)  # Delta = 1, 1, 2, 3, 4, 0
    hidden_b = hidden_a + shifts[None]
    word_ids = [None, 0, 1, 2, 3, None]
    units = [TokenUnit((0,), (0,), None, None, False), TokenUnit((5,), (5,), None, None, False)]
    units += [TokenUnit((k + 1,), (k + 1,), k, k, k == 3) for k in range(4)]  # w3 is the swapped word
    shift = pair_shift(word_ids, hidden_a, hidden_b, units)
    np.testing.assert_allclose(shift.deltas[0], [1, 1, 2, 3, 4, 0])
    assert shift.high[0].tolist() == [False, False, False, False, True, False]
    assert shift.aligned.tolist() == [False, True, True, True, True, False]
    summary = shift.layer_summary(0)
    assert summary["r_h"] == pytest.approx(4 / 10)  # HIGH w3 carries 4 of 1 + 2 + 3 + 4
    assert summary["share_high"] == pytest.approx(0.25)
    assert summary["r_h_unchanged"] == 0.0  # no HIGH token among w0..w2
    assert summary["mean_shift_unchanged"] == pytest.approx(2.0)
    assert summary["mean_shift_changed"] == pytest.approx(4.0)
    assert summary["cls_shift"] == pytest.approx(1.0)
    assert (summary["n_aligned"], summary["n_changed"], summary["n_high"]) == (4, 1, 1)


def test_unaligned_tokens_stay_out_of_r_h():
    # A: [CLS] p w0 w1 w2 w3 [SEP] where p is a prompt prefix without a counterpart
    hidden_a = np.array([[[0, 0], [50, 0], [1, 0], [2, 0], [3, 0], [4, 0], [0, 0]]], dtype=float)
    hidden_b = np.array([[[0, 0], [1, 1], [2, 2], [3, 3], [4, 4], [0, 0]]], dtype=float)
    word_ids = [None, 0, 1, 2, 3, 4, None]
    units = [TokenUnit((k + 2,), (k + 1,), k + 1, k, False) for k in range(4)]
    shift = pair_shift(word_ids, hidden_a, hidden_b, units)
    # tau over A's five non-special tokens (1, 2, 3, 4, 50) = 4: only the prefix (50) is HIGH, and it is unaligned
    assert shift.high[0].tolist() == [False, True, False, False, False, False, False]
    assert math.isnan(shift.deltas[0, 1])
    summary = shift.layer_summary(0)
    assert summary["r_h"] == 0.0 and summary["n_aligned"] == 4
    assert summary["total_shift"] == pytest.approx(1 + 2 + 3 + 4)
    assert math.isnan(summary["cls_shift"])  # no special unit given


def test_pair_shift_checks_shapes():
    with pytest.raises(ValueError, match="3 tokens"):
        pair_shift([None, 0, None], np.zeros((1, 2, 2)), np.zeros((1, 2, 2)), [])
