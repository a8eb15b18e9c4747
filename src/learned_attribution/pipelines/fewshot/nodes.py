"""Nodes of the fewshot pipeline: each fold's ExpNet+ refit on k annotated examples of its held-out task and scored
on the fold's held-out rationale test set (`services/evaluation/fewshot.py`)."""
from __future__ import annotations

from typing import Any, Callable

import pandas as pd

from learned_attribution.services import bundle as bundles
from learned_attribution.services.config import ScoringSettings, scoring_settings
from learned_attribution.services.evaluation import fewshot
from learned_attribution.services.evaluation.fewshot import FewShotCurveSettings


def fewshot_settings(crosstask: dict[str, Any], values: dict[str, Any], layer: int, seed: int
                     ) -> tuple[ScoringSettings, FewShotCurveSettings]:
    """The folds' scoring protocol and the `fewshot` block (ks, draws, the refit's schedule), parsed before any
    work."""
    return scoring_settings(crosstask, layer, seed), fewshot.fewshot_settings(values, seed)


def fewshot_curve(fold_bundle: bundles.Bundle, signals: dict[str, Callable[[], pd.DataFrame]],
                  predictions: pd.DataFrame, fold_metrics: pd.DataFrame, scoring: ScoringSettings,
                  settings: FewShotCurveSettings, *, fold: str) -> pd.DataFrame:
    """The fold's ExpNet+ refit on k annotated held-out examples for every k and draw, scored on the held-out
    rationale test set beside the best baseline and saliency."""
    table = pd.concat([load() for _, load in sorted(signals.items())], ignore_index=True)
    return fewshot.curve(fold_bundle.learned["expnet_plus"], table, predictions, fold_metrics,
                         float(fold_bundle.card["rho"]), scoring, settings, fold=fold)
