"""Nodes of one cross-task fold (SPEC §6-9): train the paper's ExpNet and ExpNet+ (one recipe and its shape-free
variant) on the training tasks, explain and score the held-out one. The work is in `services/evaluation` (folds,
protocol, cost) and `services/reporting`."""
from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import matplotlib.figure
import pandas as pd

from learned_attribution.core.data.modes import GOLD
from learned_attribution.core.models.learned import LearnedModel
from learned_attribution.core.models.loading import TrainedClassifier
from learned_attribution.core.explainers.learned import EXPNET_PLUS, PAPER_EXPNET
from learned_attribution.pipelines import Parts, tables_in_mode, token_table
from learned_attribution.services import bundle as bundles
from learned_attribution.services import fold_training
from learned_attribution.services.config import (ComputeSettings, ExpnetPlusRecipe, ExpnetRecipe, ScoringSettings,
                                                 check_crosstask, compute_settings, encoder_name, expnet_plus_recipe,
                                                 expnet_recipe, scoring_settings)
from learned_attribution.services.evaluation import cost, protocol
from learned_attribution.services.reporting import charts, pages

logger = logging.getLogger(__name__)

def check_settings(crosstask: dict[str, Any]) -> None:
    """`params:crosstask` has no unknown or missing key (the fold's parsers read it key by key, so that a change to
    one setting fingerprints only the outputs that read it: adapters/hooks/fingerprints.py)."""
    check_crosstask(crosstask)


def parse_compute(compute: dict[str, Any]) -> ComputeSettings:
    """Where the fold's torch work runs (`params:compute`)."""
    return compute_settings(compute)


def parse_scoring(baselines: dict[str, Any], expensive: list[str], expensive_sample_size: int,
                  max_test_examples: int | None, batch_size: int, bootstrap: dict[str, Any],
                  faithfulness: dict[str, Any], layer: int, seed: int, compute: ComputeSettings) -> ScoringSettings:
    """The scoring protocol from the scoring keys of `params:crosstask`, the explained layer and the seed."""
    return scoring_settings({"baselines": baselines, "expensive": expensive,
                             "expensive_sample_size": expensive_sample_size, "max_test_examples": max_test_examples,
                             "batch_size": batch_size, "bootstrap": bootstrap, "faithfulness": faithfulness},
                            layer, seed, compute)


def parse_expnet(expnet: dict[str, Any], seed: int) -> ExpnetRecipe:
    """The paper's ExpNet (`params:crosstask.expnet`)."""
    return expnet_recipe(expnet, seed)


def parse_expnet_plus(expnet_plus: dict[str, Any], variants: dict[str, Any], seed: int) -> ExpnetPlusRecipe:
    """ExpNet+'s recipe and its shape-free variant (`params:crosstask.expnet_plus`) from the variant catalogue."""
    return expnet_plus_recipe(expnet_plus, variants, seed)


def train_expnet(classifier: TrainedClassifier, recipe: ExpnetRecipe, layer: int, encoder: dict[str, Any],
                 max_length: int, compute: ComputeSettings, *training_features: Parts, fold: str
                 ) -> tuple[LearnedModel, pd.DataFrame, dict[str, float]]:
    """The paper's ExpNet on the training tasks' attention features (one partition set per training task), with
    the fold's budget (`fold_training.train_paper_expnet`)."""
    return fold_training.train_paper_expnet([token_table(parts) for parts in training_features], recipe, classifier,
                                    fold=fold, layer=layer, encoder=encoder_name(encoder), max_length=max_length,
                                    device=compute.device)


def fit_expnet_plus(heldout_signals: Parts, classifier: TrainedClassifier, budget: dict[str, float],
                    recipe: ExpnetPlusRecipe, layer: int, encoder: dict[str, Any], max_length: int,
                    compute: ComputeSettings, *training: Parts | pd.DataFrame, fold: str
                    ) -> tuple[LearnedModel, LearnedModel]:
    """ExpNet+'s recipe and its shape-free variant trained on all the training tasks (`training`: each one's signal
    parts, then its gold-class signals; the recipe's `train_on` says which examples and which class's signals), for
    the held-out classifier (its signals, of the predicted class, unlabeled)."""
    models = fold_training.fit_expnet_plus(tables_in_mode(training, recipe.train_on.signals),
                                           token_table(heldout_signals), budget, recipe.variants, recipe.training,
                                           classifier, fold=fold, layer=layer, encoder=encoder_name(encoder),
                                           max_length=max_length, device=compute.device,
                                           examples=recipe.train_on.examples)
    return models[recipe.variant.name], models[recipe.shape_free.name]


