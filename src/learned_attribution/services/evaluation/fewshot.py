"""Few-shot in-task: how many of the held-out task's own annotated examples a fold's ExpNet+ needs before it is the
better choice. A fold's explainer (cross-task, the prior) is refit (`core.models.learned.fewshot`) on k annotated
examples drawn from the held-out task's rationale train and validation examples (seeded, `repeats` draws per k),
and every refit is scored on the fold's held-out rationale test set exactly as the fold's own rows are, beside the
fold's best baselines (by AUROC and by matched F1: each metric is compared with the best by that metric) and
saliency. The test examples are never drawn: a pool that holds one is refused by id.

What is refit at each k is the prior (the fold's own ExpNet+ or a candidate catalogue variant fitted cross-task),
chosen per fold without the held-out task, the way the fold chose its variant: for each training task V, each
prior's variant is fitted on the other training tasks (as the fold's explainer is fitted without the held-out task),
refit on k of V's annotated training examples with the one schedule (`fewshot.schedule`), and scored on V's rationale
validation examples; the best mean over tasks and draws is the fold's prior at that k (ties to the fold's own). The
choice and the priors it needs are stored in the fold's folder (`stored_choice`), where a user's refit reads them
(`services/explain.fit_rationales`). The draws of a prior share its input pipeline's pass over their rows
(`transformed_rows`): each row set is transformed once per prior, not once per refit."""
from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from learned_attribution.core.models.learned import (LearnedModel, TrainingSettings, TransformedRows, Variant,
                                                    transformed_rows, validation_auroc)
from learned_attribution.core.models.learned.fewshot import (FOLD_PRIOR, ChosenRefit, FewShotChoice,
                                                             FewShotSettings, fine_tune)
from learned_attribution.core.models.loading import TrainedClassifier

from ..config import ScoringSettings, block, positive_int, variant
from ..fewshot.suggest import Candidates, pick, pool_candidates
from .folds import (candidate_columns, check_training_tasks, cross_task_inputs, fit_cross_task, rationale_tokens,
                    signal_tables)
from .protocol import (as_learned_row, learned_rationale_scores, matched_baselines, rationale_test_examples,
                       scored_examples)

logger = logging.getLogger(__name__)

FEWSHOT_KEYS = ("ks", "repeats", "pool_roles", "priors", "schedule", "choice_repeats")
FIT_KEYS = ("steps", "batch_size", "step_scale", "prior_weight")
REFERENCE_METHODS = ("saliency",)  # beside the fold's best baselines
BEST_BASELINE, BEST_BASELINE_F1 = "best baseline", "best baseline (F1)"  # the best by AUROC, by matched F1
CURVE_COLUMNS = ["fold", "method", "role", "k", "repeat", "prior", "n_train_examples", "n_examples", "auroc",
                 "auroc_low", "auroc_high", "f1_matched", "f1_matched_low", "f1_matched_high", "auroc_incorrect",
                 "auroc_incorrect_low", "auroc_incorrect_high", "auroc_correct", "f1_matched_incorrect"]


@dataclass(frozen=True)
class FewShotCurveSettings:
    """`fewshot`: the numbers of annotated examples (`ks`, 0 = the cross-task explainer itself), the seeded draws
    per k, the held-out task's roles the examples are drawn from, the catalogue variants that are candidate priors
    beside the fold's own ExpNet+ (each fitted cross-task on the fold's training tasks), the refit's schedule, and the
    draws per training task and k on which a fold compares the priors (`choose_refits`)."""

    ks: tuple[int, ...]
    repeats: int
    pool_roles: tuple[str, ...]
    priors: tuple[Variant, ...]
    schedule: FewShotSettings
    choice_repeats: int


@dataclass(frozen=True)
class Refit:
    """What a fold refits at one k: its prior (`FOLD_PRIOR` or a candidate variant's name) and the schedule."""

    prior: str
    schedule: FewShotSettings


