"""Nodes of the fewshot pipeline: each fold's ExpNet+ refit on k annotated examples of its held-out task, with a
prior and schedule chosen on the fold's training tasks, and scored on the fold's held-out rationale test set
(`services/fewshot/`: the choice, the curve)."""
from __future__ import annotations

from typing import Any

import pandas as pd

from learned_attribution.core.models.learned import LearnedModel, TrainingSettings
from learned_attribution.core.models.learned.fewshot import FewShotChoice
from learned_attribution.core.models.loading import TrainedClassifier
from learned_attribution.core.explainers.learned import EXPNET_PLUS
from learned_attribution.core.data.modes import TrainingExamples
from learned_attribution.pipelines import Parts, tables_in_mode, token_table
from learned_attribution.services import bundle as bundles
from learned_attribution.services.config import (ComputeSettings, FewShotCurveSettings, ScoringSettings,
                                                 compute_settings, folds_expnet_plus, fewshot_settings as parse_fewshot,
                                                 scoring_settings)
from learned_attribution.services.fewshot import choice, curve
from learned_attribution.services.fewshot.choice import Refit

def fewshot_settings(crosstask: dict[str, Any], variants: dict[str, Any], values: dict[str, Any], layer: int,
                     seed: int, compute: dict[str, Any]
                     ) -> tuple[ScoringSettings, FewShotCurveSettings, TrainingSettings, TrainingExamples,
                                ComputeSettings]:
    """The folds' scoring protocol, the `fewshot` block (ks, draws, candidate priors from the variant catalogue, the
    refit's schedule), the folds' ExpNet+ training loop and what it trains on (for the priors) and where the torch
    work runs, parsed before any work."""
    parsed = compute_settings(compute)
    recipe = folds_expnet_plus(crosstask, variants, seed)
    return (scoring_settings(crosstask, layer, seed, parsed), parse_fewshot(values, seed, variants), recipe.training,
            recipe.train_on, parsed)


def choose_refits(fold_bundle: bundles.Bundle, settings: FewShotCurveSettings, training_settings: TrainingSettings,
                  train_on: TrainingExamples, compute: ComputeSettings, *training: Parts | pd.DataFrame, fold: str
                  ) -> tuple[dict[int, Refit], pd.DataFrame]:
    """The fold's prior for every k, chosen among the candidates on its training tasks (`training`: each one's signal
    parts, then its gold-class signals; the held-out task is not an input), and the table of every refit that chose
    it."""
    return choice.choose_refits(fold_bundle.learned[EXPNET_PLUS], tables_in_mode(training, train_on.signals),
                                float(fold_bundle.card["rho"]), settings, training_settings, compute.device,
                                fold=fold, examples=train_on.examples)


def fit_priors(fold_bundle: bundles.Bundle, refits: dict[int, Refit], heldout_signals: Parts,
               settings: FewShotCurveSettings, training_settings: TrainingSettings, train_on: TrainingExamples,
               compute: ComputeSettings, *training: Parts | pd.DataFrame) -> dict[str, LearnedModel]:
    """The fold's own ExpNet+ and every other chosen prior, fitted cross-task on the fold's training tasks (on what
    the main job's recipe trains on) for the held-out classifier (its signals unlabeled)."""
    return choice.fit_priors(fold_bundle.learned[EXPNET_PLUS], refits, tables_in_mode(training, train_on.signals),
                             token_table(heldout_signals), float(fold_bundle.card["rho"]), settings,
                             training_settings, compute.device, examples=train_on.examples)


def fewshot_choice(refits: dict[int, Refit], priors: dict[str, LearnedModel], *, fold: str) -> FewShotChoice:
    """The fold's choice per k (prior, its variant, schedule) and the priors it names besides the fold's own, kept in
    the fold's folder for a user's refit (`fit --rationales`)."""
    return choice.stored_choice(refits, priors, fold=fold)


def fewshot_curve(priors: dict[str, LearnedModel], signals: Parts, gold_signals: pd.DataFrame,
                  predictions: pd.DataFrame, fold_metrics: pd.DataFrame, gold_metrics: pd.DataFrame,
                  fold_bundle: bundles.Bundle, scoring: ScoringSettings, settings: FewShotCurveSettings,
                  refits: dict[int, Refit], classifier: TrainedClassifier, compute: ComputeSettings, *,
                  fold: str) -> pd.DataFrame:
    """Each k's prior refit on k annotated held-out examples (signals of the class each rationale supports) for every
    k and draw (with that k's schedule), and on the k examples the suggestion rule picks with the held-out classifier
    (services/fewshot/suggest.py), scored on the held-out rationale test set in both modes beside the best baseline
    and saliency."""
    compute.place(classifier.model)
    return curve.curve(priors, token_table(signals), gold_signals, predictions, fold_metrics, gold_metrics,
                       float(fold_bundle.card["rho"]), scoring, settings, refits, fold=fold, classifier=classifier)
