"""Metrics of scores against references, numpy only: plausibility against human rationales (SPEC §9) and fidelity
of one attribution to another. ERASER faithfulness runs the model, so it is in `core/models/faithfulness.py`. A
per-example plausibility metric is registered by name (`registry.py`) and flows into every metric table.
"""
from .registry import EXAMPLE_METRICS, register_metric
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
    "EXAMPLE_METRICS",
    "register_metric",
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