def fewshot_settings(values: Mapping[str, Any] | None, seed: int, catalogue: Mapping[str, Any]
                     ) -> FewShotCurveSettings:
    """`params:fewshot` (conf/base/parameters_fewshot.yml), its priors named from the variant catalogue
    `catalogue` (`params:expnet_plus_variants`), a bad value named by its key."""
    values = block(values, "fewshot", FEWSHOT_KEYS)
    ks = values["ks"]
    if not isinstance(ks, list | tuple) or not ks or any(isinstance(k, bool) or not isinstance(k, int) or k < 0
                                                          for k in ks):
        raise ValueError(f"parameter fewshot.ks={ks!r} must be a list of integers of at least 0")
    names = list(values["priors"] or [])
    unknown = [name for name in names if name not in catalogue]
    if unknown:
        raise ValueError(f"parameter fewshot.priors names unknown variants {unknown}; the catalogue "
                         f"expnet_plus_variants defines {sorted(catalogue)}")
    fit = block(values["schedule"], "fewshot.schedule", FIT_KEYS)
    try:
        schedule = FewShotSettings(steps=positive_int(fit["steps"], "fewshot.schedule.steps"),
                                   batch_size=positive_int(fit["batch_size"], "fewshot.schedule.batch_size"),
                                   step_scale=float(fit["step_scale"]), prior_weight=float(fit["prior_weight"]),
                                   seed=seed)
    except ValueError as error:
        raise ValueError(f"parameter fewshot.schedule: {error}") from None
    return FewShotCurveSettings(ks=tuple(sorted(set(ks))), repeats=positive_int(values["repeats"], "fewshot.repeats"),
                                pool_roles=tuple(values["pool_roles"]),
                                priors=tuple(variant(name, catalogue[name], f"expnet_plus_variants.{name}")
                                             for name in names),
                                schedule=schedule,
                                choice_repeats=positive_int(values["choice_repeats"], "fewshot.choice_repeats"))


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
                  training_settings: TrainingSettings, device: torch.device | str = "cpu", *, fold: str
                  ) -> tuple[dict[int, Refit], pd.DataFrame]:
    """The fold's prior for every k > 0 of `settings.ks` (refit with `settings.schedule`), chosen on its training
    tasks' signal tables (`training`; the held-out task is not an argument): for each training task V and candidate
    prior (`candidate_priors`), the prior's variant fitted on the other training tasks for V's classifier, refit on k
    of V's annotated rationale_train examples (`choice_repeats` seeded draws; all of them where V has fewer, counted
    in `n_train_examples`), and scored on V's rationale validation examples (every one with a rationale, mispredicted
    ones too). Returns per k the prior with the best mean AUROC (ties to the earlier prior, the fold's own first), and
    the table of every refit, with the priors' own scores as k = 0 rows."""
    parts = [signal_tables(table) for table in training]
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
               training_settings: TrainingSettings, device: torch.device | str = "cpu") -> dict[str, LearnedModel]:
    """The priors the `refits` name: the fold's own ExpNet+ `model` (always, as k = 0), and each other chosen
    variant fitted on all the fold's training tasks for the held-out classifier (its signals `held_out` enter
    unlabeled), as the fold fits its candidates, with the fold's threshold and context."""
    models = {FOLD_PRIOR: model}
    needed = {refit.prior for refit in refits.values()} - {FOLD_PRIOR}
    if not needed:
        return models
    parts, target, stats = cross_task_inputs(training, held_out)
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


def annotated_pool(predictions: pd.DataFrame, roles: Sequence[str], test_ids: Sequence[str]) -> pd.DataFrame:
    """The examples a few-shot draw may take: `roles`' examples with a rationale token, predicted right or wrong (a
    user annotates their own examples whatever the classifier says). One of the test examples among them is
    refused, naming it."""
    pool = pd.concat([rationale_test_examples(predictions, role=role) for role in roles], ignore_index=True)
    leaked = sorted(set(pool["example_id"]) & set(test_ids))
    if leaked:
        raise ValueError(f"{len(leaked)} example(s) to fit on are test examples of the fold, e.g. {leaked[:3]}: a "
                         "few-shot explainer is scored on the test set and never fitted on it")
    return pool


def draw(pool_ids: Sequence[str], k: int, repeat: int, seed: int) -> list[str]:
    """k example ids of the pool for draw `repeat` (seeded by seed, k and repeat: the draws of one k are
    independent of the other ks')."""
    rng = np.random.default_rng([seed, k, repeat])
    return [pool_ids[i] for i in sorted(rng.choice(len(pool_ids), size=k, replace=False))]


SUGGESTED = "suggested"  # the role of the rows refit on the k examples `services/fewshot/suggest.py`'s rule picks


