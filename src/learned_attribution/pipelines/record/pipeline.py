"""record: every baseline on every example of every fold, in parts committed to the record (docs/record/baselines:
per-example metric rows, not token scores), and the baselines table of what the record holds.

    kedro run --pipeline record     # after the main job; 55 minutes an invocation (baseline_record.minutes):
                                    # run it again until it ends, committing docs/record between invocations
"""
from typing import Sequence

from kedro.pipeline import Pipeline, node, pipeline

from learned_attribution.core.tasks import FOLD_PREFIX, TASKS
from learned_attribution.pipelines import bind

from .nodes import record_baselines, record_report, record_run_settings

RECORD_PREFIX = "record_"
SETTINGS = ["record_settings", "record_scoring", "record_compute", "record_deadline"]


def create_pipeline(tasks: Sequence[str] = TASKS, **kwargs) -> Pipeline:
    """The settings (and the record's lock), one namespace per fold, then the table."""
    settings = node(record_run_settings, ["params:baseline_record", "params:crosstask", "params:explained_layer",
                                          "params:seed", "params:compute", "record_parts"], SETTINGS,
                    name="record_settings")
    folds = [
        pipeline([node(bind(record_baselines, task=task),
                       ["classifier", "predictions", "budget", "token_scores", "gold_token_scores", "record_parts",
                        *SETTINGS], "progress", name="record_baselines")],
                 namespace=f"{RECORD_PREFIX}{task}",
                 inputs={"classifier": f"{task}.classifier", "predictions": f"{task}.rationale_predictions",
                         "budget": f"{FOLD_PREFIX}{task}.budget", "token_scores": f"{FOLD_PREFIX}{task}.token_scores",
                         "gold_token_scores": f"{FOLD_PREFIX}{task}.gold_token_scores",
                         "record_parts": "record_parts", **{s: s for s in SETTINGS}})
        for task in tasks
    ]
    report = node(record_report, ["record_parts", "record_scoring",
                                  *(f"{RECORD_PREFIX}{task}.progress" for task in tasks)],
                  ["record_baselines_table", "record_baselines_page"], name="record_report")
    return pipeline([settings, *folds, report])
