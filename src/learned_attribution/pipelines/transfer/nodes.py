"""Nodes of the transfer pipeline: a fold's shape-free ExpNet+ trained on another encoder's classifiers, applied to
this run's classifier of the fold's held-out task and scored like the fold's own explainers."""
from __future__ import annotations

from typing import Any, Callable

import pandas as pd

from learned_attribution.core.models.loading import TrainedClassifier
from learned_attribution.services import bundle as bundles
from learned_attribution.services.config import ScoringSettings, scoring_settings
from learned_attribution.services.evaluation.transfer import transfer_rows


def transfer_settings(crosstask: dict[str, Any], layer: int, seed: int) -> ScoringSettings:
    """The folds' scoring protocol, which the transferred explainer is scored by."""
    return scoring_settings(crosstask, layer, seed)


def transfer_fold(source: bundles.Bundle, signals: dict[str, Callable[[], pd.DataFrame]], predictions: pd.DataFrame,
                  classifier: TrainedClassifier, fold_metrics: pd.DataFrame, scoring: ScoringSettings, *,
                  fold: str) -> pd.DataFrame:
    """The source fold's shape-free explainer on this run's held-out rationale test set, beside this fold's own
    explainers, saliency, best baseline and floors."""
    table = pd.concat([load() for _, load in sorted(signals.items())], ignore_index=True)
    return transfer_rows(source.shape_free, table, predictions, classifier, fold_metrics, scoring, fold=fold)