def suggested_row(prior: LearnedModel, refit: Refit, labelled: TransformedRows, candidates: Candidates, k: int,
                  signals: TransformedRows, test: pd.DataFrame, rho: float, scoring: ScoringSettings, *, fold: str
                  ) -> dict[str, Any]:
    """The `suggested` row of k: `prior` refit on the k pool examples the suggestion rule picks (`suggest.pick`:
    the most typical text of each of k clusters of the held-out classifier's representation, k-means seeded as
    `learned-attribution suggest` seeds it by default) with the k's schedule, seeded as the k's draw 0, and scored as
    a draw is; repeat 0."""
    ids = pick(candidates, k)
    tuned = fine_tune(prior, labelled.of_examples(ids), refit.schedule)
    scores = learned_rationale_scores(tuned, signals, test, rho, scoring)
    logger.info("%s: few-shot k=%d, the %d suggested examples: AUROC %.4f", fold, k, len(ids), scores["auroc"])
    return {"fold": fold, "method": "expnet_plus", "role": SUGGESTED, "k": k, "repeat": 0,
            "prior": prior.variant.name, "n_train_examples": len(ids), **scores}


def curve(priors: Mapping[str, LearnedModel], signals: pd.DataFrame, predictions: pd.DataFrame,
          fold_metrics: pd.DataFrame, rho: float, scoring: ScoringSettings, settings: FewShotCurveSettings,
          refits: Mapping[int, Refit], *, fold: str, classifier: TrainedClassifier) -> pd.DataFrame:
    """The few-shot curve of one fold (`CURVE_COLUMNS`): for every k and draw, that k's prior (`priors`, by the
    names `refits` use; k = 0 is the fold's own ExpNet+ itself) refit on k annotated examples with that k's schedule
    and scored on the held-out rationale test set (AUROC and matched F1 with bootstrap 95% intervals, the
    mispredicted examples' AUROC), then as reference rows the fold's best baseline by AUROC (`BEST_BASELINE`), its
    best by matched F1 where that is another method (`BEST_BASELINE_F1`) and saliency. A k larger than the pool is
    skipped with one line saying how many examples were found. For every k > 0, beside the draws, a
    `suggested` row (`suggested_row`): the k examples of the same pool that the suggestion rule picks with the
    held-out `classifier` (one pass over the pool), refit and scored as the draws are."""
    test = scored_examples(predictions, scoring)
    pool = annotated_pool(predictions, settings.pool_roles, list(test["example_id"]))
    pool_ids = list(pool["example_id"])
    labelled = signals[signals["example_id"].isin(set(pool_ids))]
    test_signals = signals[signals["example_id"].isin(set(test["example_id"]))]
    transformed: dict[str, tuple[TransformedRows, TransformedRows]] = {}  # per prior: its pool and test rows, once
    candidates = pool_candidates(classifier, pool, scoring.batch_size)  # the `suggested` rows' rule (suggest.py)
    rows = []
    for k in settings.ks:
        if k > len(pool_ids):
            logger.warning("%s: few-shot k=%d skipped: the pool (%s) holds %d annotated examples", fold, k,
                           "/".join(settings.pool_roles), len(pool_ids))
            continue
        refit = refits.get(k, Refit(FOLD_PRIOR, settings.schedule))  # k = 0 draws nothing: the prior itself
        prior = priors[refit.prior]
        if refit.prior not in transformed:
            transformed[refit.prior] = (transformed_rows(prior, labelled), transformed_rows(prior, test_signals))
        prior_pool, prior_test = transformed[refit.prior]
        for repeat in range(settings.repeats if k else 1):
            ids = draw(pool_ids, k, repeat, refit.schedule.seed)
            tuned = fine_tune(prior, prior_pool.of_examples(ids), replace(refit.schedule, seed=refit.schedule.seed + repeat))
            scores = learned_rationale_scores(tuned, prior_test, test, rho, scoring)
            rows.append({"fold": fold, "method": "expnet_plus", "role": "few-shot", "k": k, "repeat": repeat,
                         "prior": prior.variant.name, "n_train_examples": len(ids), **scores})
        logger.info("%s: few-shot k=%d (prior %s): AUROC %s", fold, k, prior.variant.name,
                    np.round([r["auroc"] for r in rows if r["k"] == k], 4).tolist())
        if k:
            rows.append(suggested_row(prior, refit, prior_pool, candidates, k, prior_test, test, rho, scoring,
                                      fold=fold))
    matched = matched_baselines(fold_metrics)
    best = matched.sort_values("auroc", ascending=False, kind="stable").head(1)
    best_f1 = matched.sort_values("f1", ascending=False, kind="stable").head(1)
    references = [(best, BEST_BASELINE)] + ([(best_f1, BEST_BASELINE_F1)] if list(best_f1["method"]) !=
                                            list(best["method"]) else [])
    references += [(matched[matched["method"] == m], m) for m in REFERENCE_METHODS]
    for frame, role in references:
        for _, reference in frame.iterrows():
            rows.append({"fold": fold, "method": reference["method"], "role": role,
                         **as_learned_row(reference, fold_metrics)})
    return pd.DataFrame(rows).reindex(columns=CURVE_COLUMNS)


