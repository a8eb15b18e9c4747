"""The ablation's scoring of a fold's ExpNet+ candidates (fitted in `services/fold_training.py`): every candidate on
the held-out rationale test set beside the main job's recipe, the best baseline and the floors, and each
candidate's throughput as a ratio to a forward pass."""
from __future__ import annotations

import pandas as pd

from learned_attribution.core.explainers.apply import explain_examples, resolve_method
from learned_attribution.core.models.learned import LearnedModel
from learned_attribution.core.models.signals import token_vocabulary
from learned_attribution.core.explainers.learned import EXPNET_PLUS

from ..config import ComputeSettings, ScoringSettings
from .cost import Timed, cost_table, timed_forward
from .protocol import expensive_sample, matched_baselines, scored_examples
from .learned_scores import as_learned_row, learned_rationale_scores


def ablation_table(models: dict[str, LearnedModel], selection: pd.DataFrame, held_out: pd.DataFrame,
                   examples: pd.DataFrame, fold_metrics: pd.DataFrame, main_recipe: str, rho: float,
                   scoring: ScoringSettings, *, fold: str) -> pd.DataFrame:
    """Every candidate on the held-out rationale test `examples` (scored from the held-out classifier's signal table
    `held_out`): AUROC, AUPRC, matched-budget and own-rule F1 with bootstrap 95% intervals and each seed's own
    network (`learned_rationale_scores`), its validation AUROC, whether the selection rule picks it and whether it
    is the main job's recipe (`main_recipe`); beside them the main job's own ExpNet+ as scored in the fold, the best
    baseline (by AUROC, matched, among the methods run on every example) and the two floors of the fold's
    metrics."""
    validation = selection[selection["direction"] == "mean"].set_index("variant")
    rows = []
    for name, model in models.items():
        rows.append({"fold": fold, "variant": name, "description": model.variant.describe(),
                     "selected": bool(validation.at[name, "rank"] == 1), "main_recipe": name == main_recipe,
                     "shape_free": model.shape_free, "val_auroc": validation.at[name, "val_auroc"],
                     **learned_rationale_scores(model, held_out, examples, rho, scoring)})
    matched = fold_metrics[(fold_metrics["subset"] == "all") & (fold_metrics["rule"] == "matched")]
    main = matched[matched["method"] == EXPNET_PLUS]
    best = matched_baselines(fold_metrics).sort_values("auroc", ascending=False).head(1)
    floors = fold_metrics[(fold_metrics["subset"] == "all") & (fold_metrics["family"] == "floor")]
    for _, reference in pd.concat([main, best, floors]).iterrows():
        label = {EXPNET_PLUS: "main job"}.get(reference["method"],
                                                "best baseline" if reference["family"] != "floor" else "floor")
        rows.append({"fold": fold, "variant": f"{reference['method']} ({label})", "description": label,
                     "selected": False, **as_learned_row(reference, fold_metrics)})
    return pd.DataFrame(rows)


def variant_cost(classifier, predictions: pd.DataFrame, variants: dict[str, LearnedModel], scoring: ScoringSettings,
                 n_examples: int, compute: ComputeSettings) -> pd.DataFrame:
    """Throughput of every ExpNet+ variant (the whole explainer: its signal pass and its networks) as a ratio to a
    plain forward pass, both timed on the same seeded sample of `n_examples` rationale test examples, with the
    fold's batches. The chosen variant's full-set figure is in the fold's cost table; this puts the others on the
    cost chart."""
    compute.place(classifier.model)
    examples = scored_examples(predictions, scoring)
    examples = examples[examples["example_id"].isin(expensive_sample(examples, n_examples, scoring.seed))]
    vocabulary = token_vocabulary(classifier.tokenizer)
    methods = {name: resolve_method(EXPNET_PLUS, learned={EXPNET_PLUS: model}, layer=scoring.layer,
                                    vocabulary=vocabulary) for name, model in variants.items()}
    timed_forward(classifier, examples.head(scoring.batch_size), scoring.batch_size)  # warm-up
    forward = timed_forward(classifier, examples, scoring.batch_size)
    run = explain_examples(classifier.model, classifier.tokenizer, examples, methods, scoring.batch_size)
    table = cost_table([Timed(name, len(examples), seconds) for name, seconds in run.seconds.items()],
                       {len(examples): forward})
    return table.rename(columns={"method": "variant"})