def explain_baselines(classifier: TrainedClassifier, predictions: pd.DataFrame, scoring: ScoringSettings,
                      compute: ComputeSettings) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Every baseline on the held-out rationale test set, explaining the held-out task's own classifier (never trained
    on these sentences): token scores, failures, cost. A node of its own: no learned-explainer setting reruns it."""
    return protocol.explain_rationale_set(classifier, predictions, {}, scoring, compute)


def explain_heldout(classifier: TrainedClassifier, predictions: pd.DataFrame, heldout_signals: Parts,
                    expnet: LearnedModel, expnet_plus: LearnedModel, scoring: ScoringSettings, compute: ComputeSettings,
                    baseline_scores: pd.DataFrame, baseline_failures: pd.DataFrame, baseline_cost: pd.DataFrame
                    ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """ExpNet+ and the paper's ExpNet on the same examples, scored from the held-out task's signal rows (the pass the
    classifiers pipeline made once for every consumer; each is timed alone, its own pass included, on the seeded
    sample), beside the baselines' explanations: every method's token scores, failures and cost."""
    learned = protocol.explain_rationale_set(classifier, predictions,
                                             {EXPNET_PLUS: expnet_plus, PAPER_EXPNET: expnet},
                                             replace(scoring, baselines={}, expensive=()), replace(compute, dask=None),
                                             signals=token_table(heldout_signals))
    return protocol.combined_explanations(learned, (baseline_scores, baseline_failures, baseline_cost))


def explain_gold(classifier: TrainedClassifier, predictions: pd.DataFrame, gold_signals: pd.DataFrame,
                 expnet: LearnedModel, expnet_plus: LearnedModel, token_scores: pd.DataFrame, scoring: ScoringSettings,
                 compute: ComputeSettings) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Gold mode: the mispredicted examples explained again for the class their rationale supports by every
    class-aware method (ExpNet+ from the gold-class signals); every other row is predicted mode's."""
    return protocol.explain_gold_mode(classifier, predictions, {EXPNET_PLUS: expnet_plus, PAPER_EXPNET: expnet},
                                      scoring, compute, token_scores, gold_signals)


def fold_faithfulness(classifier: TrainedClassifier, token_scores: pd.DataFrame, predictions: pd.DataFrame,
                      scoring: ScoringSettings, compute: ComputeSettings) -> pd.DataFrame:
    """ERASER comprehensiveness and sufficiency (AOPC) of every method on the seeded sample."""
    return protocol.sample_faithfulness(classifier, token_scores, predictions, scoring, compute)


def score_fold(token_scores: pd.DataFrame, predictions: pd.DataFrame, faithfulness: pd.DataFrame,
               budget: dict[str, float], expnet_plus: LearnedModel, scoring: ScoringSettings, *, fold: str,
               held_out_task: str) -> pd.DataFrame:
    """The fold's metrics table in predicted mode: every method under its own rule and the matched budget, on every
    subset."""
    return protocol.score_rationale_set(token_scores, predictions, faithfulness, budget["rho"],
                                        protocol.learned_thresholds(budget, expnet_plus), scoring, fold=fold,
                                        held_out_task=held_out_task)


def score_gold(gold_scores: pd.DataFrame, predictions: pd.DataFrame, budget: dict[str, float],
               expnet_plus: LearnedModel, scoring: ScoringSettings, *, fold: str, held_out_task: str) -> pd.DataFrame:
    """The fold's metrics table in gold mode (each example explained for the class its rationale supports); the
    correct examples' rows equal predicted mode's."""
    return protocol.score_rationale_set(gold_scores, predictions, None, budget["rho"],
                                        protocol.learned_thresholds(budget, expnet_plus), scoring, fold=fold,
                                        held_out_task=held_out_task, mode=GOLD)


def plot_fold(metrics: pd.DataFrame, *, fold: str) -> matplotlib.figure.Figure:
    """Bar chart (PNG) of F1 and AUROC per method with intervals and floors."""
    return charts.metrics_bar_chart(metrics, f"{fold}: explainers of the held-out classifier (all rationale test "
                                             "examples)")


def plot_cost(fold_metrics: pd.DataFrame, explain_cost: pd.DataFrame, *, fold: str) -> matplotlib.figure.Figure:
    """Throughput against AUROC with its interval for every method, and their Pareto frontier (PNG)."""
    points = cost.cost_plausibility(fold_metrics, explain_cost)
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
    return bundles.Bundle(card, {EXPNET_PLUS: expnet_plus, PAPER_EXPNET: expnet}, shape_free)


def combine_folds(*fold_metrics: pd.DataFrame) -> pd.DataFrame:
    """All folds' metrics, both modes, in one table: data/08_reporting/crosstask_metrics.csv."""
    return pd.concat(fold_metrics, ignore_index=True)
