"""Nodes of one fold's ExpNet+ ablation: the candidates validated by leaving one training task out, retrained on all
the training tasks, scored on the held-out rationale test set beside the main job's recipe, and timed. The work is in
`services/fold_training.py` and `services/evaluation/ablation.py`; the main job's signals, predictions, budget and
metrics are read, never recomputed."""
from __future__ import annotations

import logging
from typing import Any

import matplotlib.figure
import pandas as pd

from learned_attribution.core.models.learned import LearnedModel
from learned_attribution.core.models.loading import TrainedClassifier
from learned_attribution.core.data.modes import TrainingExamples
from learned_attribution.pipelines import Parts, tables_in_mode, token_table, training_pairs
from learned_attribution.services import fold_training
from learned_attribution.services.config import (ComputeSettings, ExpnetPlusCandidates, ScoringSettings,
                                                 TrainingGridSettings, compute_settings, encoder_name,
                                                 expnet_plus_candidates, folds_expnet_plus, scoring_settings,
                                                 training_grid_settings)
from learned_attribution.services.evaluation import ablation as ablation_scoring
from learned_attribution.services.evaluation import cost, protocol
from learned_attribution.services.evaluation import training_grid as grid_scoring
from learned_attribution.services.reporting import charts

logger = logging.getLogger(__name__)


def ablation_settings(ablation: dict[str, Any], crosstask: dict[str, Any], variants: dict[str, Any], layer: int,
                      seed: int, compute: dict[str, Any]
                      ) -> tuple[ScoringSettings, ExpnetPlusCandidates, str, TrainingExamples, TrainingGridSettings,
                                 ComputeSettings]:
    """The fold's scoring protocol, the candidates (`params:ablation`, recipes from the variant catalogue), the name
    of the main job's recipe and what it trains on, the training grid's recipes and where the torch work runs,
    parsed before any work."""
    parsed = compute_settings(compute)
    main = folds_expnet_plus(crosstask, variants, seed)
    return (scoring_settings(crosstask, layer, seed, parsed), expnet_plus_candidates(ablation, variants, seed),
            main.variant.name, main.train_on, training_grid_settings(ablation, crosstask, variants, seed), parsed)


def select_expnet_plus(budget: dict[str, float], candidates: ExpnetPlusCandidates, train_on: TrainingExamples,
                       compute: ComputeSettings, *training: Parts | pd.DataFrame) -> pd.DataFrame:
    """Leave-one-training-task-out validation of every candidate, trained on what the main job's recipe trains on
    (`training`: each training task's signal parts, then its gold-class signals; the held-out task is not an
    input)."""
    return fold_training.select_expnet_plus(tables_in_mode(training, train_on.signals), budget["rho"], candidates,
                                            compute.device, examples=train_on.examples)


def fit_candidates(heldout_signals: Parts, classifier: TrainedClassifier, budget: dict[str, float],
                   candidates: ExpnetPlusCandidates, train_on: TrainingExamples, layer: int, encoder: dict[str, Any],
                   max_length: int, compute: ComputeSettings, *training: Parts | pd.DataFrame,
                   fold: str) -> dict[str, LearnedModel]:
    """Every candidate retrained on all the training tasks (on what the main job's recipe trains on), for the
    held-out classifier (its signals unlabeled)."""
    return fold_training.fit_expnet_plus(tables_in_mode(training, train_on.signals), token_table(heldout_signals),
                                         budget, candidates.variants, candidates.training, classifier, fold=fold,
                                         layer=layer, encoder=encoder_name(encoder), max_length=max_length,
                                         device=compute.device, examples=train_on.examples)


def training_grid(heldout_signals: Parts, heldout_gold: pd.DataFrame, classifier: TrainedClassifier,
                  predictions: pd.DataFrame, budget: dict[str, float], grid: TrainingGridSettings,
                  scoring: ScoringSettings, layer: int, encoder: dict[str, Any], max_length: int,
                  compute: ComputeSettings, *training: Parts | pd.DataFrame, fold: str) -> pd.DataFrame:
    """The training grid ({correct, all} x {predicted, gold signals} x {signed, magnitude}): each cell validated by
    leaving one training task out (the choice), retrained on the training tasks, scored on the held-out test set in
    both modes."""
    return grid_scoring.training_grid(training_pairs(training), token_table(heldout_signals), heldout_gold,
                                      protocol.scored_examples(predictions, scoring), grid.recipes, grid.training,
                                      budget, classifier, scoring, compute.device, fold=fold, layer=layer,
                                      encoder=encoder_name(encoder), max_length=max_length)


def ablation_table(models: dict[str, LearnedModel], selection: pd.DataFrame, heldout_signals: Parts,
                   predictions: pd.DataFrame, fold_metrics: pd.DataFrame, budget: dict[str, float], main_recipe: str,
                   scoring: ScoringSettings, *, fold: str) -> pd.DataFrame:
    """Every candidate on the held-out rationale test set beside the main job's ExpNet+, the best baseline and the
    floors."""
    return ablation_scoring.ablation_table(models, selection, token_table(heldout_signals),
                                        protocol.scored_examples(predictions, scoring), fold_metrics, main_recipe,
                                        budget["rho"], scoring, fold=fold)


def time_candidates(classifier: TrainedClassifier, predictions: pd.DataFrame, models: dict[str, LearnedModel],
                    candidates: ExpnetPlusCandidates, scoring: ScoringSettings, compute: ComputeSettings
                    ) -> pd.DataFrame:
    """Throughput of every candidate as a ratio to a plain forward pass, on a seeded sample of the held-out rationale
    test examples."""
    return ablation_scoring.variant_cost(classifier, predictions, models, scoring, candidates.cost_examples, compute)


def plot_cost(fold_metrics: pd.DataFrame, explain_cost: pd.DataFrame, ablation: pd.DataFrame,
              variant_costs: pd.DataFrame, *, fold: str) -> matplotlib.figure.Figure:
    """The fold's cost chart (every method's throughput against its AUROC) with every candidate beside the methods
    (PNG)."""
    points = cost.cost_plausibility(fold_metrics, explain_cost, ablation, variant_costs)
    return charts.cost_plausibility_chart(points, f"{fold}: cost vs plausibility of every method and ExpNet+ "
                                                  "candidate")
