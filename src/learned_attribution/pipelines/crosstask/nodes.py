"""Nodes of one cross-task fold (SPEC §6-9): train the paper's ExpNet and ExpNet+ on the training tasks, explain and
score the held-out one. The work is in `services/evaluation` (folds, protocol, cost) and `services/reporting`."""
from __future__ import annotations

import logging
from typing import Any

import matplotlib.figure
import pandas as pd

from learned_attribution.core.models.learned import LearnedModel
from learned_attribution.core.models.loading import TrainedClassifier
from learned_attribution.pipelines import Parts, token_table
from learned_attribution.services import bundle as bundles
from learned_attribution.services.config import (ComputeSettings, ExpnetPlusRecipes, ExpnetRecipe, ScoringSettings,
                                                 compute_settings, expnet_plus_recipes, expnet_recipe,
                                                 scoring_settings)
from learned_attribution.services.evaluation import cost, folds, protocol
from learned_attribution.services.reporting import charts, pages

logger = logging.getLogger(__name__)

def fold_settings(crosstask: dict[str, Any], variants: dict[str, Any], layer: int, seed: int,
                  compute: dict[str, Any]) -> tuple[ScoringSettings, ExpnetRecipe, ExpnetPlusRecipes, ComputeSettings]:
    """The fold's parameter blocks, parsed once before any work: the scoring protocol, the paper's ExpNet, the
    ExpNet+ candidates from the variant catalogue, and where the torch work runs."""
    parsed = compute_settings(compute)
    return (scoring_settings(crosstask, layer, seed, parsed), expnet_recipe(crosstask, seed),
            expnet_plus_recipes(crosstask, variants, seed), parsed)


def train_expnet(classifier: TrainedClassifier, recipe: ExpnetRecipe, layer: int, encoder: dict[str, Any],
                 max_length: int, compute: ComputeSettings, *training_features: Parts, fold: str
                 ) -> tuple[LearnedModel, pd.DataFrame, dict[str, float]]:
    """The paper's ExpNet on the training tasks' attention features (one partition set per training task), with
    the fold's budget (`folds.train_paper_expnet`)."""
    return folds.train_paper_expnet([token_table(parts) for parts in training_features], recipe, classifier,
                                    fold=fold, layer=layer, encoder=encoder["name_or_path"], max_length=max_length,
                                    device=compute.device)


def select_expnet_plus(budget: dict[str, float], recipes: ExpnetPlusRecipes, compute: ComputeSettings,
                       *training_signals: Parts) -> pd.DataFrame:
    """Leave-one-training-task-out validation of every ExpNet+ candidate (the held-out task is not an input)."""
    return folds.select_expnet_plus([token_table(parts) for parts in training_signals], budget["rho"], recipes,
                                    compute.device)


def fit_expnet_plus(heldout_signals: Parts, classifier: TrainedClassifier, budget: dict[str, float],
                    recipes: ExpnetPlusRecipes, layer: int, encoder: dict[str, Any], max_length: int,
                    compute: ComputeSettings, *training_signals: Parts, fold: str) -> dict[str, LearnedModel]:
    """Every ExpNet+ candidate retrained on all the training tasks, for the held-out classifier (its signals
    unlabeled)."""
    return folds.fit_expnet_plus([token_table(parts) for parts in training_signals], token_table(heldout_signals),
                                 budget, recipes, classifier, fold=fold, layer=layer,
                                 encoder=encoder["name_or_path"], max_length=max_length, device=compute.device)


def chosen_expnet_plus(models: dict[str, LearnedModel], selection: pd.DataFrame) -> tuple[LearnedModel, LearnedModel]:
    """The selected variant and the best shape-free one beside it."""
    return folds.chosen_expnet_plus(models, selection)


def expnet_plus_ablation(models: dict[str, LearnedModel], selection: pd.DataFrame, heldout_signals: Parts,
                         predictions: pd.DataFrame, fold_metrics: pd.DataFrame, budget: dict[str, float],
                         scoring: ScoringSettings, *, fold: str) -> pd.DataFrame:
    """Every variant on the held-out rationale test set beside the best baseline and the floors."""
    return folds.ablation_table(models, selection, token_table(heldout_signals),
                                protocol.scored_examples(predictions, scoring), fold_metrics, budget["rho"], scoring,
                                fold=fold)


