"""classifiers: one fine-tuned classifier per task (one template, one namespace per task)."""
from typing import Sequence

from kedro.pipeline import Pipeline, node, pipeline

from learned_attribution.core.tasks import TASKS
from learned_attribution.pipelines import bind

from .nodes import (attention_features, combine_classifier_metrics, explainer_signals, gold_signals,
                    predict_examples, task_settings, train_classifier)


def task_template(task: str) -> Pipeline:
    settings = bind(task_settings, task=task)
    return pipeline([
        node(settings, ["params:classifier", "params:features", "params:seed", "params:compute"],
             ["settings", "feature_settings", "compute_settings"], name="parse_settings"),
        node(train_classifier, ["tokenized", "params:encoder", "settings", "compute_settings"],
             ["classifier", "training_history"], name="train_classifier"),
        node(predict_examples, ["classifier", "tokenized", "settings", "compute_settings"],
             ["rationale_predictions", "classifier_metrics"], name="predict_examples"),
        node(explainer_signals, ["classifier", "rationale_predictions", "feature_settings", "params:explained_layer",
                                 "compute_settings"], "explainer_signals", name="extract_explainer_signals"),
        node(gold_signals, ["classifier", "rationale_predictions", "feature_settings", "params:explained_layer",
                            "compute_settings"], "gold_signals", name="extract_gold_signals"),
        node(attention_features, ["explainer_signals", "classifier", "rationale_predictions", "params:encoder",
                                  "feature_settings", "params:explained_layer", "compute_settings"],
             "attention_features", name="extract_attention_features"),
    ])


def create_pipeline(tasks: Sequence[str] = TASKS, **kwargs) -> Pipeline:
    """The task template once per task of `tasks` (namespace `<task>`, parameters `classifiers.<task>`), then
    the classifier metrics of them all."""
    per_task = [
        pipeline(task_template(task), namespace=task, inputs={"tokenized": f"tokenized_{task}"},
                 parameters={"classifier": f"classifiers.{task}", "encoder": "encoder", "features": "features",
                             "seed": "seed", "compute": "compute", "explained_layer": "explained_layer"})
        for task in tasks
    ]
    combine = node(combine_classifier_metrics, [f"{task}.classifier_metrics" for task in tasks],
                   "classifier_metrics", name="combine_classifier_metrics")
    return pipeline([*per_task, combine])
