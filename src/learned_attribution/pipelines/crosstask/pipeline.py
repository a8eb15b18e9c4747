"""crosstask: one fold per held-out task (train ExpNet on the others), plus the cross-fold report."""
from typing import Sequence

from kedro.pipeline import Pipeline, node, pipeline

from learned_attribution.pipelines import bind

from learned_attribution.core.tasks import FOLD_PREFIX, MIN_TASKS, TASK_REGISTRY, TASKS, Task
from learned_attribution.pipelines import classifiers, data_processing
from learned_attribution.services.reporting.crosstask import crosstask_summary

from .nodes import (check_settings, combine_folds, explain_baselines, explain_gold, explain_heldout, fit_expnet_plus,
                    fold_bundle, fold_faithfulness, heatmaps, parse_compute, parse_expnet, parse_expnet_plus,
                    parse_scoring, plot_cost, plot_fold, score_fold, score_gold, train_expnet)

SCORING_PARAMETERS = [f"crosstask.{key}" for key in ("baselines", "expensive", "expensive_sample_size",
                                                     "max_test_examples", "batch_size", "bootstrap", "faithfulness")]
SHARED_PARAMETERS = ("crosstask", "expnet_plus_variants", "explained_layer", "seed", "compute", "encoder",
                     "max_length", "crosstask.n_heatmaps", "crosstask.expnet", "crosstask.expnet_plus",
                     *SCORING_PARAMETERS)


def fold_template(held_out_task: str, training_tasks: Sequence[str]) -> Pipeline:
    """The fold pipeline; its free inputs are each training task's features and signals
    (`train_features_<task>`, `train_signals_<task>`, `train_gold_<task>`: its gold-class signals) and the held-out task's signals, classifier and
    predictions and gold-class signals, mapped onto the shared datasets when instantiated. Its first nodes check and parse its settings,
    each parser reading only its own keys (a settings change then fingerprints only what reads it)."""
    fold = f"{FOLD_PREFIX}{held_out_task}"
    train_features = [f"train_features_{task}" for task in training_tasks]
    train_signals = [name for task in training_tasks for name in (f"train_signals_{task}", f"train_gold_{task}")]
    model = ["params:explained_layer", "params:encoder", "params:max_length", "compute_settings"]
    return pipeline([
        node(check_settings, "params:crosstask", None, name="check_settings"),
        node(parse_compute, "params:compute", "compute_settings", name="parse_compute"),
        node(parse_scoring, [*(f"params:{key}" for key in SCORING_PARAMETERS), "params:explained_layer", "params:seed",
                             "compute_settings"], "scoring", name="parse_scoring"),
        node(parse_expnet, ["params:crosstask.expnet", "params:seed"], "expnet_recipe", name="parse_expnet"),
        node(parse_expnet_plus, ["params:crosstask.expnet_plus", "params:expnet_plus_variants", "params:seed"],
             "expnet_plus_recipe", name="parse_expnet_plus"),
        node(bind(train_expnet, fold=fold), ["classifier", "expnet_recipe", *model, *train_features],
             ["expnet", "expnet_history", "budget"], name="train_expnet"),
        node(bind(fit_expnet_plus, fold=fold),
             ["heldout_signals", "classifier", "budget", "expnet_plus_recipe", *model, *train_signals],
             ["expnet_plus", "expnet_plus_shape_free"], name="fit_expnet_plus"),
        node(explain_baselines, ["classifier", "predictions", "scoring", "compute_settings"],
             ["baseline_scores", "baseline_failures", "baseline_cost"], name="explain_baselines"),
        node(explain_heldout, ["classifier", "predictions", "heldout_signals", "expnet", "expnet_plus", "scoring",
                               "compute_settings", "baseline_scores", "baseline_failures", "baseline_cost"],
             ["token_scores", "explain_failures", "explain_cost"], name="explain_heldout"),
        node(explain_gold, ["classifier", "predictions", "heldout_gold_signals", "expnet", "expnet_plus",
                            "token_scores", "scoring", "compute_settings"], ["gold_token_scores", "gold_explain_failures"],
             name="explain_gold"),
        node(fold_faithfulness, ["classifier", "token_scores", "predictions", "scoring", "compute_settings"],
             "faithfulness", name="faithfulness"),
        node(bind(score_fold, fold=fold, held_out_task=held_out_task),
             ["token_scores", "predictions", "faithfulness", "budget", "expnet_plus", "scoring"], "fold_metrics",
             name="score_fold"),
        node(bind(score_gold, fold=fold, held_out_task=held_out_task),
             ["gold_token_scores", "predictions", "budget", "expnet_plus", "scoring"], "gold_metrics",
             name="score_gold"),
        node(bind(plot_fold, fold=fold), "fold_metrics", "metrics_plot", name="plot_fold"),
        node(bind(plot_cost, fold=fold), ["fold_metrics", "explain_cost"], "cost_plot", name="plot_cost"),
        node(bind(fold_bundle, fold=fold),
             ["fold_metrics", "budget", "scoring", "expnet", "expnet_plus", "expnet_plus_shape_free"], "bundle",
             name="fold_bundle"),
        node(bind(heatmaps, fold=fold),
             ["token_scores", "predictions", "fold_metrics", "classifier", "params:crosstask.n_heatmaps",
              "params:seed"], "heatmaps", name="heatmaps"),
    ])


def create_folds(tasks: Sequence[str] = TASKS) -> Pipeline:
    """One fold per task of `tasks` (namespace `heldout_<task>`), trained on all the other tasks, then the
    cross-fold report. The protocol needs at least three tasks: the ablation validates ExpNet+'s candidates by
    leaving one training task out, so a fold needs two training tasks at least."""
    if len(tasks) < MIN_TASKS or len(set(tasks)) != len(tasks):
        raise ValueError(f"the cross-task protocol needs at least {MIN_TASKS} distinct tasks, got {list(tasks)}")
    folds = []
    for task in tasks:
        training = [t for t in tasks if t != task]
        folds.append(pipeline(
            fold_template(task, training), namespace=f"{FOLD_PREFIX}{task}",
            inputs={**{f"train_features_{t}": f"{t}.attention_features" for t in training},
                    **{f"train_signals_{t}": f"{t}.explainer_signals" for t in training},
                    **{f"train_gold_{t}": f"{t}.gold_signals" for t in training},
                    "heldout_signals": f"{task}.explainer_signals", "heldout_gold_signals": f"{task}.gold_signals",
                    "classifier": f"{task}.classifier", "predictions": f"{task}.rationale_predictions"},
            parameters=set(SHARED_PARAMETERS)))
    report = pipeline([
        node(combine_folds, [f"{FOLD_PREFIX}{t}.{table}" for t in tasks for table in ("fold_metrics", "gold_metrics")],
             "crosstask_metrics", name="combine_folds"),
        node(crosstask_summary, ["crosstask_metrics", "classifier_metrics",
                                 *(f"{FOLD_PREFIX}{t}.expnet_plus" for t in tasks)], "crosstask_summary",
             name="crosstask_summary"),
    ])
    return pipeline([*folds, report])


def create_pipeline(tasks: Sequence[Task] = TASK_REGISTRY, **kwargs) -> Pipeline:
    """The main job: data processing, one classifier and its features per task, then one fold per task."""
    names = [task.name for task in tasks]
    return data_processing.create_pipeline(tasks) + classifiers.create_pipeline(names) + create_folds(names)
