"""transfer: every fold's shape-free ExpNet+ trained on another encoder's classifiers (the folds under
`globals.transfer_source`, e.g. the default MiniLM run's for `--env base_size`, and the base-size run's for the
default environment) applied to this run's held-out classifiers:

    kedro run --pipeline transfer --env base_size   # MiniLM-trained folds on the MPNet classifiers
    kedro run --pipeline transfer                   # MPNet-trained folds on the MiniLM classifiers

Both runs must have finished their folds first (this run's fold metrics are the reference rows)."""
from typing import Sequence

from kedro.pipeline import Pipeline, node, pipeline

from learned_attribution.core.tasks import FOLD_PREFIX, TASKS
from learned_attribution.pipelines import bind
from learned_attribution.services.reporting.crosstask import transfer_report

from .nodes import transfer_fold, transfer_settings


def create_pipeline(tasks: Sequence[str] = TASKS, **kwargs) -> Pipeline:
    # Namespaced transfer_<task>, not heldout_<task>: these nodes train nothing and are no fold run in MLflow.
    folds = [
        pipeline([node(transfer_settings, ["params:crosstask", "params:explained_layer", "params:seed"], "scoring",
                       name="parse_scoring"),
                  node(bind(transfer_fold, fold=f"{FOLD_PREFIX}{task}"),
                       ["source", f"{task}.explainer_signals", f"{task}.rationale_predictions", f"{task}.classifier",
                        f"{FOLD_PREFIX}{task}.fold_metrics", "scoring"], "metrics", name="transfer_fold")],
                 namespace=f"transfer_{task}",
                 inputs={f"{task}.explainer_signals", f"{task}.rationale_predictions", f"{task}.classifier",
                         f"{FOLD_PREFIX}{task}.fold_metrics"},
                 parameters={"crosstask", "explained_layer", "seed"})
        for task in tasks
    ]
    report = node(transfer_report, [f"transfer_{task}.metrics" for task in tasks],
                  ["transfer_metrics", "transfer_page"], name="transfer_report")
    return pipeline([*folds, report])
