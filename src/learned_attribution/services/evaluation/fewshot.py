"""Few-shot in-task: how many of the held-out task's own annotated examples a fold's ExpNet+ needs before it is the
better choice. The fold's explainer (cross-task, the prior) is refit (`core.models.learned.fewshot`) on k annotated
examples drawn from the held-out task's rationale train and validation examples (seeded, `repeats` draws per k),
and every refit is scored on the fold's held-out rationale test set exactly as the fold's own rows are, beside the
fold's best baseline and saliency. The test examples are never drawn: a pool that holds one is refused by id."""
from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from learned_attribution.core.models.learned import LearnedModel
from learned_attribution.core.models.learned.fewshot import FewShotSettings, fine_tune

from ..config import ScoringSettings, block, positive_int
from .protocol import (as_learned_row, learned_rationale_scores, matched_baselines, rationale_test_examples,
                       scored_examples)

logger = logging.getLogger(__name__)

FEWSHOT_KEYS = ("ks", "repeats", "pool_roles", "fit")
FIT_KEYS = ("steps", "batch_size", "learning_rate", "prior_weight")
REFERENCE_METHODS = ("saliency",)  # beside the fold's best baseline
CURVE_COLUMNS = ["fold", "method", "role", "k", "repeat", "n_train_examples", "n_examples", "auroc", "auroc_low",
                 "auroc_high", "f1_matched", "f1_matched_low", "f1_matched_high", "auroc_incorrect",
                 "auroc_incorrect_low", "auroc_incorrect_high", "auroc_correct", "f1_matched_incorrect"]


@dataclass(frozen=True)
class FewShotCurveSettings:
    """`fewshot`: the numbers of annotated examples (`ks`, 0 = the cross-task explainer itself), the seeded draws
    per k, the held-out task's roles the examples are drawn from, and the refit's fixed schedule."""

    ks: tuple[int, ...]
    repeats: int
    pool_roles: tuple[str, ...]
    fit: FewShotSettings


def fewshot_settings(values: Mapping[str, Any] | None, seed: int) -> FewShotCurveSettings:
    """`params:fewshot` (conf/base/parameters_fewshot.yml), a bad value named by its key."""
    values = block(values, "fewshot", FEWSHOT_KEYS)
    ks = values["ks"]
    if not isinstance(ks, list | tuple) or not ks or any(isinstance(k, bool) or not isinstance(k, int) or k < 0
                                                          for k in ks):
        raise ValueError(f"parameter fewshot.ks={ks!r} must be a list of integers of at least 0")
    fit = block(values["fit"], "fewshot.fit", FIT_KEYS)
    schedule = FewShotSettings(steps=positive_int(fit["steps"], "fewshot.fit.steps"),
                               batch_size=positive_int(fit["batch_size"], "fewshot.fit.batch_size"),
                               learning_rate=None if fit["learning_rate"] is None else float(fit["learning_rate"]),
                               prior_weight=float(fit["prior_weight"]), seed=seed)
    return FewShotCurveSettings(ks=tuple(sorted(set(ks))), repeats=positive_int(values["repeats"], "fewshot.repeats"),
                                pool_roles=tuple(values["pool_roles"]), fit=schedule)


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


def run_test_ids(models_dir: Path, task: str) -> list[str]:
    """The rationale test examples of `task` in the run whose models are in `models_dir` (its
    `07_model_output/rationale_predictions_<task>.parquet` beside it), empty where that run left none."""
    path = models_dir.parent / "07_model_output" / f"rationale_predictions_{task}.parquet"
    if not path.is_file():
        return []
    predictions = pd.read_parquet(path, columns=["example_id", "role"])
    return predictions.loc[predictions["role"] == "rationale_test", "example_id"].astype(str).tolist()


def draw(pool_ids: Sequence[str], k: int, repeat: int, seed: int) -> list[str]:
    """k example ids of the pool for draw `repeat` (seeded by seed, k and repeat: the draws of one k are
    independent of the other ks')."""
    rng = np.random.default_rng([seed, k, repeat])
    return [pool_ids[i] for i in sorted(rng.choice(len(pool_ids), size=k, replace=False))]


