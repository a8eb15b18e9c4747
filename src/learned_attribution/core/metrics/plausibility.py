"""Plausibility metrics (SPEC §9): how well token scores agree with human rationales.

Every function here works on ONE example's non-special subword tokens: callers strip [CLS], [SEP]
and padding first. Per example, `scores` is a 1-D float array (higher = more important) and `gold`
a 1-D 0/1 array of the same length (the projected human rationale).

Rules decided here (the spec is silent on them):
- Budgets round half up: k = max(1, floor(rho * n + 0.5)) (Python's `round` rounds half to even,
  which would give k = 2 for 2.5 tokens but k = 4 for 3.5).
- Top-k ties are broken by position: the earlier token wins, so masks are deterministic.
- Non-finite scores (NaN, +inf, -inf) are not kept silently: the example is counted in
  `n_nonfinite_scores`, and its non-finite entries are scored as the example's minimum finite score
  (as "least important": a broken score is never rewarded); an example with no finite score at all
  becomes all zeros, i.e. constant. The same replacement is used by the mask helpers, so masks and
  ranking metrics see the same scores.
- Constant scores (all equal, on examples of two or more tokens) are counted in
  `n_constant_scores`; they get AUROC 0.5 (ties count one half) and AUPRC = the rationale density.
- AUROC and AUPRC are undefined on an example whose gold rationale has one class only (all tokens
  positive, e.g. a one-token example): such examples are excluded from the per-example means and
  counted in `n_auroc_undefined`, never scored as 0 or 1. AUPRC uses the same exclusion because on an
  all-positive example average precision is 1 whatever the scores.
- Precision of an empty mask is 0; recall with no gold positive is 0; F1 is 0 when there is no
  overlap. `evaluate` refuses examples with an empty gold rationale (callers filter them, SPEC §1).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from .registry import EXAMPLE_METRICS, register_metric


def auroc_score(gold: np.ndarray, scores: np.ndarray) -> float:
    """ROC AUC of 0/1 `gold` (both classes present) by the Mann-Whitney statistic with average ranks for
    ties: equal to sklearn's `roc_auc_score` (tested against it). One example's `example_aurocs`."""
    return float(example_aurocs(scores, gold, np.zeros(len(gold), dtype=np.int64))[0])


def example_aurocs(scores: np.ndarray, gold: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """The AUROC of every group of tokens (`groups`: one example id per token) in one vectorised pass: the
    Mann-Whitney statistic with average ranks for ties within the group, the project's one AUROC (the metrics,
    ExpNet+'s early stopping and the selection all read it; with one group for every token it is the pooled token
    AUROC of the paper's ExpNet's stopping rule). One value per distinct group, in sorted group order; NaN for a
    group without both classes. `gold` is a rationale flag (> 0.5: rationale token, so soft labels count by it)."""
    scores = np.asarray(scores, dtype=np.float64).ravel()
    positive = np.asarray(gold, dtype=np.float64).ravel() > 0.5
    _, codes = np.unique(np.asarray(groups).ravel(), return_inverse=True)
    order = np.lexsort((scores, codes))
    sorted_scores, sorted_codes, sorted_positive = scores[order], codes[order], positive[order]
    n = len(order)
    new_group = np.r_[True, sorted_codes[1:] != sorted_codes[:-1]]
    new_block = new_group | np.r_[True, sorted_scores[1:] != sorted_scores[:-1]]  # a block: tied scores of a group
    block_start = np.flatnonzero(new_block)
    block_end = np.r_[block_start[1:], n]  # exclusive
    block = np.cumsum(new_block) - 1
    group_start = np.maximum.accumulate(np.where(new_group, np.arange(n), 0))
    rank = (block_start[block] + block_end[block] - 1) / 2 - group_start + 1  # 1-based, ties averaged
    size = np.bincount(sorted_codes)
    n_positive = np.bincount(sorted_codes, weights=sorted_positive)
    rank_sum = np.bincount(sorted_codes, weights=rank * sorted_positive)
    n_negative = size - n_positive
    with np.errstate(divide="ignore", invalid="ignore"):
        aurocs = (rank_sum - n_positive * (n_positive + 1) / 2) / (n_positive * n_negative)
    return np.where((n_positive > 0) & (n_negative > 0), aurocs, np.nan)


def mean_example_auroc(scores_list: Sequence[np.ndarray], gold_list: Sequence[np.ndarray]) -> float:
    """Mean per-example AUROC over the examples with both classes (NaN when there is none)."""
    return mean_per_example(example_aurocs, scores_list, gold_list)


def mean_per_example(per_group, scores_list: Sequence[np.ndarray], reference_list: Sequence[np.ndarray]) -> float:
    """The mean over examples of `per_group(scores, reference, groups)` (a vectorised per-example statistic, e.g.
    `example_aurocs`), over the examples where it is defined (NaN when none is)."""
    if not len(scores_list):
        return float("nan")
    groups = np.repeat(np.arange(len(scores_list)), [len(s) for s in scores_list])
    values = per_group(np.concatenate(scores_list), np.concatenate(reference_list), groups)
    return float(np.nanmean(values)) if np.isfinite(values).any() else float("nan")


def average_precision(gold: np.ndarray, scores: np.ndarray) -> float:
    """Average precision as sklearn's `average_precision_score` computes it (sum over distinct score
    thresholds, highest first, of the recall step times the precision there); tested against it."""
    gold = np.asarray(gold, dtype=float)
    order = np.argsort(-np.asarray(scores, dtype=float), kind="mergesort")
    sorted_scores, sorted_gold = np.asarray(scores, dtype=float)[order], gold[order]
    last_of_tie = np.r_[np.nonzero(np.diff(sorted_scores))[0], sorted_gold.shape[0] - 1]
    true_positives = np.cumsum(sorted_gold)[last_of_tie]
    precision = true_positives / (last_of_tie + 1)
    recall = true_positives / true_positives[-1]
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


@register_metric("auprc")
def example_auprc(scores: np.ndarray, gold: np.ndarray) -> float:
    """Average precision of one example; undefined (NaN) where its gold rationale has one class only."""
    return average_precision(gold, scores) if 0 < gold.sum() < gold.shape[0] else float("nan")


def example_auprcs(scores: np.ndarray, gold: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """`example_auprc` of every group of tokens (`groups`: one example id per token) in one vectorised pass, in
    sorted group order: per group, the sum over its distinct scores, highest first, of the recall step times the
    precision there. NaN for a group without both classes."""
    scores = np.asarray(scores, dtype=np.float64).ravel()
    positive = (np.asarray(gold, dtype=np.float64).ravel() > 0.5).astype(np.float64)
    _, codes = np.unique(np.asarray(groups).ravel(), return_inverse=True)
    order = np.lexsort((-scores, codes))
    sorted_scores, sorted_codes, sorted_positive = scores[order], codes[order], positive[order]
    size = np.bincount(sorted_codes)
    group_start = np.r_[0, np.cumsum(size)[:-1]]
    # The last token of each block of tied scores within a group: a threshold of the precision-recall curve.
    last = np.r_[(sorted_codes[1:] != sorted_codes[:-1]) | (sorted_scores[1:] != sorted_scores[:-1]), True]
    cumulative = np.cumsum(sorted_positive)
    true_positives = cumulative - (cumulative[group_start] - sorted_positive[group_start])[sorted_codes]
    ends = np.flatnonzero(last)
    end_codes = sorted_codes[ends]
    end_tp = true_positives[ends]
    previous_tp = np.r_[0.0, end_tp[:-1]]
    previous_tp[np.r_[True, end_codes[1:] != end_codes[:-1]]] = 0.0  # a group's first threshold starts at 0
    precision = end_tp / (ends - group_start[end_codes] + 1)
    n_positive = np.bincount(sorted_codes, weights=sorted_positive)
    with np.errstate(divide="ignore", invalid="ignore"):
        auprcs = np.bincount(end_codes, weights=(end_tp - previous_tp) * precision, minlength=len(size)) / n_positive
    return np.where((n_positive > 0) & (n_positive < size), auprcs, np.nan)


def budget_k(n_tokens: int, rho: float) -> int:
    """Number of tokens a top-k explanation marks: max(1, round-half-up(rho * n_tokens)).

    Rounds half up (floor(x + 0.5)), not Python's banker's rounding. `rho * n` is first rounded to 9
    decimals so that float error (0.35 * 10 = 3.4999999999999996) does not push a half down.
    """
    if int(n_tokens) != n_tokens or n_tokens < 1:
        raise ValueError(f"n_tokens must be a positive integer, got {n_tokens!r}")
    if not (0.0 <= rho <= 1.0):
        raise ValueError(f"rho (rationale density) must lie in [0, 1], got {rho!r}")
    return max(1, math.floor(round(rho * n_tokens, 9) + 0.5))


def finite_scores(scores: np.ndarray) -> np.ndarray:
    """A float copy of `scores` with NaN/inf replaced by the minimum finite score (0 if none is finite)."""
    scores = np.asarray(scores, dtype=float)
    finite = np.isfinite(scores)
    if finite.all():
        return scores.copy()
    fill = scores[finite].min() if finite.any() else 0.0
    return np.where(finite, scores, fill)


def top_k_mask(scores: np.ndarray, k: int) -> np.ndarray:
    """Boolean mask of the k highest scores; among equal scores the earlier position wins.

    Non-finite scores are first replaced as in `finite_scores`. k is capped at the number of tokens.
    """
    scores = _one_dimensional(scores, "scores")
    if int(k) != k or k < 0:
        raise ValueError(f"k must be a non-negative integer, got {k!r}")
    # A stable sort of the negated scores keeps equal scores in position order.
    order = np.argsort(-finite_scores(scores), kind="stable")
    mask = np.zeros(scores.shape[0], dtype=bool)
    mask[order[: int(k)]] = True
    return mask


def threshold_mask(probabilities: np.ndarray, threshold: float) -> np.ndarray:
    """Tokens with probability >= threshold; if none passes, the single highest one (earliest on ties).

    This is ExpNet's inference rule (SPEC §6): an explanation is never empty. Non-finite values are
    first replaced as in `finite_scores`.
    """
    probabilities = finite_scores(_one_dimensional(probabilities, "probabilities"))
    if probabilities.shape[0] == 0:
        raise ValueError("probabilities is empty: an example needs at least one token")
    mask = probabilities >= threshold
    if not mask.any():
        mask[int(np.argmax(probabilities))] = True  # argmax returns the first maximum
    return mask


def precision_recall_f1(mask: np.ndarray, gold: np.ndarray) -> tuple[float, float, float]:
    """Token precision, recall and F1 of one predicted mask against one gold rationale.

    Precision is 0 when nothing is predicted, recall 0 when gold has no positive, F1 0 without overlap.
    """
    mask = _one_dimensional(mask, "mask").astype(bool)
    gold = _gold_array(gold, "gold")
    if mask.shape != gold.shape:
        raise ValueError(f"mask has {mask.shape[0]} tokens but gold has {gold.shape[0]}")
    tp, fp, fn = _counts(mask, gold)
    return _prf(tp, fp, fn)


BUILT_IN = ("auprc",)  # registered metrics that are fields of `MethodScores` (auprc with its pooled twin)


@dataclass
class MethodScores:
    """Plausibility of one method on a set of examples: summary numbers and per-example values.

    f1/precision/recall, auroc and auprc are means over examples (auroc/auprc over the examples where
    they are defined); the *_micro and *_pooled values pool every token of every example.
    `per_example` has one row per example (columns example, n_tokens, n_gold, f1, precision, recall,
    auroc, auprc, nonfinite_scores, constant_scores) for bootstrap intervals.
    """

    n_examples: int
    f1: float
    precision: float
    recall: float
    f1_micro: float
    precision_micro: float
    recall_micro: float
    auroc: float
    auroc_pooled: float
    auprc: float
    auprc_pooled: float
    n_auroc_undefined: int
    n_nonfinite_scores: int
    n_constant_scores: int
    per_example: pd.DataFrame = field(repr=False)
    registered: dict[str, float] = field(default_factory=dict)  # every other registered metric's mean

    def summary(self) -> dict[str, float | int]:
        """The summary numbers as a flat dict (everything but `per_example`, the registered metrics beside the
        rest), e.g. for a metrics row or MLflow."""
        values = asdict(self)
        values.pop("per_example")
        registered = values.pop("registered")
        return {**values, **registered}


def evaluate(scores_list: Sequence[np.ndarray], gold_list: Sequence[np.ndarray],
             masks_list: Sequence[np.ndarray]) -> MethodScores:
    """Score one method: its token scores (ranking metrics) and its masks (F1) against gold rationales.

    All three lists hold one 1-D array per example over its non-special tokens. Every gold rationale
    must have at least one positive token (ValueError naming the example index otherwise).
    Non-finite and constant scores are handled as described in the module docstring.
    """
    return evaluate_subsets(scores_list, gold_list, masks_list, {"all": range(len(gold_list))})["all"]


def evaluate_subsets(scores_list: Sequence[np.ndarray], gold_list: Sequence[np.ndarray],
                     masks_list: Sequence[np.ndarray], subsets: Mapping[str, Sequence[int]]
                     ) -> dict[str, MethodScores]:
    """`evaluate` on several subsets of the same examples (name -> example positions; an empty subset is left
    out), each example's metrics computed once."""
    if not (len(scores_list) == len(gold_list) == len(masks_list)):
        raise ValueError(f"scores_list, gold_list and masks_list must have one entry per example; got "
                         f"{len(scores_list)}, {len(gold_list)} and {len(masks_list)}")
    if len(gold_list) == 0:
        raise ValueError("evaluate needs at least one example; gold_list is empty")

    rows = []
    all_scores, all_gold = [], []
    for index, (raw_scores, gold, mask) in enumerate(zip(scores_list, gold_list, masks_list)):
        raw_scores = _one_dimensional(raw_scores, f"scores_list[{index}]").astype(float)
        gold = _gold_array(gold, f"gold_list[{index}]")
        mask = _one_dimensional(mask, f"masks_list[{index}]").astype(bool)
        if not (raw_scores.shape == gold.shape == mask.shape):
            raise ValueError(f"example {index}: scores, gold and mask lengths differ "
                             f"({raw_scores.shape[0]}, {gold.shape[0]}, {mask.shape[0]})")
        if gold.sum() == 0:
            raise ValueError(f"example {index}: the gold rationale is empty (no positive token); "
                             "filter such examples before scoring (SPEC §1)")
        nonfinite = not np.isfinite(raw_scores).all()
        scores = finite_scores(raw_scores)
        constant = scores.shape[0] > 1 and bool(np.all(scores == scores[0]))

        tp, fp, fn = _counts(mask, gold)
        precision, recall, f1 = _prf(tp, fp, fn)
        rows.append({"example": index, "n_tokens": int(gold.shape[0]), "n_gold": int(gold.sum()),
                     "f1": f1, "precision": precision, "recall": recall,
                     **{name: metric(scores, gold) for name, metric in EXAMPLE_METRICS.items()
                        if name not in BUILT_IN},
                     "nonfinite_scores": nonfinite, "constant_scores": constant, "tp": tp, "fp": fp, "fn": fn})
        all_scores.append(scores)
        all_gold.append(gold)

    per_example = pd.DataFrame(rows)
    # Every example's AUROC and AUPRC in one vectorised pass each (NaN where its gold has one class only).
    groups = np.repeat(np.arange(len(all_gold)), [gold.shape[0] for gold in all_gold])
    pooled_scores, pooled_gold = np.concatenate(all_scores), np.concatenate(all_gold)
    at = per_example.columns.get_loc("nonfinite_scores")
    per_example.insert(at, "auprc", example_auprcs(pooled_scores, pooled_gold, groups))
    per_example.insert(at, "auroc", example_aurocs(pooled_scores, pooled_gold, groups))
    return {name: _summary(per_example.iloc[list(positions)], pooled_scores, pooled_gold, groups)
            for name, positions in subsets.items() if len(positions)}


