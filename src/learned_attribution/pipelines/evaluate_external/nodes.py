"""Nodes of `evaluate_external`: a user's rationale file (catalog entry `external_rationales`) scored with a trained
fold's learned explainers and every baseline of the protocol, explaining a chosen task's classifier. The work is in
`services/evaluation` (`external`, `protocol`); the MLflow run is the tracking hook's (`adapters/hooks/runs.py`)."""
from __future__ import annotations

from typing import Any

import matplotlib.figure
import pandas as pd

from learned_attribution.core.models.learned import LearnedModel
from learned_attribution.core.models.loading import TrainedClassifier
from learned_attribution.core.explainers.learned import EXPNET_PLUS
from learned_attribution.services.bundle import Bundle
from learned_attribution.services.config import (ComputeSettings, ExternalSettings, ScoringSettings, compute_settings,
                                                 external_settings, scoring_settings)
from learned_attribution.services.evaluation import external, protocol
from learned_attribution.services.reporting import charts


def parse_settings(evaluate_external: dict[str, Any], crosstask: dict[str, Any], layer: int, seed: int,
                   compute: dict[str, Any], output_folders: list[str]
                   ) -> tuple[ExternalSettings, ScoringSettings, ComputeSettings]:
    """The first node: the `evaluate_external` block, the scoring protocol (a fold's, capped at the file's
    `max_examples`) and the compute settings, parsed once every output folder can be written (`external_outputs`),
    so that a bad setting or a read-only or full data/ stops the run before any work."""
    settings = external_settings(evaluate_external)
    parsed = compute_settings(compute)
    scoring = scoring_settings(crosstask, layer, seed, parsed)
    external.check_writable(output_folders)
    return settings, external.capped(scoring, settings), parsed


def check_fold(classifier: TrainedClassifier, bundle: Bundle, budget: dict[str, Any], settings: ExternalSettings
               ) -> tuple[TrainedClassifier, dict[str, LearnedModel], dict[str, Any]]:
    """The chosen classifier, the chosen fold's learned explainers and its budget, once they fit together; the
    classifier is passed on by reference, so it is loaded once."""
    learned, budget = external.check_fold(classifier, bundle, budget, settings)
    return classifier, learned, budget


def predict_external(examples: pd.DataFrame, classifier: TrainedClassifier, max_length: int,
                     settings: ExternalSettings, scoring: ScoringSettings, compute: ComputeSettings
                     ) -> tuple[pd.DataFrame, dict[str, float]]:
    """The examples to score (a rationale token left after truncation, the seeded `max_examples` cap), predicted,
    and the file's example counts (the one node that reads the file)."""
    return external.predict(examples, classifier, max_length, settings, scoring, compute), \
        external.file_counts(examples)


def explain_external(classifier: TrainedClassifier, predictions: pd.DataFrame, learned: dict[str, LearnedModel],
                     scoring: ScoringSettings, compute: ComputeSettings
                     ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """ExpNet+, the paper's ExpNet and every baseline on the scored examples, exactly as a fold explains its
    held-out set (the expensive methods on the seeded sample): token scores, failures, cost."""
    return protocol.explain_rationale_set(classifier, predictions, learned, scoring, compute)


def explain_external_gold(classifier: TrainedClassifier, predictions: pd.DataFrame, learned: dict[str, LearnedModel],
                          token_scores: pd.DataFrame, scoring: ScoringSettings, compute: ComputeSettings
                          ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Gold mode: the examples the classifier mispredicted explained again for the class the file gives them, by
    every class-aware method; none when the file gives no class (predicted mode only, and the log says so)."""
    return external.explain_gold(classifier, predictions, learned, token_scores, scoring, compute)


def external_faithfulness(classifier: TrainedClassifier, token_scores: pd.DataFrame, predictions: pd.DataFrame,
                          scoring: ScoringSettings, compute: ComputeSettings) -> pd.DataFrame:
    """ERASER comprehensiveness and sufficiency (AOPC) of every method on the seeded sample."""
    return protocol.sample_faithfulness(classifier, token_scores, predictions, scoring, compute)


def score_external(token_scores: pd.DataFrame, gold_scores: pd.DataFrame, predictions: pd.DataFrame,
                   faithfulness: pd.DataFrame, budget: dict[str, Any], learned: dict[str, LearnedModel],
                   scoring: ScoringSettings, settings: ExternalSettings) -> pd.DataFrame:
    """The fold metrics table of the file in both modes (predicted only when the file gives no class), with the
    classifier's task and the file as columns."""
    return external.metrics_table(token_scores, gold_scores, predictions, faithfulness, budget, learned[EXPNET_PLUS],
                                  scoring, settings)


def metrics_partition(metrics: pd.DataFrame, settings: ExternalSettings) -> dict[str, pd.DataFrame]:
    """One CSV per (file, classifier task, fold), so evaluations of other files or folds are kept."""
    return {settings.partition: metrics}


def run_counts(file_counts: dict[str, float], predictions: pd.DataFrame, failures: pd.DataFrame,
               budget: dict[str, Any]) -> dict[str, float]:
    """The run's numbers beside its metrics (budget, example counts, the classifier's accuracy), for MLflow."""
    return external.run_counts(file_counts, predictions, failures, budget)


def plot_metrics(metrics: pd.DataFrame, settings: ExternalSettings) -> matplotlib.figure.Figure:
    """Bar chart of F1 and AUROC per method with intervals and floors (predicted mode), for MLflow."""
    return charts.metrics_bar_chart(protocol.mode_rows(metrics), settings.title)
