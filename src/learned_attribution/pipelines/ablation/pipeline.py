"""ablation: per fold, every ExpNet+ candidate beside the main job's recipe, then the cross-fold ablation report.
Reads the main job's signals, predictions, budgets and fold metrics (run `kedro run --pipeline crosstask` first):

    kedro run --pipeline ablation
    kedro run --pipeline ablation --params ablation.candidates=all     # the whole variant catalogue
"""
from typing import Sequence

from kedro.pipeline import Pipeline, node, pipeline

from learned_attribution.core.tasks import ABLATION_PREFIX, FOLD_PREFIX, MIN_TASKS, TASKS
from learned_attribution.pipelines import bind
from learned_attribution.services.reporting.crosstask import ablation_report, training_grid_report

from .nodes import (ablation_settings, ablation_table, fit_candidates, plot_cost, select_expnet_plus,
                    time_candidates, training_grid)

PARAMETERS = {"ablation", "crosstask", "expnet_plus_variants", "explained_layer", "seed", "compute", "encoder",
              "max_length"}


def create_pipeline(tasks: Sequence[str] = TASKS, **kwargs) -> Pipeline:
    """One `ablation_<task>` namespace per fold (its nodes add a report to the fold `heldout_<task>` and are no fold
    run), then the report over all folds."""
    if len(tasks) < MIN_TASKS:
        raise ValueError(f"the ablation validates by leaving a training task out: it needs at least {MIN_TASKS} "
                         f"tasks, got {list(tasks)}")
    folds = []
    for task in tasks:
        fold = f"{FOLD_PREFIX}{task}"
        training = [t for t in tasks if t != task]
        train_signals = [name for t in training for name in (f"{t}.explainer_signals", f"{t}.gold_signals")]
        signals, gold, classifier = f"{task}.explainer_signals", f"{task}.gold_signals", f"{task}.classifier"
        predictions, budget, metrics, cost_table = (f"{task}.rationale_predictions", f"{fold}.budget",
                                                    f"{fold}.fold_metrics", f"{fold}.explain_cost")
        model = ["params:explained_layer", "params:encoder", "params:max_length", "compute_settings"]
        folds.append(pipeline(
            [node(ablation_settings, ["params:ablation", "params:crosstask", "params:expnet_plus_variants",
                                      "params:explained_layer", "params:seed", "params:compute"],
                  ["scoring", "candidates", "main_recipe", "train_on", "grid", "compute_settings"],
                  name="parse_settings"),
             node(select_expnet_plus, [budget, "candidates", "train_on", "compute_settings", *train_signals],
                  "expnet_plus_selection", name="select_expnet_plus"),
             node(bind(fit_candidates, fold=fold),
                  [signals, classifier, budget, "candidates", "train_on", *model, *train_signals],
                  "expnet_plus_trained", name="fit_candidates"),
             node(bind(training_grid, fold=fold),
                  [signals, gold, classifier, predictions, budget, "grid", "scoring", *model, *train_signals],
                  "training_grid", name="training_grid"),
             node(bind(ablation_table, fold=fold),
                  ["expnet_plus_trained", "expnet_plus_selection", signals, predictions, metrics, budget,
                   "main_recipe", "scoring"], "expnet_plus_ablation", name="ablation_table"),
             node(time_candidates, [classifier, predictions, "expnet_plus_trained", "candidates", "scoring",
                                    "compute_settings"], "expnet_plus_cost", name="time_candidates"),
             node(bind(plot_cost, fold=fold), [metrics, cost_table, "expnet_plus_ablation", "expnet_plus_cost"],
                  "cost_plot", name="plot_cost")],
            namespace=f"{ABLATION_PREFIX}{task}",
            inputs={signals, gold, classifier, predictions, budget, metrics, cost_table, *train_signals},
            parameters=PARAMETERS))
    report = node(ablation_report, [f"{ABLATION_PREFIX}{task}.expnet_plus_ablation" for task in tasks],
                  ["expnet_plus_ablation", "expnet_plus_ablation_page", "expnet_plus_ablation_plot"],
                  name="expnet_plus_report")
    grid = node(training_grid_report, [f"{ABLATION_PREFIX}{task}.training_grid" for task in tasks],
                ["expnet_plus_training_grid", "expnet_plus_training_grid_page"], name="training_grid_report")
    return pipeline([*folds, report, grid])
