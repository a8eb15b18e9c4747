"""fewshot: how many annotated examples of its own task a fold's ExpNet+ needs to be the better choice. Reads the
folds' outputs (run `kedro run --pipeline crosstask` first):

    kedro run --pipeline fewshot
"""
from typing import Sequence

from kedro.pipeline import Pipeline, node, pipeline

from learned_attribution.core.tasks import FOLD_PREFIX, TASKS
from learned_attribution.pipelines import bind
from learned_attribution.services.reporting.fewshot import fewshot_report

from .nodes import fewshot_curve, fewshot_settings


def create_pipeline(tasks: Sequence[str] = TASKS, **kwargs) -> Pipeline:
    # Namespaced fewshot_<task>, not heldout_<task>: these nodes add a report to a fold and are no fold run.
    folds = [
        pipeline([node(fewshot_settings, ["params:crosstask", "params:fewshot", "params:explained_layer",
                                          "params:seed"], ["scoring", "settings"], name="parse_settings"),
                  node(bind(fewshot_curve, fold=f"{FOLD_PREFIX}{task}"),
                       [f"{FOLD_PREFIX}{task}.bundle", f"{task}.explainer_signals", f"{task}.rationale_predictions",
                        f"{FOLD_PREFIX}{task}.fold_metrics", "scoring", "settings"], "curve", name="fewshot_curve")],
                 namespace=f"fewshot_{task}",
                 inputs={f"{FOLD_PREFIX}{task}.bundle", f"{task}.explainer_signals", f"{task}.rationale_predictions",
                         f"{FOLD_PREFIX}{task}.fold_metrics"},
                 parameters={"crosstask", "fewshot", "explained_layer", "seed"})
        for task in tasks
    ]
    report = node(fewshot_report, [f"fewshot_{task}.curve" for task in tasks],
                  ["fewshot_curves", "fewshot_summary", "fewshot_page", "fewshot_plot"], name="fewshot_report")
    return pipeline([*folds, report])