def explain_heldout(classifier: TrainedClassifier, predictions: pd.DataFrame, expnet: LearnedModel,
                    expnet_plus: LearnedModel, scoring: ScoringSettings, compute: ComputeSettings
                    ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """ExpNet+, the paper's ExpNet and every baseline on the held-out rationale test set, explaining the held-out
    task's own classifier (never trained on these sentences): token scores, failures, cost."""
    return protocol.explain_rationale_set(classifier, predictions, {"expnet_plus": expnet_plus, "expnet_paper": expnet},
                                          scoring, compute)


def fold_faithfulness(classifier: TrainedClassifier, token_scores: pd.DataFrame, predictions: pd.DataFrame,
                      scoring: ScoringSettings, compute: ComputeSettings) -> pd.DataFrame:
    """ERASER comprehensiveness and sufficiency (AOPC) of every method on the seeded sample."""
    return protocol.sample_faithfulness(classifier, token_scores, predictions, scoring, compute)


def score_fold(token_scores: pd.DataFrame, predictions: pd.DataFrame, faithfulness: pd.DataFrame,
               budget: dict[str, float], expnet_plus: LearnedModel, scoring: ScoringSettings, *, fold: str,
               held_out_task: str) -> pd.DataFrame:
    """The fold's metrics table: every method under its own rule and the matched budget, on every subset."""
    return protocol.score_rationale_set(token_scores, predictions, faithfulness, budget["rho"],
                                        protocol.learned_thresholds(budget, expnet_plus), scoring, fold=fold,
                                        held_out_task=held_out_task)


def plot_fold(metrics: pd.DataFrame, *, fold: str) -> matplotlib.figure.Figure:
    """Bar chart (PNG) of F1 and AUROC per method with intervals and floors."""
    return charts.metrics_bar_chart(metrics, f"{fold}: explainers of the held-out classifier (all rationale test "
                                             "examples)")


def time_expnet_plus_variants(classifier: TrainedClassifier, predictions: pd.DataFrame,
                              models: dict[str, LearnedModel], scoring: ScoringSettings, n_examples: int,
                              compute: ComputeSettings) -> pd.DataFrame:
    """Throughput of every ExpNet+ variant as a ratio to a plain forward pass, on a seeded sample of the held-out
    rationale test examples."""
    return folds.variant_cost(classifier, predictions, models, scoring, n_examples, compute)


def plot_cost(fold_metrics: pd.DataFrame, explain_cost: pd.DataFrame, ablation: pd.DataFrame,
              variant_costs: pd.DataFrame, *, fold: str) -> matplotlib.figure.Figure:
    """Throughput against AUROC with its interval for every method and ExpNet+ variant, and the methods' Pareto
    frontier (PNG)."""
    points = cost.cost_plausibility(fold_metrics, explain_cost, ablation, variant_costs)
    logger.info("%s: Pareto frontier (cost vs AUROC): %s", fold, ", ".join(points.loc[points["pareto"], "method"]))
    return charts.cost_plausibility_chart(points, f"{fold}: cost vs plausibility of every method")


def heatmaps(token_scores: pd.DataFrame, predictions: pd.DataFrame, metrics: pd.DataFrame,
             classifier: TrainedClassifier, n_examples: int, seed: int, *, fold: str) -> str:
    """HTML token heatmaps of `n_examples` seeded test examples: gold, ExpNet+, the paper's ExpNet and the best
    baseline (AUROC)."""
    return pages.fold_heatmap_page(token_scores, predictions, protocol.best_baseline(metrics), classifier.tokenizer,
                                   n_examples, seed, fold)


def fold_bundle(fold_metrics: pd.DataFrame, budget: dict[str, float], scoring: ScoringSettings,
                expnet: LearnedModel, expnet_plus: LearnedModel, shape_free: LearnedModel, *,
                fold: str) -> bundles.Bundle:
    """The fold's folder: its learned explainers and its card (the best baseline, by AUROC among the methods run on
    every example, with every baseline's settings, the matched budget rho and the layer read)."""
    ranked = protocol.matched_baselines(fold_metrics)
    card = bundles.fold_card(fold=fold, best_baseline=protocol.best_baseline(fold_metrics) or "saliency",
                             best_baseline_auroc=float(ranked["auroc"].max()) if len(ranked) else None,
                             baselines=scoring.baselines, rho=budget["rho"], layer=scoring.layer)
    return bundles.Bundle(card, {"expnet_plus": expnet_plus, "expnet_paper": expnet}, shape_free)


def combine_folds(*fold_metrics: pd.DataFrame) -> pd.DataFrame:
    """All folds' metrics in one table: data/08_reporting/crosstask_metrics.csv."""
    return pd.concat(fold_metrics, ignore_index=True)
