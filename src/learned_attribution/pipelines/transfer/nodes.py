"""Nodes of the transfer pipeline: a fold's shape-free ExpNet+ trained on another encoder's classifiers, applied to
this run's classifier of the fold's held-out task and scored like the fold's own explainers."""
from __future__ import annotations

from typing import Any

import pandas as pd

from learned_attribution.core.models.loading import TrainedClassifier
from learned_attribution.pipelines import Parts, token_table
from learned_attribution.services import bundle as bundles
from learned_attribution.services.config import ScoringSettings, scoring_settings
from learned_attribution.services.evaluation.transfer import transfer_rows


def transfer_settings(crosstask: dict[str, Any], layer: int, seed: int) -> ScoringSettings:
    """The folds' scoring protocol, which the transferred explainer is scored by."""
    return scoring_settings(crosstask, layer, seed)


def transfer_fold(source: bundles.Bundle, signals: Parts, predictions: pd.DataFrame,
                  classifier: TrainedClassifier, fold_metrics: pd.DataFrame, scoring: ScoringSettings, *,
                  fold: str) -> pd.DataFrame:
    """The source fold's shape-free explainer on this run's held-out rationale test set, beside this fold's own
    explainers, saliency, best baseline and floors."""
    return transfer_rows(source.shape_free, token_table(signals), predictions, classifier, fold_metrics, scoring, fold=fold)