def _summary(per_example: pd.DataFrame, pooled_scores: np.ndarray, pooled_gold: np.ndarray,
             groups: np.ndarray) -> MethodScores:
    """The `MethodScores` of the examples in `per_example` (rows of `evaluate_subsets`' table), pooling their
    tokens (`groups`: each pooled token's example)."""
    tokens = np.isin(groups, per_example["example"].to_numpy())
    scores, gold = pooled_scores[tokens], pooled_gold[tokens]
    pooled_defined = 0 < gold.sum() < gold.shape[0]
    precision_micro, recall_micro, f1_micro = _prf(*(int(per_example[c].sum()) for c in ("tp", "fp", "fn")))
    per_example = per_example.drop(columns=["tp", "fp", "fn"]).reset_index(drop=True)
    return MethodScores(
        n_examples=len(per_example),
        f1=float(per_example["f1"].mean()),
        precision=float(per_example["precision"].mean()),
        recall=float(per_example["recall"].mean()),
        f1_micro=f1_micro,
        precision_micro=precision_micro,
        recall_micro=recall_micro,
        auroc=_nanmean(per_example["auroc"]),
        auroc_pooled=auroc_score(gold, scores) if pooled_defined else float("nan"),
        auprc=_nanmean(per_example["auprc"]),
        auprc_pooled=average_precision(gold, scores) if pooled_defined else float("nan"),
        n_auroc_undefined=int(per_example["auroc"].isna().sum()),
        n_nonfinite_scores=int(per_example["nonfinite_scores"].sum()),
        n_constant_scores=int(per_example["constant_scores"].sum()),
        per_example=per_example,
        registered={name: _nanmean(per_example[name]) for name in EXAMPLE_METRICS if name not in BUILT_IN},
    )


