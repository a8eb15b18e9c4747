"""The ablation's training grid: ExpNet+ trained on {the correct predictions, all examples} x {signals of the
predicted class, of the gold class} x {signed inputs, magnitudes} (on the correct predictions alone the two classes
coincide: six distinct cells). Each cell is validated by leaving one training task out (every choice is made there,
on the fold's training tasks only: `selected`), then retrained on all the training tasks and scored on the held-out
rationale test set in both modes (`core/data/modes.py`), on all and on the mispredicted examples."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import torch

from learned_attribution.core.data.modes import (ALL_EXAMPLES, CORRECT_ONLY, GOLD, MODES, PREDICTED,
                                                 TrainingExamples, rows_in_mode)
from learned_attribution.core.models.learned import TrainingSettings, Variant, select_variant

from ..config import ScoringSettings
from ..fold_training import candidate_columns, fit_expnet_plus, rationale_tokens, signal_tables
from .learned_scores import learned_rationale_scores

GRID_DATA = (TrainingExamples(CORRECT_ONLY, PREDICTED), TrainingExamples(ALL_EXAMPLES, PREDICTED),
             TrainingExamples(ALL_EXAMPLES, GOLD))
SELECTED_BY = f"val_auroc_{GOLD}"  # the choice: mean leave-one-training-task-out AUROC, explaining the gold class
SCORED = ("auroc", "auroc_low", "auroc_high", "f1_matched", "f1_matched_low", "f1_matched_high",
          "auroc_incorrect", "auroc_incorrect_low", "auroc_incorrect_high", "auroc_correct")


def validation_parts(signals: pd.DataFrame, gold: pd.DataFrame, train_on: TrainingExamples) -> dict[str, pd.DataFrame]:
    """A training task's rows for leave-one-out validation of one cell: `train`/`val` of the cell's examples in the
    cell's signals, `unlabeled` its predicted-class signals (what a classifier's explainer reads on new text), and
    its validation rationale examples in each mode (`val_all_<mode>`)."""
    parts = signal_tables(rows_in_mode(signals, gold, train_on.signals), train_on.examples)
    parts["unlabeled"] = signals.drop(columns=["token_label"])
    for mode in MODES:
        parts[f"val_all_{mode}"] = rationale_tokens(rows_in_mode(signals, gold, mode), "rationale_val")
    parts["val_all"] = parts[f"val_all_{GOLD}"]
    return parts


def training_grid(training: Sequence[tuple[pd.DataFrame, pd.DataFrame]], held_out: pd.DataFrame,
                  held_out_gold: pd.DataFrame, examples: pd.DataFrame, recipes: Sequence[Variant],
                  settings: TrainingSettings, budget: dict[str, float], classifier, scoring: ScoringSettings,
                  device: torch.device | str, *, fold: str, layer: int, encoder: str, max_length: int) -> pd.DataFrame:
    """Every cell of `GRID_DATA` x `recipes` (the signed recipe and its magnitude twin) on one fold: `training` is each
    training task's (signals, gold-class signals); the held-out task's signals (`held_out`, `held_out_gold`) and its
    rationale test `examples` are read only to score each cell once it is chosen or not. One row per cell: its
    leave-one-training-task-out validation AUROC in each mode (`val_auroc_<mode>`), `selected` (the best
    `SELECTED_BY`), and its held-out matched AUROC and F1 (95% intervals) in each mode (`<mode>_<metric>`)."""
    tables = {signals["task"].iloc[0]: (signals, gold) for signals, gold in training}
    columns = candidate_columns(training[0][0], recipes)
    in_mode = {mode: rows_in_mode(held_out, held_out_gold, mode) for mode in MODES}
    rows = []
    for train_on in GRID_DATA:
        parts = {task: validation_parts(signals, gold, train_on) for task, (signals, gold) in tables.items()}
        selection = select_variant(recipes, parts, columns, budget["rho"], settings, device,
                                   also_scored={mode: f"val_all_{mode}" for mode in MODES})
        means = selection[selection["direction"] == "mean"].set_index("variant")
        models = fit_expnet_plus([rows_in_mode(s, g, train_on.signals) for s, g in tables.values()], held_out, budget,
                                 recipes, settings, classifier, fold=fold, layer=layer, encoder=encoder,
                                 max_length=max_length, device=device, examples=train_on.examples)
        for recipe in recipes:
            row = {"fold": fold, "train_on": train_on.name, "examples": train_on.examples,
                   "signals": train_on.signals if train_on.examples == ALL_EXAMPLES else "predicted = gold",
                   "inputs": "magnitude" if recipe.signs == "magnitude" else "signed", "recipe": recipe.name,
                   **{f"val_auroc_{mode}": float(means.at[recipe.name, f"val_auroc_{mode}"]) for mode in MODES}}
            for mode in MODES:
                scores = learned_rationale_scores(models[recipe.name], in_mode[mode], examples, budget["rho"],
                                                  scoring)
                row.update({f"{mode}_{key}": scores[key] for key in SCORED})
            rows.append(row)
    table = pd.DataFrame(rows)
    table["selected"] = np.arange(len(table)) == int(table[SELECTED_BY].to_numpy().argmax())
    return table
