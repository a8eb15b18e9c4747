"""classifiers: one fine-tuned classifier per task (one template, one namespace per task)."""
from typing import Sequence

from kedro.pipeline import Pipeline, node, pipeline

from .nodes import attention_features, combine_classifier_metrics, explainer_signals, predict_examples, train_classifier
from learned_attribution.core.tasks import TASKS


def task_template() -> Pipeline:
    return pipeline([
        node(train_classifier, ["tokenized", "params:encoder", "params:classifier", "params:seed", "params:compute"],
             ["classifier", "training_history"], name="train_classifier"),
        node(predict_examples, ["classifier", "tokenized", "params:classifier", "params:compute"],
             ["rationale_predictions", "classifier_metrics"], name="predict_examples"),
        node(explainer_signals, ["classifier", "rationale_predictions", "params:features", "params:compute"],
             "explainer_signals", name="extract_explainer_signals"),
        node(attention_features, ["explainer_signals", "classifier", "rationale_predictions", "params:encoder",
                                  "params:features", "params:compute"],
             "attention_features", name="extract_attention_features"),
    ])


def create_pipeline(tasks: Sequence[str] = TASKS, **kwargs) -> Pipeline:
    """The task template once per task of `tasks` (namespace `<task>`, parameters `classifiers.<task>`), then
    the classifier metrics of them all."""
    per_task = [
        pipeline(task_template(), namespace=task, inputs={"tokenized": f"tokenized_{task}"},
                 parameters={"classifier": f"classifiers.{task}", "encoder": "encoder", "features": "features",
                             "seed": "seed", "compute": "compute"})
        for task in tasks
    ]
    combine = node(combine_classifier_metrics, [f"{task}.classifier_metrics" for task in tasks],
                   "classifier_metrics", name="combine_classifier_metrics")
    return pipeline([*per_task, combine])
