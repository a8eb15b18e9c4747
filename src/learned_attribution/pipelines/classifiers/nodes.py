"""Nodes of the classifiers pipeline: fine-tune one classifier per task, predict, extract the explainers' inputs
(`services/classifiers.py`)."""
from __future__ import annotations

import logging
from typing import Any, Callable

import pandas as pd

from learned_attribution.core.models.loading import TrainedClassifier
from learned_attribution.services import classifiers
from learned_attribution.services.config import (ClassifierSettings, ComputeSettings, FeatureSettings,
                                                 classifier_settings, compute_settings, encoder_name, feature_settings)

logger = logging.getLogger(__name__)


def task_settings(classifier: dict[str, Any], features: dict[str, Any], seed: int, compute: dict[str, Any], *,
                  task: str) -> tuple[ClassifierSettings, FeatureSettings, ComputeSettings]:
    """The task's parameter blocks, parsed once: `classifiers.<task>`, `features`, `compute`."""
    parsed = compute_settings(compute)
    return classifier_settings(classifier, seed, parsed, f"classifiers.{task}"), feature_settings(features), parsed


def train_classifier(tokenized: pd.DataFrame, encoder: dict[str, Any], settings: ClassifierSettings,
                     compute: ComputeSettings) -> tuple[TrainedClassifier, pd.DataFrame]:
    """Fine-tune the encoder on the task's classifier_train rows; the epoch is chosen on classifier_val."""
    return classifiers.train_task_classifier(tokenized, encoder_name(encoder), settings, compute)


def predict_examples(classifier: TrainedClassifier, tokenized: pd.DataFrame, settings: ClassifierSettings,
                     compute: ComputeSettings) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rationale rows with the classifier's predictions, and its metrics on the test and rationale sets."""
    return classifiers.predict_roles(classifier, tokenized, settings, compute)


def explainer_signals(classifier: TrainedClassifier, predictions: pd.DataFrame, features: FeatureSettings,
                      layer: int, compute: ComputeSettings) -> dict[str, Callable[[], pd.DataFrame]]:
    """ExpNet+ inputs: every signal of `models.signals` for every rationale example, as Parquet parts saved lazily
    one chunk at a time."""
    return classifiers.signal_parts(classifier, predictions, features, layer, compute)


def gold_signals(classifier: TrainedClassifier, predictions: pd.DataFrame, features: FeatureSettings, layer: int,
                 compute: ComputeSettings) -> pd.DataFrame:
    """Gold mode's signals: every signal of `models.signals` for the mispredicted rationale examples, each explained
    for the class its rationale supports (the other examples' are the same in both modes)."""
    return classifiers.gold_signal_table(classifier, predictions, features, layer, compute)


def attention_features(signals: dict[str, Callable[[], pd.DataFrame]], classifier: TrainedClassifier,
                       predictions: pd.DataFrame, encoder: dict[str, Any], features: FeatureSettings, layer: int,
                       compute: ComputeSettings) -> dict[str, Callable[[], pd.DataFrame]]:
    """The paper's ExpNet inputs (SPEC §5), as Parquet parts saved lazily one chunk at a time."""
    return classifiers.attention_feature_parts(signals, classifier, predictions, encoder_name(encoder), features,
                                               layer, compute)


def combine_classifier_metrics(*tables: pd.DataFrame) -> pd.DataFrame:
    """Stack the per-task metric rows into data/08_reporting/classifier_metrics.csv."""
    metrics = pd.concat(tables, ignore_index=True)
    logger.info("Classifier metrics:\n%s", metrics.round(4).to_string(index=False))
    return metrics
