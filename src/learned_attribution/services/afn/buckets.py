"""Activation buckets and ranks within one sentence (SPEC §10).

tau = the `percentile` (default 75th) of the sentence's strengths over its non-special tokens, with
numpy's default linear interpolation; HIGH tokens have S_i > tau (strictly), LOW the rest. Consequences
of the strict rule, kept on purpose because they are the paper's definition: a one-token sentence has no
HIGH token (tau = S), and neither has a sentence whose top strengths tie at or above the 75th percentile
(e.g. all equal). With four distinct strengths exactly one token is HIGH.
"""
from __future__ import annotations

import numpy as np


def _as_strengths(strengths) -> np.ndarray:
    values = np.asarray(strengths, dtype=float)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"need a non-empty 1-D array of token strengths, got shape {values.shape}")
    if not np.all(np.isfinite(values)):
        raise ValueError("token strengths must be finite")
    return values


def activation_threshold(strengths, percentile: float = 75.0) -> float:
    """tau = the `percentile` of one sentence's token strengths (linear interpolation)."""
    if not 0 <= percentile <= 100:
        raise ValueError(f"parameter afn.percentile={percentile!r}: must lie in 0..100")
    return float(np.percentile(_as_strengths(strengths), percentile))


def high_mask(strengths, percentile: float = 75.0) -> np.ndarray:
    """HIGH (True) where S_i > tau, LOW (False) elsewhere."""
    values = _as_strengths(strengths)
    return values > activation_threshold(values, percentile)


def strength_ranks(strengths) -> np.ndarray:
    """Rank of every token by strength within its sentence, 1 = strongest; ties share their mean rank."""
    values = _as_strengths(strengths)
    order = np.argsort(-values, kind="stable")
    ranks = np.empty(values.size)
    ranks[order] = np.arange(1, values.size + 1)
    for value in np.unique(values):  # average the ranks of tied strengths
        tied = values == value
        ranks[tied] = ranks[tied].mean()
    return ranks


def normalized_ranks(strengths) -> np.ndarray:
    """(rank - 1) / (n - 1): 0 for the strongest token, 1 for the weakest, so sentences of different lengths
    compare; NaN for a one-token sentence, where a rank says nothing."""
    ranks = strength_ranks(strengths)
    if ranks.size == 1:
        return np.array([np.nan])
    return (ranks - 1) / (ranks.size - 1)
