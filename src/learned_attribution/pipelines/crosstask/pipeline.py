"""crosstask: one fold per held-out task (train ExpNet on the other two), plus the cross-fold report."""
from functools import partial, update_wrapper

from kedro.pipeline import Pipeline, node, pipeline

from learned_attribution.pipelines import classifiers, data_processing

from .nodes import (chosen_expnet_plus, combine_folds, crosstask_summary, explain_heldout, expnet_plus_ablation,
                    expnet_plus_report, fit_expnet_plus, fold_card, fold_faithfulness, heatmaps, plot_cost, plot_fold,
                    score_fold, select_expnet_plus, time_expnet_plus_variants, train_fold_expnet)
from learned_attribution.tasks import TASKS



def _bind(function, **fixed):
    bound = partial(function, **fixed)
    update_wrapper(bound, function)
    return bound


def fold_template(held_out_task: str) -> Pipeline:
    """The fold pipeline; its free inputs are the two training tasks' features and the held-out task's
    classifier and predictions, mapped onto the shared datasets when instantiated."""
    fold = f"heldout_{held_out_task}"
    return pipeline([
        node(_bind(train_fold_expnet, fold=fold),
             ["train_features_a", "train_features_b", "classifier", "params:crosstask.expnet", "params:crosstask.layer",
              "params:encoder", "params:max_length", "params:seed", "params:compute"],
             ["expnet", "expnet_history", "budget"],
             name="train_expnet"),
        node(select_expnet_plus, ["train_signals_a", "train_signals_b", "budget", "params:crosstask.expnet_plus",
                                  "params:seed", "params:compute"], "expnet_plus_selection", name="select_expnet_plus"),
        node(_bind(fit_expnet_plus, fold=fold),
             ["train_signals_a", "train_signals_b", "heldout_signals", "classifier", "budget",
              "params:crosstask.expnet_plus", "params:crosstask.layer", "params:encoder", "params:max_length",
              "params:seed", "params:compute"], "expnet_plus_variants", name="fit_expnet_plus"),
        node(chosen_expnet_plus, ["expnet_plus_variants", "expnet_plus_selection"],
             ["expnet_plus", "expnet_plus_shape_free"], name="chosen_expnet_plus"),
        node(_bind(expnet_plus_ablation, fold=fold),
             ["expnet_plus_variants", "expnet_plus_selection", "heldout_signals", "predictions", "fold_metrics",
              "budget", "params:crosstask", "params:seed"], "expnet_plus_ablation", name="expnet_plus_ablation"),
        node(explain_heldout, ["classifier", "predictions", "expnet", "expnet_plus", "params:crosstask", "params:seed",
                                  "params:compute"],
             ["token_scores", "explain_failures", "explain_cost"], name="explain_heldout"),
        node(fold_faithfulness, ["classifier", "token_scores", "predictions", "params:crosstask.faithfulness",
                                   "params:compute"],
             "faithfulness", name="faithfulness"),
        node(_bind(score_fold, fold=fold, held_out_task=held_out_task),
             ["token_scores", "predictions", "faithfulness", "budget", "expnet_plus", "params:crosstask", "params:seed"],
             "fold_metrics", name="score_fold"),
        node(_bind(plot_fold, fold=fold), "fold_metrics", "metrics_plot", name="plot_fold"),
        node(time_expnet_plus_variants, ["classifier", "predictions", "expnet_plus_variants", "params:crosstask",
                                         "params:seed", "params:compute"], "expnet_plus_cost",
             name="time_expnet_plus_variants"),
        node(_bind(plot_cost, fold=fold), ["fold_metrics", "explain_cost", "expnet_plus_ablation", "expnet_plus_cost"],
             "cost_plot", name="plot_cost"),
        node(_bind(fold_card, fold=fold),
             ["fold_metrics", "budget", "params:crosstask.baselines", "params:crosstask.layer"], "fold_card",
             name="fold_card"),
        node(_bind(heatmaps, fold=fold),
             ["token_scores", "predictions", "fold_metrics", "classifier", "params:crosstask.n_heatmaps",
              "params:seed"], "heatmaps", name="heatmaps"),
    ])


def create_folds() -> Pipeline:
    folds = []
    for task in TASKS:
        train_a, train_b = (t for t in TASKS if t != task)
        folds.append(pipeline(
            fold_template(task), namespace=f"heldout_{task}",
            inputs={"train_features_a": f"{train_a}.attention_features",
                    "train_features_b": f"{train_b}.attention_features",
                    "train_signals_a": f"{train_a}.explainer_signals",
                    "train_signals_b": f"{train_b}.explainer_signals",
                    "heldout_signals": f"{task}.explainer_signals",
                    "classifier": f"{task}.classifier", "predictions": f"{task}.rationale_predictions"},
            parameters={"crosstask": "crosstask", "seed": "seed", "compute": "compute", "encoder": "encoder", "max_length": "max_length",
                        **{f"crosstask.{key}": f"crosstask.{key}"
                           for key in ("n_heatmaps", "expnet", "expnet_plus", "layer", "faithfulness", "baselines")}}))
    report = pipeline([
        node(combine_folds, [f"heldout_{t}.fold_metrics" for t in TASKS], "crosstask_metrics", name="combine_folds"),
        node(crosstask_summary, ["crosstask_metrics", "classifier_metrics", "expnet_plus_ablation"], "crosstask_summary",
             name="crosstask_summary"),
        node(expnet_plus_report, [f"heldout_{t}.expnet_plus_ablation" for t in TASKS],
             ["expnet_plus_ablation", "expnet_plus_ablation_page", "expnet_plus_ablation_plot"],
             name="expnet_plus_report"),
    ])
    return pipeline([*folds, report])


def create_pipeline(**kwargs) -> Pipeline:
    """The main job: data processing, the three classifiers and features, then the three folds."""
    return data_processing.create_pipeline() + classifiers.create_pipeline() + create_folds()
