"""afn pipeline: `kedro run --pipeline afn`."""
from kedro.pipeline import Pipeline, node, pipeline

from .nodes import (build_corpus, build_pairs, collect_skips, compare_layers, log_to_mlflow, make_plots,
                    measure_shifts, measure_strengths, summarize, write_report)

TREES = ["raw_sst2_trees_train", "raw_sst2_trees_dev", "raw_sst2_trees_test"]


def create_pipeline(**kwargs) -> Pipeline:
    return pipeline([
        node(build_corpus, [*TREES, "params:afn.corpus", "params:seed"], ["afn_corpus", "afn_corpus_skipped"],
             name="afn_build_corpus"),
        node(build_pairs, [*TREES, "afn_corpus", "params:afn.pairs", "params:seed"],
             ["afn_pairs", "afn_pairs_skipped"], name="afn_build_pairs"),
        node(measure_strengths, ["afn_corpus", "params:encoder", "params:max_length", "params:afn", "params:compute"],
             ["afn_token_strengths", "afn_strength_skipped"], name="afn_measure_strengths"),
        node(measure_shifts, ["afn_pairs", "params:encoder", "params:max_length", "params:afn", "params:compute"],
             ["afn_token_shifts", "afn_pair_shifts", "afn_shift_skipped"], name="afn_measure_shifts"),
        node(compare_layers, ["afn_token_strengths", "afn_pair_shifts", "afn_token_shifts", "params:afn"],
             "afn_layer_comparison", name="afn_compare_layers"),
        node(collect_skips, ["afn_corpus_skipped", "afn_pairs_skipped", "afn_strength_skipped", "afn_shift_skipped"],
             "afn_skipped", name="afn_collect_skips"),
        node(summarize, ["afn_layer_comparison", "afn_token_strengths", "afn_corpus", "afn_pairs", "afn_skipped",
                         "params:afn", "params:encoder"], "afn_headline", name="afn_summarize"),
        node(make_plots, ["afn_layer_comparison", "afn_token_shifts", "afn_pairs", "afn_headline", "params:afn"],
             ["afn_plot_strength_by_layer", "afn_plot_rh_by_layer", "afn_plot_shift_heatmaps", "afn_figures"],
             name="afn_make_plots"),
        node(write_report, ["afn_headline", "afn_layer_comparison", "afn_skipped", "params:afn", "params:max_length",
                            "params:seed"], "afn_report", name="afn_write_report"),
        node(log_to_mlflow, ["afn_report", "afn_headline", "afn_layer_comparison", "afn_figures", "params:afn",
                             "params:mlflow", "params:encoder", "params:max_length", "params:seed"], "afn_mlflow_run",
             name="afn_log_to_mlflow"),
    ])
