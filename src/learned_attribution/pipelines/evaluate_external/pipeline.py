"""evaluate_external: a trained fold's learned explainers and every configured baseline scored against a user's
rationale file, explaining a chosen task's classifier; one MLflow run per evaluation (the tracking hook's, kind
`EXTERNAL` of adapters/hooks/runs.py: it logs `metrics_table`, `explain_failures`, `explain_cost`, `counts` and
`metrics_plot`).

    kedro run --pipeline evaluate_external --params "evaluate_external.file=data/01_raw/external/example_rationales.jsonl,evaluate_external.classifier_task=sst2,evaluate_external.expnet_fold=heldout_sst2"

The file, the classifier and the fold's folder and budget are catalog entries whose paths are those run-time
parameters (conf/base/catalog_evaluate_external.yml): only the chosen ones are loaded. `parse_settings` comes first
(every other node takes its parsed settings), so a bad setting or an unwritable output folder stops the run before any
work; the MLflow store is checked by the hook before the first node.
"""
from kedro.pipeline import Pipeline, node, pipeline

from .nodes import (check_fold, explain_external, explain_external_gold, external_faithfulness, metrics_partition,
                    parse_settings, plot_metrics, predict_external, run_counts, score_external)

NAMESPACE = "evaluate_external"
PARAMETERS = {"evaluate_external", "external_outputs", "crosstask", "explained_layer", "seed", "compute", "max_length"}


def create_pipeline(**kwargs) -> Pipeline:
    template = pipeline([
        node(parse_settings, ["params:evaluate_external", "params:crosstask", "params:explained_layer", "params:seed",
                              "params:compute", "params:external_outputs"],
             ["settings", "scoring", "compute_settings"], name="parse_settings"),
        node(check_fold, ["task_classifier", "fold_bundle", "fold_budget", "settings"],
             ["classifier", "learned", "budget"], name="check_fold"),
        node(predict_external, ["rationales", "classifier", "params:max_length", "settings", "scoring",
                                "compute_settings"], ["predictions", "file_counts"], name="predict_external"),
        node(explain_external, ["classifier", "predictions", "learned", "scoring", "compute_settings"],
             ["token_scores", "explain_failures", "explain_cost"], name="explain_external"),
        node(explain_external_gold, ["classifier", "predictions", "learned", "token_scores", "scoring",
                                     "compute_settings"], ["gold_token_scores", "gold_explain_failures"],
             name="explain_external_gold"),
        node(external_faithfulness, ["classifier", "token_scores", "predictions", "scoring", "compute_settings"],
             "faithfulness", name="external_faithfulness"),
        node(score_external, ["token_scores", "gold_token_scores", "predictions", "faithfulness", "budget", "learned",
                              "scoring", "settings"], "metrics_table", name="score_external"),
        node(metrics_partition, ["metrics_table", "settings"], "metrics", name="save_metrics"),
        node(run_counts, ["file_counts", "predictions", "explain_failures", "budget"], "counts", name="run_counts"),
        node(plot_metrics, ["metrics_table", "settings"], "metrics_plot", name="plot_metrics"),
    ])
    return pipeline(template, namespace=NAMESPACE, inputs={"rationales": "external_rationales"},
                    parameters=PARAMETERS)