def all_tokens_masks(gold_list: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Floor: every token marked. Its F1 on an example with density d is 2d / (1 + d).

    Pair it with constant scores (e.g. `np.ones`) in `evaluate`: AUROC 0.5, counted as constant.
    """
    return [np.ones(np.asarray(gold).shape[0], dtype=bool) for gold in gold_list]


def random_scores(lengths: Sequence[int], seed: int) -> list[np.ndarray]:
    """Floor: uniform random scores in [0, 1) per token, reproducible for a seed."""
    rng = np.random.default_rng(seed)
    return [rng.random(int(n)) for n in lengths]


def bootstrap_ci(values: Sequence[float], n_boot: int = 1000, seed: int = 0,
                 alpha: float = 0.05) -> tuple[float, float]:
    """Percentile bootstrap interval (1 - alpha) of the mean of per-example `values`; NaNs dropped first.

    Resamples examples with replacement. Returns (nan, nan) when no finite value is left.
    """
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    if values.shape[0] == 0:
        return float("nan"), float("nan")
    means = _bootstrap_means(values, n_boot, seed)
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def paired_bootstrap_diff(values_a: Sequence[float], values_b: Sequence[float], n_boot: int = 1000,
                          seed: int = 0, alpha: float = 0.05) -> tuple[float, float, float]:
    """Mean of a - b over the same examples and its percentile bootstrap interval: (mean_diff, low, high).

    Both methods must be scored on the same examples in the same order; pairs where either value is
    NaN are dropped. Resampling whole pairs keeps the per-example correlation between methods.
    """
    a, b = np.asarray(values_a, dtype=float), np.asarray(values_b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"values_a and values_b must be 1-D with one value per shared example; "
                         f"got shapes {a.shape} and {b.shape}")
    keep = ~(np.isnan(a) | np.isnan(b))
    diff = a[keep] - b[keep]
    if diff.shape[0] == 0:
        return float("nan"), float("nan"), float("nan")
    means = _bootstrap_means(diff, n_boot, seed)
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return float(diff.mean()), float(low), float(high)


def _bootstrap_means(values: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    if n_boot < 1:
        raise ValueError(f"n_boot must be at least 1, got {n_boot}")
    rng = np.random.default_rng(seed)
    means = np.empty(n_boot)
    # Chunks bound memory at about a million indices, whatever the number of examples.
    chunk = max(1, 1_000_000 // values.shape[0])
    for start in range(0, n_boot, chunk):
        stop = min(n_boot, start + chunk)
        picks = rng.integers(0, values.shape[0], size=(stop - start, values.shape[0]))
        means[start:stop] = values[picks].mean(axis=1)
    return means


def _one_dimensional(values: np.ndarray, name: str) -> np.ndarray:
    values = np.asarray(values)
    if values.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array over the example's non-special tokens, "
                         f"got shape {values.shape}")
    return values


def _gold_array(gold: np.ndarray, name: str) -> np.ndarray:
    gold = _one_dimensional(gold, name)
    if not ((gold == 0) | (gold == 1)).all():
        raise ValueError(f"{name} must hold 0/1 labels only (special tokens stripped), "
                         f"got values {sorted(set(np.unique(gold).tolist()))}")
    return gold.astype(int)


def _counts(mask: np.ndarray, gold: np.ndarray) -> tuple[int, int, int]:
    positive = gold.astype(bool)
    return int((mask & positive).sum()), int((mask & ~positive).sum()), int((~mask & positive).sum())


def _prf(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def _nanmean(values: pd.Series) -> float:
    return float(values.mean()) if values.notna().any() else float("nan")
