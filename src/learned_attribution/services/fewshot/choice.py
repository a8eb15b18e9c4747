"""Which prior a fold refits at each k, chosen on its training tasks only (the held-out task is not an argument).

What is refit at each k is the prior (the fold's own ExpNet+ or a candidate catalogue variant fitted cross-task),
chosen per fold without the held-out task, the way the fold chose its variant: for each training task V, each
prior's variant is fitted on the other training tasks (as the fold's explainer is fitted without the held-out task),
refit on k of V's annotated training examples with the one schedule (`fewshot.schedule`), and scored on V's rationale
validation examples; the best mean over tasks and draws is the fold's prior at that k (ties to the fold's own). The
choice and the priors it needs are stored in the fold's folder (`stored_choice`), where a user's refit reads them
(`services/fewshot/refit.py`). The draws of a prior share its input pipeline's pass over their rows
(`transformed_rows`): each row set is transformed once per prior, not once per refit."""
from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from learned_attribution.core.data.modes import CORRECT_ONLY
from learned_attribution.core.models.learned import (LearnedModel, TrainingSettings, Variant, transformed_rows,
                                                    validation_auroc)
from learned_attribution.core.models.learned.fewshot import (FOLD_PRIOR, ChosenRefit, FewShotChoice, FewShotSettings,
                                                             fine_tune)

from ..config import FewShotCurveSettings
from ..fold_training import (candidate_columns, check_training_tasks, cross_task_inputs, fit_cross_task,
                             rationale_tokens, signal_tables)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Refit:
    """What a fold refits at one k: its prior (`FOLD_PRIOR` or a candidate variant's name) and the schedule."""

    prior: str
    schedule: FewShotSettings


def describe(schedule: FewShotSettings) -> str:
    """A schedule in one line, as the tables name it."""
    return (f"steps={schedule.steps} batch={schedule.batch_size} step x{schedule.step_scale:g} "
            f"prior_weight={schedule.prior_weight:g}")


def candidate_priors(model: LearnedModel, settings: FewShotCurveSettings, first: pd.DataFrame
                     ) -> dict[str, tuple[Variant, list[str]]]:
    """The candidate priors' variants and input columns: the fold's own ExpNet+ (`FOLD_PRIOR`), then each of
    `settings.priors` that is not the fold's own variant (columns read off the signal table `first`)."""
    extra = [v for v in settings.priors if v.name != model.variant.name]
    columns = candidate_columns(first, extra)
    return {FOLD_PRIOR: (model.variant, list(model.columns)), **{v.name: (v, columns[v.name]) for v in extra}}


