"""Faithfulness metrics (ERASER, DeYoung et al. 2020): does the model need the tokens an explanation ranks first?

For one example x with predicted class y and per-token scores, and a fraction f of its n non-special
tokens, k = max(1, floor(f * n + 0.5)) (round half up, as `budget_k`; k <= n always):
- comprehensiveness_f = p(y | x) - p(y | x without its top-k tokens): high when the explanation
  found what the model uses;
- sufficiency_f = p(y | x) - p(y | x with only its top-k tokens): low (near 0, may be negative) when
  those tokens alone carry the prediction.
Both are reported per fraction and as AOPC, the mean over the fractions (default 1, 5, 10, 20, 50%).

Removal deletes tokens from the sequence (ERASER's choice, rather than masking them): [CLS] and
[SEP] are kept, the remaining tokens keep their order, and the shorter sequences are re-padded.
Top-k ties go to the earlier token, and non-finite scores count as the example's lowest score
(`plausibility.top_k_mask`); examples with non-finite scores are flagged in the output.
Sequences are single-segment: `[CLS] tokens... [SEP]`, no padding.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import torch

from learned_attribution.core.models.runner import predict_proba

from learned_attribution.core.metrics.plausibility import budget_k, top_k_mask

ERASER_FRACTIONS = (0.01, 0.05, 0.1, 0.2, 0.5)


def fraction_label(fraction: float) -> str:
    """Column suffix for a fraction: 0.01 -> '1pct', 0.025 -> '2.5pct'."""
    return f"{fraction * 100:g}pct"


def faithfulness(model: torch.nn.Module, input_ids: Sequence[Sequence[int]], scores: Sequence[np.ndarray],
                 target: Sequence[int], fractions: Sequence[float] = ERASER_FRACTIONS, batch_size: int = 32,
                 pad_token_id: int = 0) -> pd.DataFrame:
    """ERASER comprehensiveness and sufficiency (AOPC over `fractions`) for every example.

    `input_ids[i]` is example i's unpadded `[CLS] ... [SEP]` sequence, `scores[i]` one score per
    non-special token (length len(input_ids[i]) - 2), `target[i]` the class being explained (the
    predicted class). The model is called as `model(input_ids=..., attention_mask=...)` and must
    return `.logits`; it is run in eval mode (its training flag is restored afterwards).

    Returns one row per example: example, target, n_tokens, p_full (p(y|x)), comprehensiveness,
    sufficiency (the AOPC values), nonfinite_scores, and per fraction `k_<f>`,
    `comprehensiveness_<f>`, `sufficiency_<f>` with <f> from `fraction_label` (e.g. `k_5pct`).
    """
    _check_inputs(input_ids, scores, target, fractions, batch_size)

    # Every sequence to score, deduplicated: small examples give the same k for several fractions.
    sequence_index: dict[tuple[int, ...], int] = {}

    def index_of(sequence: tuple[int, ...]) -> int:
        return sequence_index.setdefault(sequence, len(sequence_index))

    plans = []  # per example: (full index, [(k, without-top-k index, only-top-k index) per fraction])
    for ids, example_scores in zip(input_ids, scores):
        ids = tuple(int(token) for token in ids)
        cls, body, sep = ids[0], np.asarray(ids[1:-1]), ids[-1]
        per_fraction = []
        for fraction in fractions:
            k = budget_k(len(body), fraction)
            top = top_k_mask(np.asarray(example_scores, dtype=float), k)
            without_top = (cls, *body[~top].tolist(), sep)
            only_top = (cls, *body[top].tolist(), sep)
            per_fraction.append((k, index_of(without_top), index_of(only_top)))
        plans.append((index_of(ids), per_fraction))

    probabilities = predict_proba(model, list(sequence_index), batch_size, pad_token_id,
                                  desc="faithfulness")
    n_classes = probabilities.shape[1]

    rows = []
    for example, ((full, per_fraction), ids, example_scores, y) in enumerate(
            zip(plans, input_ids, scores, target)):
        y = int(y)
        if y >= n_classes:
            raise ValueError(f"target[{example}] = {y} but the model has {n_classes} classes")
        p_full = float(probabilities[full, y])
        row = {"example": example, "target": y, "n_tokens": len(ids) - 2, "p_full": p_full,
               "nonfinite_scores": bool(not np.isfinite(np.asarray(example_scores, dtype=float)).all())}
        for fraction, (k, without_top, only_top) in zip(fractions, per_fraction):
            label = fraction_label(fraction)
            row[f"k_{label}"] = k
            row[f"comprehensiveness_{label}"] = p_full - float(probabilities[without_top, y])
            row[f"sufficiency_{label}"] = p_full - float(probabilities[only_top, y])
        labels = [fraction_label(f) for f in fractions]
        row["comprehensiveness"] = float(np.mean([row[f"comprehensiveness_{lab}"] for lab in labels]))
        row["sufficiency"] = float(np.mean([row[f"sufficiency_{lab}"] for lab in labels]))
        rows.append(row)

    columns = ["example", "target", "n_tokens", "p_full", "comprehensiveness", "sufficiency", "nonfinite_scores"]
    for label in (fraction_label(f) for f in fractions):
        columns += [f"k_{label}", f"comprehensiveness_{label}", f"sufficiency_{label}"]
    return pd.DataFrame(rows, columns=columns)


def _check_inputs(input_ids, scores, target, fractions, batch_size) -> None:
    if not (len(input_ids) == len(scores) == len(target)):
        raise ValueError(f"input_ids, scores and target must have one entry per example; got "
                         f"{len(input_ids)}, {len(scores)} and {len(target)}")
    if len(input_ids) == 0:
        raise ValueError("faithfulness needs at least one example; input_ids is empty")
    if len(fractions) == 0 or not all(0.0 < f <= 1.0 for f in fractions):
        raise ValueError(f"fractions must be a non-empty list of values in (0, 1], got {list(fractions)}")
    if int(batch_size) != batch_size or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    for index, (ids, example_scores, y) in enumerate(zip(input_ids, scores, target)):
        if len(ids) < 3:
            raise ValueError(f"input_ids[{index}] has {len(ids)} ids; it needs [CLS], at least one token "
                             "and [SEP]")
        example_scores = np.asarray(example_scores)
        if example_scores.ndim != 1 or example_scores.shape[0] != len(ids) - 2:
            raise ValueError(f"scores[{index}] must have one score per non-special token "
                             f"({len(ids) - 2} for input_ids[{index}]), got shape {example_scores.shape}")
        if int(y) != y or y < 0:
            raise ValueError(f"target[{index}] must be a non-negative class index, got {y!r}")
