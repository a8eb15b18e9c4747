"""A learned explainer scored from its classifier's stored signal rows (no model pass), as the protocol scores a
method (`protocol.method_rows`), with its per-seed spread and its AUROC split by prediction; and a baseline's or a
floor's row of a fold's metrics table in the same columns, to sit beside the variants of an ablation, a transfer
table or the few-shot curve."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from learned_attribution.core.metrics.plausibility import evaluate
from learned_attribution.core.models.learned import LearnedModel, TransformedRows, score_examples

from ..config import ScoringSettings
from .protocol import gold_labels, method_masks, method_rows, score_method

LEARNED_RULES = ("matched", "own", "own_calibrated")
PREDICTION_SUBSETS = ("correct", "incorrect")  # the decision explained was right / wrong
BY_PREDICTION_COLUMNS = [f"{metric}_{subset}{end}" for subset in PREDICTION_SUBSETS
                         for metric in ("auroc", "f1_matched") for end in ("", "_low", "_high")]


def by_prediction(scores: list[np.ndarray], gold: list[np.ndarray], correct: Sequence[bool], rho: float,
                  n_boot: int, seed: int) -> dict[str, float]:
    """AUROC and matched-budget F1, with intervals, on the correctly and on the incorrectly predicted examples
    (`BY_PREDICTION_COLUMNS`; NaN for a subset without examples): where an explanation of a wrong decision parts
    from the human rationale of the gold class."""
    row = dict.fromkeys(BY_PREDICTION_COLUMNS, float("nan"))
    correct = np.asarray(correct, dtype=bool)
    for subset, keep in zip(PREDICTION_SUBSETS, (correct, ~correct)):
        picked = np.flatnonzero(keep)
        if len(picked) == 0:
            continue
        metrics = score_method([scores[i] for i in picked], [gold[i] for i in picked],
                               method_masks([scores[i] for i in picked], rho), n_boot, seed)
        for end in ("", "_low", "_high"):
            row[f"auroc_{subset}{end}"], row[f"f1_matched_{subset}{end}"] = metrics[f"auroc{end}"], metrics[f"f1{end}"]
    return row


def learned_rationale_scores(model: LearnedModel, signals: pd.DataFrame | TransformedRows, examples: pd.DataFrame,
                             rho: float, scoring: ScoringSettings) -> dict[str, Any]:
    """A trained learned explainer scored on rationale `examples` from its classifier's signal rows `signals` (or
    those rows transformed once by its input pipeline; the network reads them; no model pass), as `score_methods`
    scores a method: n_examples, AUROC, AUPRC and
    matched-budget F1 (rho) with bootstrap 95% intervals, own-rule F1 at 0.5 and at its calibrated threshold (the
    ablation's columns `f1_<rule>`), AUROC and matched F1 on the correctly and the incorrectly predicted examples
    (`by_prediction`), each seed's own AUROC and matched F1 (mean, sd, min, max), a convex stack's five largest
    weights, the gates."""
    gold_by_id = {i: gold_labels(t) for i, t in zip(examples["example_id"], examples["token_labels"])}
    correct_by_id = dict(zip(examples["example_id"], examples["correct"].astype(bool)))
    table = (signals.of_examples(gold_by_id) if isinstance(signals, TransformedRows) else
             signals[signals["example_id"].isin(gold_by_id)])
    scored_rows = score_examples(model, table)
    scores = [np.asarray(s, dtype=float) for s in scored_rows["scores"]]
    gold = [gold_by_id[i] for i in scored_rows["example_id"]]
    rules = dict(zip(LEARNED_RULES, (None, 0.5, model.calibrated_threshold)))
    by_rule = method_rows(scores, gold, rho, rules, scoring.n_boot, scoring.boot_seed)
    row: dict[str, Any] = {"n_examples": len(scores),
                           **by_prediction(scores, gold, [correct_by_id[i] for i in scored_rows["example_id"]], rho,
                                           scoring.n_boot, scoring.boot_seed)}
    for rule, metrics in by_rule.items():
        if rule == "matched":
            row.update({k: metrics[k] for k in ("auroc", "auroc_low", "auroc_high", "auprc", "auprc_low", "auprc_high")})
        row.update({f"f1_{rule}": metrics["f1"], f"f1_{rule}_low": metrics["f1_low"],
                    f"f1_{rule}_high": metrics["f1_high"]})
    seed_metrics = []
    for member in range(model.n_members):
        member_scores = [np.asarray(s, dtype=float) for s in score_examples(model, table, member)["scores"]]
        seed_metrics.append(evaluate(member_scores, gold, method_masks(member_scores, rho)).summary())
    seed_metrics = pd.DataFrame(seed_metrics).rename(columns={"f1": "f1_matched"})
    row["seeds"] = model.n_members
    for metric in ("auroc", "f1_matched"):
        values = seed_metrics[metric]
        row.update({f"{metric}_seed_mean": values.mean(), f"{metric}_seed_sd": values.std(ddof=0),
                    f"{metric}_seed_min": values.min(), f"{metric}_seed_max": values.max()})
    weights = pd.Series(model.stack_weights(), dtype=float).sort_values(ascending=False).head(5)
    row.update({"calibrated_threshold": model.calibrated_threshold, "best_epoch": model.best_epoch,
                "n_pseudo_examples": model.n_pseudo_examples,
                "stack_weights": ", ".join(f"{name} {weight:.2f}" for name, weight in weights.items()),
                **model.gates()})
    return row


REFERENCE_COLUMNS = [f"{metric}{end}" for metric in ("auroc", "auprc") for end in ("", "_low", "_high")]


def as_learned_row(metrics_row: pd.Series, metrics: pd.DataFrame) -> dict[str, Any]:
    """A matched-budget row of the metric schema in the learned-explainer table's columns (`f1` as `f1_matched`),
    with the same method's rows of the correctly and incorrectly predicted subsets of `metrics` (its fold's table)
    as the `BY_PREDICTION_COLUMNS`: a baseline or floor placed beside the variants of an ablation or transfer
    table."""
    row = {"n_examples": metrics_row["n_examples"], **{c: metrics_row[c] for c in REFERENCE_COLUMNS},
           "f1_matched": metrics_row["f1"], "f1_matched_low": metrics_row["f1_low"],
           "f1_matched_high": metrics_row["f1_high"], **dict.fromkeys(BY_PREDICTION_COLUMNS, float("nan"))}
    same = metrics[(metrics["method"] == metrics_row["method"]) & (metrics["rule"] == metrics_row["rule"])]
    for subset in PREDICTION_SUBSETS:
        for _, subset_row in same[same["subset"] == subset].head(1).iterrows():
            for end in ("", "_low", "_high"):
                row[f"auroc_{subset}{end}"] = subset_row[f"auroc{end}"]
                row[f"f1_matched_{subset}{end}"] = subset_row[f"f1{end}"]
    return row
