"""Fidelity of one attribution to another (a student against its teacher): per-example Spearman
correlation and top-k overlap, on one example's non-special tokens at a time (as `plausibility`)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd



def example_spearman(scores: np.ndarray, reference: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Spearman's rho between `scores` and `reference` within every group of tokens (`groups`: one example id per
    token; average ranks for ties), one value per distinct group in sorted group order; NaN for a group of fewer
    than two tokens or with a constant side."""
    frame = pd.DataFrame({"g": np.asarray(groups).ravel(), "a": np.asarray(scores, float).ravel(),
                          "b": np.asarray(reference, float).ravel()})
    ranked = frame.groupby("g", sort=True)[["a", "b"]].rank(method="average")
    ranked["g"] = frame["g"]
    centred = ranked[["a", "b"]] - ranked.groupby("g")[["a", "b"]].transform("mean")
    centred["g"] = frame["g"]
    centred["ab"], centred["aa"], centred["bb"] = (centred["a"] * centred["b"], centred["a"] ** 2, centred["b"] ** 2)
    sums = centred.groupby("g", sort=True)[["ab", "aa", "bb"]].sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = sums["ab"] / np.sqrt(sums["aa"] * sums["bb"])
    return np.where((sums["aa"] > 0) & (sums["bb"] > 0), rho.to_numpy(), np.nan)


def top_k_agreement(scores: np.ndarray, reference: np.ndarray, k: int) -> float:
    """|top-k(scores) & top-k(reference)| / k, k capped at the number of tokens (ties by position, the earlier token
    first, as the plausibility masks)."""
    scores, reference = np.asarray(scores, float), np.asarray(reference, float)
    k = max(1, min(int(k), len(scores)))
    top = set(np.argsort(-scores, kind="mergesort")[:k])
    return len(top & set(np.argsort(-reference, kind="mergesort")[:k])) / k


def top_k_overlap(scores: np.ndarray, reference: np.ndarray, fraction: float) -> float:
    """`top_k_agreement` with k = max(1, round(fraction x n)), a share of the text's n tokens."""
    return top_k_agreement(scores, reference, int(np.floor(fraction * len(np.asarray(scores)) + 0.5)))


def paired_scores(table: pd.DataFrame, reference: pd.DataFrame) -> list[tuple[np.ndarray, np.ndarray]]:
    """(candidate scores, reference scores) of every example of `table` (example_id, scores) the reference has."""
    reference_by_id = dict(zip(reference["example_id"], reference["scores"]))
    return [(np.asarray(s, float), np.asarray(reference_by_id[i], float))
            for i, s in zip(table["example_id"], table["scores"]) if i in reference_by_id]


def example_spearmans(pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Per-example Spearman of each (scores, reference) pair."""
    groups = np.concatenate([np.full(len(a), k) for k, (a, _) in enumerate(pairs)])
    return example_spearman(np.concatenate([a for a, _ in pairs]), np.concatenate([b for _, b in pairs]), groups)


def mean_example_spearman(table: pd.DataFrame, reference: pd.DataFrame) -> float:
    """Mean per-example Spearman of `table`'s token scores with `reference`'s (both: example_id, scores)."""
    return float(np.nanmean(example_spearmans(paired_scores(table, reference))))
