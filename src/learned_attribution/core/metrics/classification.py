"""A classifier's test metrics with percentile bootstrap intervals over examples, like every other number reported.

Each resample's accuracy, macro-F1 and MCC come from its confusion matrix, computed as sklearn computes them from
the labels and predictions: macro-F1 averages over the classes present in the resample's labels or predictions
(a class with no true and no predicted example is left out) with 0 for a class whose F1 is undefined; MCC is
Gorodkin's multiclass coefficient, 0 when a marginal is constant.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

CLASSIFICATION_METRICS = ("accuracy", "macro_f1", "mcc")


def confusion_metrics(confusion: np.ndarray) -> dict[str, np.ndarray]:
    """Accuracy, macro-F1 and MCC of a stack of confusion matrices (`[..., true, predicted]` counts)."""
    confusion = np.asarray(confusion, dtype=float)
    n = confusion.sum(axis=(-2, -1))
    true_positive = np.diagonal(confusion, axis1=-2, axis2=-1)
    true_total, predicted_total = confusion.sum(axis=-1), confusion.sum(axis=-2)
    with np.errstate(invalid="ignore", divide="ignore"):
        f1_denominator = true_total + predicted_total
        class_f1 = np.where(f1_denominator > 0, 2 * true_positive / np.where(f1_denominator > 0, f1_denominator, 1), 0)
        present = f1_denominator > 0
        macro_f1 = (class_f1 * present).sum(axis=-1) / np.maximum(present.sum(axis=-1), 1)
        correct = true_positive.sum(axis=-1)
        covariance = correct * n - (true_total * predicted_total).sum(axis=-1)
        spread = np.sqrt((n ** 2 - (predicted_total ** 2).sum(axis=-1)) * (n ** 2 - (true_total ** 2).sum(axis=-1)))
        mcc = np.where(spread > 0, covariance / np.where(spread > 0, spread, 1), 0.0)
        accuracy = np.where(n > 0, correct / np.where(n > 0, n, 1), np.nan)
    return {"accuracy": accuracy, "macro_f1": macro_f1, "mcc": mcc}


def classification_intervals(labels: Sequence[int], predictions: Sequence[int], n_boot: int = 1000, seed: int = 0,
                             alpha: float = 0.05) -> dict[str, float]:
    """`<metric>_low` and `<metric>_high` for each of `CLASSIFICATION_METRICS`: the percentile bootstrap interval
    (1 - alpha) over examples resampled with replacement, reproducible for a seed; NaN without examples."""
    labels, predictions = np.asarray(labels, dtype=int), np.asarray(predictions, dtype=int)
    if labels.shape != predictions.shape:
        raise ValueError(f"labels and predictions differ in length: {labels.shape[0]} and {predictions.shape[0]}")
    if n_boot < 1:
        raise ValueError(f"n_boot must be at least 1, got {n_boot}")
    n = labels.shape[0]
    if n == 0:
        return {f"{metric}_{end}": float("nan") for metric in CLASSIFICATION_METRICS for end in ("low", "high")}
    classes = int(max(labels.max(), predictions.max())) + 1
    cell = labels * classes + predictions
    rng = np.random.default_rng(seed)
    confusions = np.empty((n_boot, classes * classes))
    chunk = max(1, 1_000_000 // n)  # about a million indices at a time, whatever the number of examples
    for start in range(0, n_boot, chunk):
        stop = min(n_boot, start + chunk)
        picks = cell[rng.integers(0, n, size=(stop - start, n))]
        offsets = picks + (np.arange(stop - start) * classes * classes)[:, None]
        confusions[start:stop] = np.bincount(offsets.ravel(), minlength=(stop - start) * classes * classes
                                             ).reshape(stop - start, classes * classes)
    resampled = confusion_metrics(confusions.reshape(n_boot, classes, classes))
    intervals = {}
    for metric in CLASSIFICATION_METRICS:
        low, high = np.quantile(resampled[metric], [alpha / 2, 1 - alpha / 2])
        intervals[f"{metric}_low"], intervals[f"{metric}_high"] = float(low), float(high)
    return intervals