def curve_summary(curves: pd.DataFrame) -> pd.DataFrame:
    """Per fold and k: the prior refit, the draws' mean AUROC and matched F1 (with the lowest and highest draw, and
    each draw's bootstrap interval averaged), the mispredicted examples' AUROC, and each metric against the fold's
    best baseline by that metric: AUROC against the best by AUROC (`best_baseline`), matched F1 against the best by
    matched F1 (`best_baseline_by_f1`; the same method where no `BEST_BASELINE_F1` row differs), each baseline's
    value and interval, and in how many draws the refit is above it with the intervals apart; and the `suggested`
    row's AUROC and matched F1 (the k examples `suggest`'s rule picks; NaN at k = 0), each with whether its interval
    is apart above that metric's best baseline (`suggested_auroc_apart`, `suggested_f1_matched_apart`)."""
    rows = []
    for fold, group in curves.groupby("fold", sort=False):
        best = group[group["role"] == BEST_BASELINE].iloc[0]
        by_f1 = group[group["role"] == BEST_BASELINE_F1]
        references = {"auroc": best, "f1_matched": by_f1.iloc[0] if len(by_f1) else best}
        saliency = group[group["role"] == "saliency"]
        for k, draws in group[group["role"] == "few-shot"].groupby("k"):
            row = {"fold": fold, "k": int(k), "draws": len(draws), "prior": draws["prior"].iloc[0],
                   "best_baseline": best["method"], "best_baseline_by_f1": references["f1_matched"]["method"]}
            for metric, reference in references.items():
                row.update({metric: draws[metric].mean(), f"{metric}_draw_min": draws[metric].min(),
                            f"{metric}_draw_max": draws[metric].max(), f"{metric}_low": draws[f"{metric}_low"].mean(),
                            f"{metric}_high": draws[f"{metric}_high"].mean(), f"baseline_{metric}": reference[metric],
                            f"baseline_{metric}_low": reference[f"{metric}_low"],
                            f"baseline_{metric}_high": reference[f"{metric}_high"],
                            f"{metric}_draws_apart": int((draws[f"{metric}_low"] > reference[f"{metric}_high"]).sum())})
            row.update({"auroc_incorrect": draws["auroc_incorrect"].mean(),
                        "saliency_auroc_incorrect": saliency["auroc_incorrect"].iloc[0] if len(saliency) else np.nan})
            suggested = group[(group["role"] == SUGGESTED) & (group["k"] == k)]
            for metric, reference in references.items():  # beside the draws, not in their mean
                row[f"suggested_{metric}"] = suggested[metric].iloc[0] if len(suggested) else np.nan
                row[f"suggested_{metric}_apart"] = bool(len(suggested)) and bool(
                    suggested[f"{metric}_low"].iloc[0] > reference[f"{metric}_high"])
            rows.append(row)
    return pd.DataFrame(rows)


def prior_summary(choices: pd.DataFrame) -> pd.DataFrame:
    """Per fold, k and candidate prior: the mean validation AUROC of its refits over the training tasks and draws,
    the lowest refit, that prior's own mean (k = 0) beside it, and whether the fold chose it at that k."""
    frames = []
    for fold, group in choices.groupby("fold", sort=False):
        own = group[group["k"] == 0].groupby("prior")["val_auroc"].mean()
        rows = []
        for (k, prior, variant_name), rows_k in group[group["k"] > 0].groupby(["k", "prior", "variant"], sort=False):
            rows.append({"fold": fold, "k": int(k), "prior": prior, "variant": variant_name,
                         "schedule": rows_k["schedule"].iloc[0], "refits": len(rows_k),
                         "n_train_examples": int(rows_k["n_train_examples"].max()),
                         "val_auroc": rows_k["val_auroc"].mean(), "val_auroc_min": rows_k["val_auroc"].min(),
                         "prior_val_auroc": own[prior], "chosen": bool(rows_k["chosen"].any())})
        frames.append(pd.DataFrame(rows).sort_values("k", kind="mergesort"))
    return pd.concat(frames, ignore_index=True)
