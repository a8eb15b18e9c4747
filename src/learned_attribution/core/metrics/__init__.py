"""Metrics: plausibility against human rationales (SPEC §9) and ERASER faithfulness to the model.

`plausibility` needs only numpy and scikit-learn and is re-exported here. Faithfulness needs torch:
import it from its module, `from learned_attribution.core.metrics.faithfulness import faithfulness`
(not re-exported, because the function shares its name with the submodule).
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
