"""A cross-task fold's learned explainers fitted on its training tasks (SPEC §6, ExpNet+): the paper's ExpNet trained
on the training tasks' attention features, ExpNet+ variants retrained on them all (the main job's recipe and its
shape-free variant, or the ablation's candidates) and every candidate validated by leaving one training task out.
Every table here is a training task's token rows, or the held-out task's signals unlabeled (its token labels are
dropped before any fit): the held-out labels are read only where a fit is scored (`evaluation/`)."""
from __future__ import annotations

import logging
from typing import Sequence

import pandas as pd
import torch

from learned_attribution.core.data.modes import CORRECT_ONLY
from learned_attribution.core.models.artifacts import explainer_context
from learned_attribution.core.models.features import feature_names
from learned_attribution.core.models.learned import (LearnedModel, TrainingSettings, Variant, fit_variant,
                                                     select_variant)
from learned_attribution.core.models.signals import FEATURE_SETS, columns_for
from learned_attribution.core.tasks import held_out_task

from .config import ExpnetPlusCandidates, ExpnetRecipe

logger = logging.getLogger(__name__)


def rationale_tokens(table: pd.DataFrame, role: str) -> pd.DataFrame:
    """Tokens of the `role` examples with a non-empty rationale, predicted right or wrong."""
    rows = table[table["role"] == role]
    return rows[rows.groupby("example_id")["token_label"].transform("sum") > 0]


def training_tokens(table: pd.DataFrame, role: str, examples: str = CORRECT_ONLY) -> pd.DataFrame:
    """Tokens of the examples with a non-empty rationale (SPEC §1, §4): the correctly predicted ones (`correct`, the
    paper's filter) or all (`all`). A training task without any is an error: a fold trained silently on one task
    would report wrong numbers."""
    kept = rationale_tokens(table[table["correct"]] if examples == CORRECT_ONLY else table, role)
    if kept.empty:
        task = table["task"].iloc[0] if len(table) else "a training task"
        raise ValueError(f"{task} contributes no {role} token rows ({examples} examples, with a rationale) to this "
                         f"fold ({len(table)} token rows read): its feature or signal partitions are incomplete "
                         "or empty; rerun `kedro run --pipeline classifiers` for it")
    return kept


def check_training_tasks(tables: Sequence[pd.DataFrame], what: str) -> None:
    """A fold is trained on one or more training tasks, each read once (a task wired twice would weigh double)."""
    tasks = [table["task"].iloc[0] for table in tables]
    if not tasks or len(set(tasks)) != len(tasks):
        raise ValueError(f"a fold needs the {what} of one or more distinct training tasks, got tasks {tasks}")


def fold_context(classifier, fold: str, training_tasks: Sequence[str], rho: float, layer: int, encoder: str,
                 max_length: int) -> dict:
    """The `context` a fold's learned explainers are saved with (`models/artifacts.explainer_context`)."""
    return explainer_context(classifier.model, classifier.tokenizer, fold=fold,
                             held_out_task=held_out_task(fold), training_tasks=sorted(training_tasks),
                             encoder=encoder, layer=layer, rho=rho, max_length=max_length)


def train_paper_expnet(tables: Sequence[pd.DataFrame], recipe: ExpnetRecipe, classifier, *, fold: str, layer: int,
                       encoder: str, max_length: int, device: torch.device
                       ) -> tuple[LearnedModel, pd.DataFrame, dict[str, float]]:
    """The paper's ExpNet on the training tasks' rationale_train tokens of their attention features (`tables`, one
    per training task; correct predictions only), stopping early on their rationale_val tokens by its declared
    rule, its threshold calibrated there, and the top-k budget rho fixed as the mean rationale density of the
    training tasks (the held-out labels are never read). The held-out task's `classifier` is only read for its
    shape, recorded in the saved explainer's context. Returns the model, its history and the fold's budget."""
    check_training_tasks(tables, "attention features")
    n_heads = sum(c.startswith("cls_to_tok_h") for c in tables[0].columns)
    train = pd.concat([training_tokens(t, "rationale_train") for t in tables], ignore_index=True)
    val = pd.concat([training_tokens(t, "rationale_val") for t in tables], ignore_index=True)
    for table in tables:
        task = table["task"].iloc[0]
        for role in ("rationale_train", "rationale_val"):
            rows = table[table["role"] == role]
            logger.info("%s %s: %d of %d examples predicted correctly and kept for ExpNet", task, role,
                        rows.loc[rows["correct"], "example_id"].nunique(), rows["example_id"].nunique())
    densities = train.groupby("task")["token_label"].mean()
    rho = float(densities.mean())
    model = fit_variant(recipe.variant, train, val, columns=feature_names(n_heads), rho=rho,
                        settings=recipe.training, device=device)
    model.threshold = recipe.threshold
    model.context = fold_context(classifier, fold, list(densities.index), rho, layer, encoder, max_length)
    budget = {"rho": rho, "threshold": model.threshold, "calibrated_threshold": model.calibrated_threshold,
              **{f"density_{task}": float(d) for task, d in densities.items()},
              "n_train_tokens": int(len(train)), "n_val_tokens": int(len(val))}
    logger.info("ExpNet budget and thresholds: %s", budget)
    history = pd.DataFrame(model.history).drop(columns=["member_val_auroc"], errors="ignore")
    return model, history, budget


