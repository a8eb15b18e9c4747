"""Nodes of the transfer pipeline (issue 13): a fold's shape-free ExpNet+ trained on another encoder's classifiers,
applied to this run's classifier of the fold's held-out task and scored like the fold's own explainers."""
from __future__ import annotations

from typing import Any, Callable

import pandas as pd

from learned_attribution.services.evaluation import learned_rationale_scores, matched_baselines, rationale_test_examples
from learned_attribution.core.models.artifacts import check_compatible
from learned_attribution.core.models.learned import LearnedExplainer

# The target fold's own rows placed beside the transferred explainer.
REFERENCE_METHODS = ("expnet_plus", "expnet_paper", "saliency")


def transfer_fold(source: LearnedExplainer, signals: dict[str, Callable], predictions: pd.DataFrame,
                  classifier, fold_metrics: pd.DataFrame, params: dict[str, Any], seed: int, *,
                  fold: str) -> pd.DataFrame:
    """The source fold's shape-free explainer (`source`, trained on the other encoder's classifiers) on this
    run's held-out rationale test set, read from the held-out classifier's own signals (so every method sees the
    same examples as the fold's own rows, capped as `crosstask.max_test_examples`): AUROC, AUPRC and matched F1
    (the source fold's rho) with bootstrap 95% intervals, beside this fold's own ExpNet+, paper's ExpNet,
    saliency and best baseline (matched, all examples) and the floors. A shape-bound `source` is refused here,
    naming what differs."""
    check_compatible(source, classifier.model, classifier.tokenizer, where=f"the source {fold}'s shape-free variant")
    examples = rationale_test_examples(predictions, max_examples=params["max_test_examples"], seed=seed)
    table = pd.concat([load() for _, load in sorted(signals.items())], ignore_index=True)
    context = source.context
    source_shape = context.get("classifier", {})
    row = {"fold": fold, "method": f"{source.variant.name} (transferred)", "role": "transferred",
           "source_encoder": context.get("encoder"),
           "source_classifier": f"{source_shape.get('model_type')} {source_shape.get('num_hidden_layers')}L/"
                                f"{source_shape.get('num_attention_heads')}H",
           "target_classifier": f"{classifier.model.config.model_type} {classifier.model.config.num_hidden_layers}L/"
                                f"{classifier.model.config.num_attention_heads}H",
           **learned_rationale_scores(source, table, examples, float(context["rho"]), params["bootstrap"])}
    rows = [row]
    matched = fold_metrics[(fold_metrics["subset"] == "all") & (fold_metrics["rule"] == "matched")]
    best = matched_baselines(fold_metrics).sort_values("auroc", ascending=False).head(1)
    references = [(matched[matched["method"] == m], "this fold's own") for m in REFERENCE_METHODS]
    references += [(best, "best baseline"),
                   (fold_metrics[(fold_metrics["subset"] == "all") & (fold_metrics["family"] == "floor")], "floor")]
    for frame, role in references:
        for _, ref in frame.iterrows():
            rows.append({"fold": fold, "method": ref["method"], "role": role, "n_examples": ref["n_examples"],
                         **{f"{metric}{end}": ref[f"{metric}{end}"] for metric in ("auroc", "auprc")
                            for end in ("", "_low", "_high")},
                         "f1_matched": ref["f1"], "f1_matched_low": ref["f1_low"], "f1_matched_high": ref["f1_high"]})
    return pd.DataFrame(rows)


def transfer_report(*folds: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Every fold's transfer rows (CSV) and a Markdown page: per fold the transferred explainer beside this run's
    own explainers, whether it is at or above saliency, with intervals."""
    from learned_attribution.services.reporting import interval_text, markdown_table

    table = pd.concat(folds, ignore_index=True)

    lines = ["# Across architectures", "",
             "Each fold's shape-free ExpNet+ variant, trained on the other encoder's classifiers (`source_encoder`), "
             "explains this run's classifier of the fold's held-out task, scored on the same rationale test examples "
             "as this fold's own explainers (matched top-k budget at the source fold's rho; bootstrap 95% "
             "intervals).", ""]
    for fold, rows in table.groupby("fold", sort=False):
        transferred = rows[rows["role"] == "transferred"].iloc[0]
        saliency = rows[rows["method"] == "saliency"]
        verdict = ""
        if len(saliency):
            gap = transferred["auroc"] - saliency["auroc"].iloc[0]
            verdict = (f"Transferred AUROC {'at or above' if gap >= 0 else 'below'} saliency's by {abs(gap):.3f} "
                       f"({transferred['source_classifier']} -> {transferred['target_classifier']}).")
        shown = rows.assign(AUROC=rows.apply(interval_text, axis=1, metric="auroc"),
                            **{"F1 matched": rows.apply(interval_text, axis=1, metric="f1_matched")})
        lines += [f"## {fold}", "", verdict, "", markdown_table(shown[["method", "role", "n_examples", "AUROC",
                                                                       "F1 matched"]]), ""]
    return table, "\n".join(lines)
