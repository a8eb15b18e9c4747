"""fewshot: how many annotated examples of its own task a fold's ExpNet+ needs to be the better choice. Reads the
folds' outputs (run `kedro run --pipeline crosstask` first), and keeps each fold's choice per k in the fold's folder
(`heldout_<task>/fewshot/`), where `learned-attribution fit --rationales` reads it:

    kedro run --pipeline fewshot
"""
from typing import Sequence

from kedro.pipeline import Pipeline, node, pipeline

from learned_attribution.core.tasks import FOLD_PREFIX, TASKS
from learned_attribution.pipelines import bind
from learned_attribution.services.reporting.fewshot import fewshot_report

from .nodes import choose_refits, fewshot_choice, fewshot_curve, fewshot_settings, fit_priors

PARAMETERS = {"crosstask", "expnet_plus_variants", "fewshot", "explained_layer", "seed", "compute"}


def create_pipeline(tasks: Sequence[str] = TASKS, **kwargs) -> Pipeline:
    # Namespaced fewshot_<task>, not heldout_<task>: these nodes add a report to a fold and are no fold run.
    folds = []
    for task in tasks:
        training = [t for t in tasks if t != task]
        bundle, signals = f"{FOLD_PREFIX}{task}.bundle", f"{task}.explainer_signals"
        predictions, metrics = f"{task}.rationale_predictions", f"{FOLD_PREFIX}{task}.fold_metrics"
        gold, gold_metrics = f"{task}.gold_signals", f"{FOLD_PREFIX}{task}.gold_metrics"
        classifier = f"{task}.classifier"  # the held-out classifier: the `suggested` rows' representations
        train_signals = [name for t in training for name in (f"{t}.explainer_signals", f"{t}.gold_signals")]
        folds.append(pipeline(
            [node(fewshot_settings, ["params:crosstask", "params:expnet_plus_variants", "params:fewshot",
                                     "params:explained_layer", "params:seed", "params:compute"],
                  ["scoring", "settings", "training", "train_on", "compute_settings"], name="parse_settings"),
             node(bind(choose_refits, fold=f"{FOLD_PREFIX}{task}"),
                  [bundle, "settings", "training", "train_on", "compute_settings", *train_signals],
                  ["refits", "prior_choice"], name="choose_refits"),
             node(fit_priors, [bundle, "refits", signals, "settings", "training", "train_on", "compute_settings",
                               *train_signals], "priors", name="fit_priors"),
             node(bind(fewshot_choice, fold=f"{FOLD_PREFIX}{task}"), ["refits", "priors"], "choice",
                  name="store_choice"),
             node(bind(fewshot_curve, fold=f"{FOLD_PREFIX}{task}"),
                  ["priors", signals, gold, predictions, metrics, gold_metrics, bundle, "scoring", "settings",
                   "refits", classifier, "compute_settings"], "curve", name="fewshot_curve")],
            namespace=f"fewshot_{task}",
            inputs={bundle, signals, gold, predictions, metrics, gold_metrics, classifier, *train_signals},
            parameters=PARAMETERS))
    # the folds' curves, then their prior choices, in the same fold order
    report = node(fewshot_report, [*(f"fewshot_{task}.curve" for task in tasks),
                                   *(f"fewshot_{task}.prior_choice" for task in tasks)],
                  ["fewshot_curves", "fewshot_summary", "fewshot_priors", "fewshot_page", "fewshot_plot"],
                  name="fewshot_report")
    return pipeline([*folds, report])
