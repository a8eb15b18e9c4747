"""evaluate_external: a trained fold's ExpNet and every configured baseline scored against a user's JSONL
rationale file, explaining a chosen task's classifier; one MLflow run per evaluation.

    kedro run --pipeline evaluate_external --params "evaluate_external.file=data/01_raw/external/example_rationales.jsonl,evaluate_external.classifier_task=sst2,evaluate_external.expnet_fold=heldout_sst2"

Kedro loads every declared input of a node, so the selection node declares every task's classifier and
every fold's ExpNet, ExpNet+ and budget (the catalog entries `{task}.classifier`, `heldout_{task}.expnet`,
`heldout_{task}.expnet_plus` and `heldout_{task}.budget`) and returns the chosen ones: the choice stays a plain run-time parameter.

Order: `check_external_outputs` comes first (reading the file and loading the artifacts take its checked settings),
so an unwritable output folder or MLflow store stops the run before any work; `log_external_run` comes last (it
reads the saved metrics back), so the MLflow run is FINISHED only once the metrics CSV is on disk.
"""
from kedro.pipeline import Pipeline, node, pipeline

from .nodes import (TASKS, check_external_outputs, explain_external, external_faithfulness, log_external_run,
                    metrics_partition, predict_external, read_external_rationales, score_external,
                    select_fold_artifacts)

NAMESPACE = "evaluate_external"


def create_pipeline(**kwargs) -> Pipeline:
    artifacts = {"settings": "settings",
                 **{f"classifier_{t}": f"{t}.classifier" for t in TASKS},
                 **{f"expnet_heldout_{t}": f"heldout_{t}.expnet" for t in TASKS},
                 **{f"expnet_plus_heldout_{t}": f"heldout_{t}.expnet_plus" for t in TASKS},
                 **{f"budget_heldout_{t}": f"heldout_{t}.budget" for t in TASKS}}
    template = pipeline([
        node(check_external_outputs, ["params:evaluate_external", "params:external_outputs", "params:mlflow"],
             "settings", name="check_external_outputs"),
        node(read_external_rationales, "settings", "examples", name="read_external_rationales"),
        node(select_fold_artifacts, artifacts, ["classifier", "expnet", "expnet_plus", "budget"],
             name="select_fold_artifacts"),
        node(predict_external, ["examples", "classifier", "params:max_length", "params:evaluate_external",
                                "params:compute", "params:seed"],
             "predictions", name="predict_external"),
        node(explain_external, ["classifier", "predictions", "expnet", "expnet_plus", "params:crosstask",
                                "params:evaluate_external", "params:seed", "params:compute"],
             ["token_scores", "explain_failures", "explain_cost"],
             name="explain_external"),
        node(external_faithfulness, ["classifier", "token_scores", "predictions", "params:crosstask", "params:compute"],
             "faithfulness",
             name="external_faithfulness"),
        node(score_external, ["token_scores", "predictions", "faithfulness", "budget", "expnet_plus", "params:crosstask",
                              "params:evaluate_external", "params:seed"], "metrics_table", name="score_external"),
        node(metrics_partition, ["metrics_table", "params:evaluate_external"], "metrics", name="save_metrics"),
        node(log_external_run, ["metrics_table", "predictions", "explain_failures", "explain_cost", "budget",
                                "params:evaluate_external", "params:crosstask", "params:mlflow", "params:max_length",
                                "examples", "metrics"],
             None, name="log_external_run"),
    ])
    shared = {*(f"{t}.classifier" for t in TASKS), *(f"heldout_{t}.expnet" for t in TASKS),
              *(f"heldout_{t}.expnet_plus" for t in TASKS), *(f"heldout_{t}.budget" for t in TASKS)}
    return pipeline(template, namespace=NAMESPACE, inputs=shared,
                    parameters={"evaluate_external", "external_outputs", "crosstask", "max_length", "seed", "mlflow",
                                "compute"})
