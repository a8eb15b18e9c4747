"""Few-shot in-task: how many of the held-out task's own annotated examples a fold's ExpNet+ needs before it is the
better choice. A fold's explainer (cross-task, the prior, `choice.py`) is refit (`core.models.learned.fewshot`) on
k annotated examples drawn from the held-out task's rationale train and validation examples (seeded, `repeats` draws
per k), and every refit is scored on the fold's held-out rationale test set exactly as the fold's own rows are
(`services/evaluation/protocol.py`), beside the fold's best baselines (by AUROC and by matched F1: each metric is
compared with the best by that metric) and saliency. The test examples are never drawn: a pool that holds one is
refused by id."""
from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from learned_attribution.core.data.modes import GOLD, rows_in_mode
from learned_attribution.core.models.learned import LearnedModel, TransformedRows, transformed_rows
from learned_attribution.core.models.learned.fewshot import FOLD_PRIOR, fine_tune
from learned_attribution.core.models.loading import TrainedClassifier
from learned_attribution.core.explainers.learned import EXPNET_PLUS

from ..config import FewShotCurveSettings, ScoringSettings
from ..evaluation.protocol import matched_baselines, rationale_test_examples, scored_examples
from ..evaluation.learned_scores import as_learned_row, learned_rationale_scores
from .choice import Refit, draw
from .suggest import Candidates, pick, pool_candidates

logger = logging.getLogger(__name__)

REFERENCE_METHODS = ("saliency",)  # beside the fold's best baselines
BEST_BASELINE, BEST_BASELINE_F1 = "best baseline", "best baseline (F1)"  # the best by AUROC, by matched F1
SCORE_COLUMNS = ["auroc", "auroc_low", "auroc_high", "f1_matched", "f1_matched_low", "f1_matched_high",
                 "auroc_incorrect", "auroc_incorrect_low", "auroc_incorrect_high"]
# Predicted mode's scores, then gold mode's (`gold_<column>`: each test example explained for its gold class).
CURVE_COLUMNS = ["fold", "method", "role", "k", "repeat", "prior", "n_train_examples", "n_examples", *SCORE_COLUMNS,
                 "auroc_correct", "f1_matched_incorrect", *(f"{GOLD}_{column}" for column in SCORE_COLUMNS)]


def both_modes(model: LearnedModel, test: tuple[TransformedRows, TransformedRows], examples: pd.DataFrame, rho: float,
               scoring: ScoringSettings) -> dict[str, Any]:
    """A refit's scores on the test examples in predicted mode (`learned_rationale_scores`) and, as `gold_<column>`,
    in gold mode (`test`: its predicted-mode and gold-mode rows)."""
    predicted, gold = (learned_rationale_scores(model, rows, examples, rho, scoring) for rows in test)
    return {**predicted, **{f"{GOLD}_{column}": gold[column] for column in SCORE_COLUMNS}}


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


SUGGESTED = "suggested"  # the role of the rows refit on the k examples `services/fewshot/suggest.py`'s rule picks


def suggested_row(prior: LearnedModel, refit: Refit, labelled: TransformedRows, candidates: Candidates, k: int,
                  signals: tuple[TransformedRows, TransformedRows], test: pd.DataFrame, rho: float,
                  scoring: ScoringSettings, *, fold: str) -> dict[str, Any]:
    """The `suggested` row of k: `prior` refit on the k pool examples the suggestion rule picks (`suggest.pick`,
    `SUGGESTION_RULE`, seeded as `learned-attribution suggest` seeds it by default) with the k's schedule, seeded as
    the k's draw 0, and scored as a draw is; repeat 0."""
    ids = pick(candidates, k)
    tuned = fine_tune(prior, labelled.of_examples(ids), refit.schedule)
    scores = both_modes(tuned, signals, test, rho, scoring)
    logger.info("%s: few-shot k=%d, the %d suggested examples: AUROC %.4f", fold, k, len(ids), scores["auroc"])
    return {"fold": fold, "method": EXPNET_PLUS, "role": SUGGESTED, "k": k, "repeat": 0,
            "prior": prior.variant.name, "n_train_examples": len(ids), **scores}


