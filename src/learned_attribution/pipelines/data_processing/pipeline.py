"""data_processing: every registered task's raw files -> one token-level rationale schema and a data report."""
from typing import Sequence

from kedro.pipeline import Pipeline, node, pipeline

from learned_attribution.core.tasks import TASK_REGISTRY, Task
from learned_attribution.pipelines import bind

from .nodes import build_data_report, read_task, tokenize_examples


def create_pipeline(tasks: Sequence[Task] = TASK_REGISTRY, **kwargs) -> Pipeline:
    """One reader node (`read_<task>`) and one tokenizer node (`tokenize_<task>`) per task of `tasks` (the
    registry in `core/tasks.py`), then the data report over them all."""
    loaders = [
        node(bind(read_task, loader=task.loader, task=task.name),
             [*task.raw_inputs, f"params:data_processing.{task.name}", "params:data_processing.strict"],
             [f"examples_{task.name}", f"skipped_{task.name}"], name=f"read_{task.name}")
        for task in tasks
    ]
    projections = [
        node(tokenize_examples,
             [f"examples_{task.name}", "params:encoder", "params:max_length", "params:data_processing.max_per_role",
              "params:seed"],
             f"tokenized_{task.name}", name=f"tokenize_{task.name}")
        for task in tasks
    ]
    report = node(build_data_report, [f"tokenized_{t.name}" for t in tasks] + [f"skipped_{t.name}" for t in tasks],
                  "data_report", name="build_data_report")
    return pipeline([*loaders, *projections, report])