def curve(model: LearnedModel, signals: pd.DataFrame, predictions: pd.DataFrame, fold_metrics: pd.DataFrame,
          rho: float, scoring: ScoringSettings, settings: FewShotCurveSettings, *, fold: str) -> pd.DataFrame:
    """The few-shot curve of one fold (`CURVE_COLUMNS`): for every k and draw, the fold's explainer refit on k
    annotated examples and scored on the held-out rationale test set (AUROC and matched F1 with bootstrap 95%
    intervals, the mispredicted examples' AUROC), then the fold's best baseline and saliency as reference rows. A k
    larger than the pool is skipped with one line saying how many examples were found."""
    test = scored_examples(predictions, scoring)
    pool = annotated_pool(predictions, settings.pool_roles, list(test["example_id"]))
    pool_ids = list(pool["example_id"])
    labelled = signals[signals["example_id"].isin(set(pool_ids))]
    rows = []
    for k in settings.ks:
        if k > len(pool_ids):
            logger.warning("%s: few-shot k=%d skipped: the pool (%s) holds %d annotated examples", fold, k,
                           "/".join(settings.pool_roles), len(pool_ids))
            continue
        for repeat in range(settings.repeats if k else 1):
            ids = draw(pool_ids, k, repeat, settings.fit.seed)
            tuned = fine_tune(model, labelled[labelled["example_id"].isin(set(ids))],
                              replace(settings.fit, seed=settings.fit.seed + repeat))
            scores = learned_rationale_scores(tuned, signals, test, rho, scoring)
            rows.append({"fold": fold, "method": "expnet_plus", "role": "few-shot", "k": k, "repeat": repeat,
                         "n_train_examples": len(ids), **scores})
        logger.info("%s: few-shot k=%d: AUROC %s", fold, k,
                    np.round([r["auroc"] for r in rows if r["k"] == k], 4).tolist())
    matched = matched_baselines(fold_metrics)
    best = matched.sort_values("auroc", ascending=False).head(1)
    references = [(best, "best baseline")] + [(matched[matched["method"] == m], m) for m in REFERENCE_METHODS]
    for frame, role in references:
        for _, reference in frame.iterrows():
            rows.append({"fold": fold, "method": reference["method"], "role": role,
                         **as_learned_row(reference, fold_metrics)})
    return pd.DataFrame(rows).reindex(columns=CURVE_COLUMNS)


def curve_summary(curves: pd.DataFrame) -> pd.DataFrame:
    """Per fold and k: the draws' mean AUROC and matched F1 (with the lowest and highest draw, and each draw's
    bootstrap interval averaged), the mispredicted examples' AUROC, the fold's best baseline beside them, and in how
    many draws the refit is above the best baseline with the intervals apart."""
    rows = []
    for fold, group in curves.groupby("fold", sort=False):
        best = group[group["role"] == "best baseline"].iloc[0]
        saliency = group[group["role"] == "saliency"]
        for k, draws in group[group["role"] == "few-shot"].groupby("k"):
            row = {"fold": fold, "k": int(k), "draws": len(draws), "best_baseline": best["method"]}
            for metric in ("auroc", "f1_matched"):
                row.update({metric: draws[metric].mean(), f"{metric}_draw_min": draws[metric].min(),
                            f"{metric}_draw_max": draws[metric].max(), f"{metric}_low": draws[f"{metric}_low"].mean(),
                            f"{metric}_high": draws[f"{metric}_high"].mean(),
                            f"baseline_{metric}": best[metric], f"baseline_{metric}_low": best[f"{metric}_low"],
                            f"baseline_{metric}_high": best[f"{metric}_high"],
                            f"{metric}_draws_apart": int((draws[f"{metric}_low"] > best[f"{metric}_high"]).sum())})
            row.update({"auroc_incorrect": draws["auroc_incorrect"].mean(),
                        "saliency_auroc_incorrect": saliency["auroc_incorrect"].iloc[0] if len(saliency) else np.nan})
            rows.append(row)
    return pd.DataFrame(rows)