def choose_refits(model: LearnedModel, training: Sequence[pd.DataFrame], rho: float, settings: FewShotCurveSettings,
                  training_settings: TrainingSettings, device: torch.device | str = "cpu", *, fold: str,
                  examples: str = CORRECT_ONLY) -> tuple[dict[int, Refit], pd.DataFrame]:
    """The fold's prior for every k > 0 of `settings.ks` (refit with `settings.schedule`), chosen on its training
    tasks' signal tables (`training`, in the mode the priors train on, their `examples`; the held-out task is not an
    argument): for each training task V and candidate
    prior (`candidate_priors`), the prior's variant fitted on the other training tasks for V's classifier, refit on k
    of V's annotated rationale_train examples (`choice_repeats` seeded draws; all of them where V has fewer, counted
    in `n_train_examples`), and scored on V's rationale validation examples (every one with a rationale, mispredicted
    ones too). Returns per k the prior with the best mean AUROC (ties to the earlier prior, the fold's own first), and
    the table of every refit, with the priors' own scores as k = 0 rows."""
    parts = [signal_tables(table, examples) for table in training]
    check_training_tasks([p["unlabeled"] for p in parts], "explainer signals")
    tables = {p["unlabeled"]["task"].iloc[0]: p | {"pool": rationale_tokens(table, "rationale_train")}
              for p, table in zip(parts, training)}
    unlabeled = {task: p["unlabeled"] for task, p in tables.items()}
    priors = candidate_priors(model, settings, training[0])
    ks = [k for k in settings.ks if k > 0]
    schedule = settings.schedule
    rows = []
    for task, part in tables.items():
        sources = [t for t in tables if t != task]
        direction = f"{'+'.join(sources)}->{task}"
        pool_ids = list(pd.unique(part["pool"]["example_id"]))
        for name, (prior_variant, columns) in priors.items():
            prior = fit_cross_task(prior_variant, [tables[t] for t in sources], unlabeled[task], unlabeled, columns,
                                   rho, training_settings, device)
            # every refit of this prior reads its pool and validation rows through the prior's pipeline: once
            pool, validation = transformed_rows(prior, part["pool"]), transformed_rows(prior, part["val_all"])
            common = {"direction": direction, "prior": name, "variant": prior_variant.name,
                      "schedule": describe(schedule)}
            rows.append({**common, "k": 0, "repeat": 0, "n_train_examples": 0,
                         "val_auroc": validation_auroc(prior, validation)})
            for k in ks:
                for repeat in range(settings.choice_repeats):
                    ids = draw(pool_ids, min(k, len(pool_ids)), repeat, schedule.seed)
                    tuned = fine_tune(prior, pool.of_examples(ids), replace(schedule, seed=schedule.seed + repeat))
                    rows.append({**common, "k": k, "repeat": repeat, "n_train_examples": len(ids),
                                 "val_auroc": validation_auroc(tuned, validation)})
    table = pd.DataFrame(rows)
    table.insert(0, "fold", fold)
    # in the order of first appearance: the fold's own prior first
    means = table[table["k"] > 0].groupby(["k", "prior"], sort=False)["val_auroc"].mean().reset_index()
    best = means.loc[means.groupby("k", sort=True)["val_auroc"].idxmax()]  # the first of a tie: the earlier prior
    chosen = {int(r.k): r.prior for r in best.itertuples()}
    table["chosen"] = [k > 0 and chosen[k] == prior for k, prior in zip(table["k"], table["prior"])]
    for r in best.itertuples():
        logger.info("%s: few-shot k=%d: prior %s (mean validation AUROC %.4f over the training tasks)", fold, r.k,
                    priors[r.prior][0].name, r.val_auroc)
    return {k: Refit(prior, schedule) for k, prior in chosen.items()}, table


def fit_priors(model: LearnedModel, refits: Mapping[int, Refit], training: Sequence[pd.DataFrame],
               held_out: pd.DataFrame, rho: float, settings: FewShotCurveSettings,
               training_settings: TrainingSettings, device: torch.device | str = "cpu",
               examples: str = CORRECT_ONLY) -> dict[str, LearnedModel]:
    """The priors the `refits` name: the fold's own ExpNet+ `model` (always, as k = 0), and each other chosen
    variant fitted on all the fold's training tasks for the held-out classifier (its signals `held_out` enter
    unlabeled), as the fold fits its candidates, with the fold's threshold and context."""
    models = {FOLD_PRIOR: model}
    needed = {refit.prior for refit in refits.values()} - {FOLD_PRIOR}
    if not needed:
        return models
    parts, target, stats = cross_task_inputs(training, held_out, examples)
    priors = candidate_priors(model, settings, training[0])
    for name in sorted(needed):
        prior_variant, columns = priors[name]
        fitted = fit_cross_task(prior_variant, parts, target, stats, columns, rho, training_settings, device)
        fitted.threshold = model.threshold
        fitted.context = model.context | {"variant": prior_variant.name}
        models[name] = fitted
    return models


def stored_choice(refits: Mapping[int, Refit], priors: Mapping[str, LearnedModel], *, fold: str) -> FewShotChoice:
    """What the fold's folder keeps for a user's refit (`fewshot/`, `fit_rationales`): per k the prior, its variant
    and the schedule the curve refits with, and the fitted priors (`fit_priors`) other than the fold's own."""
    return FewShotChoice(fold, {k: ChosenRefit(r.prior, priors[r.prior].variant.name, r.schedule)
                                for k, r in sorted(refits.items())},
                         {name: model for name, model in priors.items() if name != FOLD_PRIOR})


def draw(pool_ids: Sequence[str], k: int, repeat: int, seed: int) -> list[str]:
    """k example ids of the pool for draw `repeat` (seeded by seed, k and repeat: the draws of one k are
    independent of the other ks')."""
    rng = np.random.default_rng([seed, k, repeat])
    return [pool_ids[i] for i in sorted(rng.choice(len(pool_ids), size=k, replace=False))]