def curve(priors: Mapping[str, LearnedModel], signals: pd.DataFrame, gold_signals: pd.DataFrame,
          predictions: pd.DataFrame, fold_metrics: pd.DataFrame, gold_metrics: pd.DataFrame, rho: float,
          scoring: ScoringSettings, settings: FewShotCurveSettings, refits: Mapping[int, Refit], *, fold: str,
          classifier: TrainedClassifier) -> pd.DataFrame:
    """The few-shot curve of one fold (`CURVE_COLUMNS`): for every k and draw, that k's prior (`priors`, by the
    names `refits` use; k = 0 is the fold's own ExpNet+ itself) refit on k annotated examples with that k's schedule
    and scored on the held-out rationale test set (AUROC and matched F1 with bootstrap 95% intervals, the
    mispredicted examples' AUROC), then as reference rows the fold's best baseline by AUROC (`BEST_BASELINE`), its
    best by matched F1 where that is another method (`BEST_BASELINE_F1`) and saliency. A k larger than the pool is
    skipped with one line saying how many examples were found. For every k > 0, beside the draws, a
    `suggested` row (`suggested_row`): the k examples of the same pool that the suggestion rule picks with the
    held-out `classifier` (one pass over the pool), refit and scored as the draws are. A refit trains on the signals of
    the class each annotated example's rationale supports (`gold_signals`: the mispredicted ones', as a user's refit
    reads the annotator's class) and every row is scored in both modes (`gold_metrics`: the references' gold mode)."""
    test = scored_examples(predictions, scoring)
    pool = annotated_pool(predictions, settings.pool_roles, list(test["example_id"]))
    pool_ids = list(pool["example_id"])
    gold = rows_in_mode(signals, gold_signals, GOLD)
    labelled = gold[gold["example_id"].isin(set(pool_ids))]
    test_ids = set(test["example_id"])
    test_signals = (signals[signals["example_id"].isin(test_ids)], gold[gold["example_id"].isin(test_ids)])
    # per prior: its pool rows and test rows in both modes, transformed once
    transformed: dict[str, tuple[TransformedRows, tuple[TransformedRows, TransformedRows]]] = {}
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
            transformed[refit.prior] = (transformed_rows(prior, labelled),
                                        tuple(transformed_rows(prior, rows) for rows in test_signals))
        prior_pool, prior_test = transformed[refit.prior]
        for repeat in range(settings.repeats if k else 1):
            ids = draw(pool_ids, k, repeat, refit.schedule.seed)
            tuned = fine_tune(prior, prior_pool.of_examples(ids), replace(refit.schedule, seed=refit.schedule.seed + repeat))
            scores = both_modes(tuned, prior_test, test, rho, scoring)
            rows.append({"fold": fold, "method": EXPNET_PLUS, "role": "few-shot", "k": k, "repeat": repeat,
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
    gold_matched = gold_metrics[(gold_metrics["subset"] == "all") & (gold_metrics["rule"] == "matched")]
    for frame, role in references:
        for _, reference in frame.iterrows():
            row = {"fold": fold, "method": reference["method"], "role": role,
                   **as_learned_row(reference, fold_metrics)}
            for _, in_gold in gold_matched[gold_matched["method"] == reference["method"]].head(1).iterrows():
                row.update({f"{GOLD}_{column}": value for column, value in as_learned_row(in_gold, gold_metrics).items()
                            if column in SCORE_COLUMNS})
            rows.append(row)
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
            for metric in ("auroc", "auroc_incorrect"):  # gold mode, against the same baselines in gold mode
                column = f"{GOLD}_{metric}"
                row[column] = draws[column].mean() if column in draws else np.nan
                row[f"baseline_{column}"] = best.get(column, np.nan)
            row[f"saliency_{GOLD}_auroc_incorrect"] = (saliency[f"{GOLD}_auroc_incorrect"].iloc[0]
                                                       if len(saliency) and f"{GOLD}_auroc_incorrect" in saliency
                                                       else np.nan)
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
