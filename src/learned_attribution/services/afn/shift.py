"""Activation shift between two aligned inputs and the share R_H carried by HIGH tokens (SPEC §10).

Delta_i = ||h_A,i - h_B,i||_2 for every aligned token i of A at every layer (the token units of
`alignment.align_tokens`; a unit of several subwords compares mean states and gives its Delta to each
of A's subwords). R_H = sum of Delta_i over A's HIGH tokens / sum over all of A's aligned non-special
tokens, with HIGH from A's own buckets (its percentile threshold over all its non-special tokens,
prefix included for a prompt pair). Special tokens and unaligned tokens (prompt prefixes, inserted
words) carry no Delta in R_H.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .alignment import TokenUnit
from .buckets import high_mask
from .strength import token_strengths


def unit_shifts(hidden_a: np.ndarray, hidden_b: np.ndarray, units: Sequence[TokenUnit]) -> np.ndarray:
    """[n_layers + 1, n_units] L2 distance between the (mean) states of each unit's A and B tokens."""
    if hidden_a.shape[0] != hidden_b.shape[0] or hidden_a.shape[-1] != hidden_b.shape[-1]:
        raise ValueError(f"hidden states of A {hidden_a.shape} and B {hidden_b.shape} differ in layers or width")
    shifts = np.empty((hidden_a.shape[0], len(units)))
    for k, unit in enumerate(units):
        mean_a = hidden_a[:, list(unit.tokens_a)].mean(axis=1)
        mean_b = hidden_b[:, list(unit.tokens_b)].mean(axis=1)
        shifts[:, k] = np.linalg.norm(mean_a - mean_b, axis=-1)
    return shifts


def contribution_ratio(deltas, high) -> float:
    """R_H = sum(Delta over HIGH tokens) / sum(Delta over all tokens); NaN when the total shift is 0."""
    deltas, high = np.asarray(deltas, dtype=float), np.asarray(high, dtype=bool)
    if deltas.shape != high.shape:
        raise ValueError(f"deltas {deltas.shape} and HIGH mask {high.shape} differ in shape")
    if np.any(deltas < 0):
        raise ValueError("shifts are norms and cannot be negative")
    total = deltas.sum()
    return float(deltas[high].sum() / total) if total > 0 else float("nan")


@dataclass
class PairShift:
    """Per-token shift of one pair, seen from A: arrays over A's tokens, [n_layers + 1, n_tokens_a] or [n_tokens_a]."""

    deltas: np.ndarray  # NaN where A's token has no counterpart
    strengths: np.ndarray  # S_i of A
    high: np.ndarray  # A's HIGH bucket (always False on special tokens)
    special: np.ndarray  # [n_tokens_a] special token of A
    aligned: np.ndarray  # [n_tokens_a] a non-special token with a counterpart in B
    changed: np.ndarray  # [n_tokens_a] belongs to a changed (swapped) word

    def layer_summary(self, layer: int) -> dict:
        """R_H and shift statistics of one layer (keys are the pair table's columns)."""
        deltas, high = self.deltas[layer], self.high[layer]
        aligned, unchanged = self.aligned, self.aligned & ~self.changed
        first_special = np.flatnonzero(self.special)[:1]
        return {
            "n_aligned": int(aligned.sum()),
            "n_changed": int((aligned & self.changed).sum()),
            "n_high": int(high[aligned].sum()),
            "share_high": float(high[aligned].mean()) if aligned.any() else float("nan"),
            "r_h": contribution_ratio(deltas[aligned], high[aligned]),
            "r_h_unchanged": contribution_ratio(deltas[unchanged], high[unchanged]),
            "share_high_unchanged": float(high[unchanged].mean()) if unchanged.any() else float("nan"),
            "total_shift": float(deltas[aligned].sum()),
            "mean_shift_unchanged": float(deltas[unchanged].mean()) if unchanged.any() else float("nan"),
            "mean_shift_changed": (float(deltas[aligned & self.changed].mean())
                                   if (aligned & self.changed).any() else float("nan")),
            "cls_shift": float(deltas[first_special[0]]) if first_special.size else float("nan"),
        }


def pair_shift(word_ids_a: Sequence[int | None], hidden_a: np.ndarray, hidden_b: np.ndarray,
               units: Sequence[TokenUnit], percentile: float = 75.0) -> PairShift:
    """Delta_i at every layer for A's tokens, with A's buckets at every layer."""
    n_tokens = len(word_ids_a)
    if hidden_a.shape[1] != n_tokens:
        raise ValueError(f"A has {n_tokens} tokens but {hidden_a.shape[1]} hidden states")
    special = np.array([word is None for word in word_ids_a])
    if special.all():
        raise ValueError("input A has no non-special token")
    strengths = token_strengths(hidden_a)
    high = np.zeros_like(strengths, dtype=bool)
    for layer in range(strengths.shape[0]):
        high[layer, ~special] = high_mask(strengths[layer, ~special], percentile)
    deltas = np.full(strengths.shape, np.nan)
    aligned, changed = np.zeros(n_tokens, dtype=bool), np.zeros(n_tokens, dtype=bool)
    shifts = unit_shifts(hidden_a, hidden_b, units)
    for k, unit in enumerate(units):
        for token in unit.tokens_a:
            deltas[:, token] = shifts[:, k]
            aligned[token] = not unit.special
            changed[token] = unit.changed
    return PairShift(deltas, strengths, high, special, aligned, changed)
