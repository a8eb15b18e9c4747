"""Choosing a variant without the held-out task: leave-one-training-task-out validation over the fold's
training tasks (any number >= 2)."""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from .recipe import TrainingSettings, Variant
from .training import fit_variant, validation_auroc


def select_variant(variants: Sequence[Variant], tasks: dict[str, dict[str, pd.DataFrame]],
                   columns: dict[str, Sequence[str]], rho: float, settings: TrainingSettings,
                   device: torch.device | str = "cpu", also_scored: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Leave-one-training-task-out validation of every variant, on the fold's training tasks only.

    `tasks[task]` holds that training task's `train` and `val` token rows (correct predictions with a
    non-empty rationale: what a network trains and stops early on), `val_all` (every validation example with a
    rationale, mispredicted ones too) and `unlabeled` (all its rationale token rows, the signals only). For each
    training task V: fit on the other training tasks (early stopping on their val) for V's classifier, score on
    V's `val_all`, the way the held-out test set is scored (every rationale example, SPEC §4): the mean of the
    seeds' own AUROCs (`val_auroc`, spread `val_auroc_seed_sd`), so a lucky seed does not pick the variant.
    `columns` maps each variant's name to its input columns. Returns one row per variant and direction
    plus the mean (`direction == "mean"`), best first, with `rank` and `selected` (rank 1; ties go to
    the earlier variant); the held-out task is not an argument, so it cannot be read. `also_scored` (name -> a
    further key of `tasks[task]`, e.g. the validation rows in another mode) adds `val_auroc_<name>`, read the same
    way on those rows, without a say in the ranking."""
    also_scored = dict(also_scored or {})
    if len(tasks) < 2:
        raise ValueError(f"select_variant needs at least two training tasks, got {sorted(tasks)}")
    rows = []
    unlabeled = {t: parts["unlabeled"].drop(columns=["token_label"], errors="ignore") for t, parts in tasks.items()}
    names = list(tasks)
    for variant in tqdm(variants, desc=f"ExpNet+ selection (variants x {len(names)} directions)", unit="variant"):
        scores, others = [], {name: [] for name in also_scored}
        for validation_task in reversed(names):
            sources = [t for t in names if t != validation_task]
            train = pd.concat([tasks[t]["train"] for t in sources], ignore_index=True)
            val = pd.concat([tasks[t]["val"] for t in sources], ignore_index=True)
            model = fit_variant(variant, train, val, target=unlabeled[validation_task], stats_tables=unlabeled, columns=columns[variant.name], rho=rho,
                                settings=settings, device=device)
            seed_aurocs = [validation_auroc(model, tasks[validation_task]["val_all"], member)
                           for member in range(model.n_members)]
            scores.append(float(np.mean(seed_aurocs)))
            for name, key in also_scored.items():
                others[name].append(float(np.mean([validation_auroc(model, tasks[validation_task][key], member)
                                                   for member in range(model.n_members)])))
            rows.append({"variant": variant.name, "direction": f"{'+'.join(sources)}->{validation_task}",
                         "val_auroc": scores[-1], "val_auroc_seed_sd": float(np.std(seed_aurocs)),
                         "best_epoch": model.best_epoch, **{f"val_auroc_{n}": v[-1] for n, v in others.items()}})
        rows.append({"variant": variant.name, "direction": "mean", "val_auroc": float(np.mean(scores)),
                     "val_auroc_seed_sd": np.nan, "best_epoch": np.nan,
                     **{f"val_auroc_{n}": float(np.mean(v)) for n, v in others.items()}})
    table = pd.DataFrame(rows)
    order = table[table["direction"] == "mean"].sort_values("val_auroc", ascending=False, kind="mergesort")["variant"]
    table["rank"] = table["variant"].map({v: i + 1 for i, v in enumerate(order)})
    table["selected"] = table["rank"] == 1
    return table.sort_values(["rank", "direction"], kind="mergesort").reset_index(drop=True)
