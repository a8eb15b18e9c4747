"""Across architectures: a fold's shape-free ExpNet+ trained on another encoder's classifiers, scored on this run's
held-out rationale test set from the held-out classifier's own signals, beside this fold's own rows."""
from __future__ import annotations

import pandas as pd

from learned_attribution.core.models.artifacts import check_compatible
from learned_attribution.core.models.learned import LearnedModel
from learned_attribution.core.explainers.learned import EXPNET_PLUS, PAPER_EXPNET

from ..config import ScoringSettings
from .protocol import matched_baselines, scored_examples
from .learned_scores import as_learned_row, learned_rationale_scores

# The target fold's own rows placed beside the transferred explainer.
REFERENCE_METHODS = (EXPNET_PLUS, PAPER_EXPNET, "saliency")


def shape(config) -> str:
    """A classifier's family and shape, as the transfer table names it (`bert 6L/12H`)."""
    return f"{config.get('model_type')} {config.get('num_hidden_layers')}L/{config.get('num_attention_heads')}H"


def transfer_rows(source: LearnedModel, signals: pd.DataFrame, predictions: pd.DataFrame, classifier,
                  fold_metrics: pd.DataFrame, scoring: ScoringSettings, *, fold: str) -> pd.DataFrame:
    """The source fold's shape-free explainer (trained on the other encoder's classifiers) on this run's held-out
    rationale test set, read from the held-out classifier's own signals (so every method sees the same examples as
    the fold's own rows, capped as the protocol caps them): AUROC, AUPRC and matched F1 (the source fold's rho) with
    bootstrap 95% intervals, beside this fold's own ExpNet+, paper's ExpNet, saliency and best baseline (matched,
    all examples) and the floors. A shape-bound `source` is refused here, naming what differs."""
    check_compatible(source, classifier.model, classifier.tokenizer, where=f"the source {fold}'s shape-free variant")
    examples = scored_examples(predictions, scoring)
    context = source.context
    target = classifier.model.config
    rows = [{"fold": fold, "method": f"{source.variant.name} (transferred)", "role": "transferred",
             "source_encoder": context.get("encoder"), "source_classifier": shape(context.get("classifier", {})),
             "target_classifier": shape({"model_type": target.model_type,
                                         "num_hidden_layers": target.num_hidden_layers,
                                         "num_attention_heads": target.num_attention_heads}),
             **learned_rationale_scores(source, signals, examples, float(context["rho"]), scoring)}]
    matched = fold_metrics[(fold_metrics["subset"] == "all") & (fold_metrics["rule"] == "matched")]
    best = matched_baselines(fold_metrics).sort_values("auroc", ascending=False).head(1)
    references = [(matched[matched["method"] == m], "this fold's own") for m in REFERENCE_METHODS]
    references += [(best, "best baseline"),
                   (fold_metrics[(fold_metrics["subset"] == "all") & (fold_metrics["family"] == "floor")], "floor")]
    for frame, role in references:
        for _, reference in frame.iterrows():
            rows.append({"fold": fold, "method": reference["method"], "role": role,
                         **as_learned_row(reference, fold_metrics)})
    return pd.DataFrame(rows)