def signal_tables(table: pd.DataFrame, examples: str = CORRECT_ONLY) -> dict[str, pd.DataFrame]:
    """A training task's ExpNet+ token rows (`table`: its signals in the mode they train on, `modes.rows_in_mode`):
    `train`/`val` (the `examples` with a non-empty rationale: the correct predictions, as for ExpNet, or all: what the
    networks train and stop early on), `val_all` (every validation example with a rationale, mispredicted ones too:
    what the selection scores, as the held-out test set is scored) and `unlabeled` (every rationale token row,
    signals only)."""
    return {"train": training_tokens(table, "rationale_train", examples),
            "val": training_tokens(table, "rationale_val", examples),
            "val_all": rationale_tokens(table, "rationale_val"), "unlabeled": table.drop(columns=["token_label"])}


def candidate_columns(first: pd.DataFrame, variants: Sequence[Variant]) -> dict[str, list[str]]:
    """Each variant's input columns, read off a signal table's shape (its heads and layers); a table lacking a
    feature set's columns is an error."""
    n_heads = sum(c.startswith("cls_to_tok_h") for c in first.columns)
    n_layers = sum(c.startswith("raw_attention_l") for c in first.columns)
    missing = set(columns_for(FEATURE_SETS, n_heads, n_layers)) - set(first.columns)
    if missing:
        raise ValueError(f"explainer signals lack columns {sorted(missing)}: rerun the classifiers pipeline")
    return {v.name: columns_for(v.feature_sets, n_heads, n_layers) for v in variants}


def fit_cross_task(variant: Variant, sources: Sequence[dict[str, pd.DataFrame]], target: pd.DataFrame,
                   stats: dict[str, pd.DataFrame], columns: Sequence[str], rho: float, settings: TrainingSettings,
                   device: torch.device | str) -> LearnedModel:
    """`variant` trained on the `sources`' train rows (`signal_tables` parts), stopping early on their val rows, for
    the classifier whose unlabeled signal rows are `target` (`stats`: every task's unlabeled rows, for per-task
    standardisation)."""
    return fit_variant(variant, pd.concat([p["train"] for p in sources], ignore_index=True),
                       pd.concat([p["val"] for p in sources], ignore_index=True), target=target, stats_tables=stats,
                       columns=columns, rho=rho, settings=settings, device=device)


def cross_task_inputs(training: Sequence[pd.DataFrame], held_out: pd.DataFrame, examples: str = CORRECT_ONLY
                      ) -> tuple[list[dict[str, pd.DataFrame]], pd.DataFrame, dict[str, pd.DataFrame]]:
    """What `fit_cross_task` reads for the held-out classifier: the training tasks' `signal_tables` parts (of
    `examples`), the held-out signals unlabeled (its token labels dropped here), and every task's unlabeled rows by
    task."""
    parts = [signal_tables(table, examples) for table in training]
    check_training_tasks([p["unlabeled"] for p in parts], "explainer signals")
    target = held_out.drop(columns=["token_label"])
    stats = {p["unlabeled"]["task"].iloc[0]: p["unlabeled"] for p in parts} | {target["task"].iloc[0]: target}
    return parts, target, stats


def select_expnet_plus(training: Sequence[pd.DataFrame], rho: float, recipes: ExpnetPlusCandidates,
                       device: torch.device, examples: str = CORRECT_ONLY) -> pd.DataFrame:
    """Leave-one-training-task-out validation of every ExpNet+ candidate on the fold's training tasks (`training`:
    each one's signal table, trained on its `examples`; the held-out task is not an argument); `selected`: the best
    mean validation AUROC."""
    parts = [signal_tables(table, examples) for table in training]
    check_training_tasks([p["unlabeled"] for p in parts], "explainer signals")
    columns = candidate_columns(training[0], recipes.variants)
    tables = {p["unlabeled"]["task"].iloc[0]: p for p in parts}
    selection = select_variant(recipes.variants, tables, columns, rho, recipes.training, device)
    means = selection[selection["direction"] == "mean"]
    logger.info("ExpNet+ selection (mean validation AUROC over the left-out training tasks):\n%s",
                means[["variant", "val_auroc"]].round(4).to_string(index=False))
    return selection


def fit_expnet_plus(training: Sequence[pd.DataFrame], held_out: pd.DataFrame, budget: dict[str, float],
                    variants: Sequence[Variant], settings: TrainingSettings, classifier, *, fold: str, layer: int,
                    encoder: str, max_length: int, device: torch.device, examples: str = CORRECT_ONLY
                    ) -> dict[str, LearnedModel]:
    """Each of `variants` retrained on all the training tasks' `examples` (`training`: their signal tables in the mode
    trained on; early stopping on their validation rows) for the held-out classifier, whose signals (`held_out`,
    predicted mode: its labels are not known when new text is explained) enter unlabeled (its token labels are
    dropped here; the `classifier` is only read for its shape, recorded in each saved variant's context)."""
    parts, target, stats = cross_task_inputs(training, held_out, examples)
    columns = candidate_columns(training[0], variants)
    context = fold_context(classifier, fold, sorted(p["train"]["task"].iloc[0] for p in parts), budget["rho"], layer,
                           encoder, max_length)
    models = {}
    for variant in variants:
        model = fit_cross_task(variant, parts, target, stats, columns[variant.name], budget["rho"], settings, device)
        model.threshold = budget["threshold"]
        model.context = context | {"variant": variant.name}
        models[variant.name] = model
    return models
