"""Metrics of scores against references, numpy only: plausibility against human rationales (SPEC §9) and fidelity
of one attribution to another. ERASER faithfulness runs the model, so it is in `core/models/faithfulness.py`.
"""
from .plausibility import (
    MethodScores,
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

__all__ = [
    "MethodScores",
    "all_tokens_masks",
    "bootstrap_ci",
    "budget_k",
    "evaluate",
    "finite_scores",
    "paired_bootstrap_diff",
    "precision_recall_f1",
    "random_scores",
    "threshold_mask",
    "top_k_mask",
]
