"""crosstask: one fold per held-out task (train ExpNet on the others), plus the cross-fold report."""
from typing import Sequence

from kedro.pipeline import Pipeline, node, pipeline

from learned_attribution.pipelines import bind

from learned_attribution.core.tasks import FOLD_PREFIX, MIN_TASKS, TASK_REGISTRY, TASKS, Task
from learned_attribution.pipelines import classifiers, data_processing
from learned_attribution.services.reporting.crosstask import ablation_report, crosstask_summary

from .nodes import (chosen_expnet_plus, combine_folds, explain_heldout, expnet_plus_ablation, fit_expnet_plus,
                    fold_bundle, fold_faithfulness, fold_settings, heatmaps, plot_cost, plot_fold, score_fold,
                    select_expnet_plus, time_expnet_plus_variants, train_expnet)

SETTINGS = ["scoring", "expnet_recipe", "expnet_plus_recipes", "compute_settings"]
SHARED_PARAMETERS = ("crosstask", "expnet_plus_variants", "explained_layer", "seed", "compute", "encoder",
                     "max_length", "crosstask.n_heatmaps", "crosstask.variant_cost_examples")


def fold_template(held_out_task: str, training_tasks: Sequence[str]) -> Pipeline:
    """The fold pipeline; its free inputs are each training task's features and signals
    (`train_features_<task>`, `train_signals_<task>`) and the held-out task's signals, classifier and
    predictions, mapped onto the shared datasets when instantiated. Its first node parses its settings."""
    fold = f"{FOLD_PREFIX}{held_out_task}"
    train_features = [f"train_features_{task}" for task in training_tasks]
    train_signals = [f"train_signals_{task}" for task in training_tasks]
    model = ["params:explained_layer", "params:encoder", "params:max_length", "compute_settings"]
    return pipeline([
        node(fold_settings, ["params:crosstask", "params:expnet_plus_variants", "params:explained_layer",
                             "params:seed", "params:compute"], SETTINGS, name="parse_settings"),
        node(bind(train_expnet, fold=fold), ["classifier", "expnet_recipe", *model, *train_features],
             ["expnet", "expnet_history", "budget"], name="train_expnet"),
        node(select_expnet_plus, ["budget", "expnet_plus_recipes", "compute_settings", *train_signals],
             "expnet_plus_selection", name="select_expnet_plus"),
        node(bind(fit_expnet_plus, fold=fold),
             ["heldout_signals", "classifier", "budget", "expnet_plus_recipes", *model, *train_signals],
             "expnet_plus_trained", name="fit_expnet_plus"),
        node(chosen_expnet_plus, ["expnet_plus_trained", "expnet_plus_selection"],
             ["expnet_plus", "expnet_plus_shape_free"], name="chosen_expnet_plus"),
        node(bind(expnet_plus_ablation, fold=fold),
             ["expnet_plus_trained", "expnet_plus_selection", "heldout_signals", "predictions", "fold_metrics",
              "budget", "scoring"], "expnet_plus_ablation", name="expnet_plus_ablation"),
        node(explain_heldout, ["classifier", "predictions", "expnet", "expnet_plus", "scoring", "compute_settings"],
             ["token_scores", "explain_failures", "explain_cost"], name="explain_heldout"),
        node(fold_faithfulness, ["classifier", "token_scores", "predictions", "scoring", "compute_settings"],
             "faithfulness", name="faithfulness"),
        node(bind(score_fold, fold=fold, held_out_task=held_out_task),
             ["token_scores", "predictions", "faithfulness", "budget", "expnet_plus", "scoring"], "fold_metrics",
             name="score_fold"),
        node(bind(plot_fold, fold=fold), "fold_metrics", "metrics_plot", name="plot_fold"),
        node(time_expnet_plus_variants, ["classifier", "predictions", "expnet_plus_trained", "scoring",
                                         "params:crosstask.variant_cost_examples", "compute_settings"],
             "expnet_plus_cost", name="time_expnet_plus_variants"),
        node(bind(plot_cost, fold=fold), ["fold_metrics", "explain_cost", "expnet_plus_ablation", "expnet_plus_cost"],
             "cost_plot", name="plot_cost"),
        node(bind(fold_bundle, fold=fold),
             ["fold_metrics", "budget", "scoring", "expnet", "expnet_plus", "expnet_plus_shape_free"], "bundle",
             name="fold_bundle"),
        node(bind(heatmaps, fold=fold),
             ["token_scores", "predictions", "fold_metrics", "classifier", "params:crosstask.n_heatmaps",
              "params:seed"], "heatmaps", name="heatmaps"),
    ])


def create_folds(tasks: Sequence[str] = TASKS) -> Pipeline:
    """One fold per task of `tasks` (namespace `heldout_<task>`), trained on all the other tasks, then the
    cross-fold report. The protocol needs at least three tasks: ExpNet+ is selected by leaving one training
    task out, so a fold needs two training tasks at least."""
    if len(tasks) < MIN_TASKS or len(set(tasks)) != len(tasks):
        raise ValueError(f"the cross-task protocol needs at least {MIN_TASKS} distinct tasks, got {list(tasks)}")
    folds = []
    for task in tasks:
        training = [t for t in tasks if t != task]
        folds.append(pipeline(
            fold_template(task, training), namespace=f"{FOLD_PREFIX}{task}",
            inputs={**{f"train_features_{t}": f"{t}.attention_features" for t in training},
                    **{f"train_signals_{t}": f"{t}.explainer_signals" for t in training},
                    "heldout_signals": f"{task}.explainer_signals",
                    "classifier": f"{task}.classifier", "predictions": f"{task}.rationale_predictions"},
            parameters=set(SHARED_PARAMETERS)))
    report = pipeline([
        node(combine_folds, [f"{FOLD_PREFIX}{t}.fold_metrics" for t in tasks], "crosstask_metrics",
             name="combine_folds"),
        node(crosstask_summary, ["crosstask_metrics", "classifier_metrics", "expnet_plus_ablation"],
             "crosstask_summary", name="crosstask_summary"),
        node(ablation_report, [f"{FOLD_PREFIX}{t}.expnet_plus_ablation" for t in tasks],
             ["expnet_plus_ablation", "expnet_plus_ablation_page", "expnet_plus_ablation_plot"],
             name="expnet_plus_report"),
    ])
    return pipeline([*folds, report])


def create_pipeline(tasks: Sequence[Task] = TASK_REGISTRY, **kwargs) -> Pipeline:
    """The main job: data processing, one classifier and its features per task, then one fold per task."""
    names = [task.name for task in tasks]
    return data_processing.create_pipeline(tasks) + classifiers.create_pipeline(names) + create_folds(names)
