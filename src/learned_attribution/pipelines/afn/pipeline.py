"""afn pipeline (namespace `afn`): SST phrases and shift pairs in; strength, shift and layer tables, plots and a
report out; the MLflow hook logs the run (`adapters/hooks/runs.py`, `AFN`).

    kedro run --pipeline afn
    kedro run --pipeline afn --params "afn.corpus.user_sentences_file=my.txt,afn.pairs.user_pairs_file=pairs.tsv"
"""
from kedro.pipeline import Pipeline, node, pipeline

from learned_attribution.services.afn.corpus import collect_skips
from learned_attribution.services.afn.layers import compare_layers

from .nodes import (build_corpus, build_pairs, make_plots, measure_shifts, measure_strengths, parse_settings,
                    summarize, write_report)

TREES = ["trees_train", "trees_dev", "trees_test"]
SETTINGS = ["settings", "compute_settings"]


def create_pipeline(**kwargs) -> Pipeline:
    return pipeline([
        node(parse_settings, ["params:afn", "params:encoder", "params:max_length", "params:seed", "params:compute"],
             SETTINGS, name="parse_settings"),
        node(build_corpus, [*TREES, "user_sentences", "settings"], ["corpus", "corpus_skipped"], name="build_corpus"),
        node(build_pairs, [*TREES, "corpus", "user_pairs", "settings"], ["pairs", "pairs_skipped"],
             name="build_pairs"),
        node(measure_strengths, ["corpus", *SETTINGS], ["token_strengths", "strength_skipped"],
             name="measure_strengths"),
        node(measure_shifts, ["pairs", *SETTINGS], ["token_shifts", "pair_shifts", "shift_skipped"],
             name="measure_shifts"),
        node(compare_layers, ["token_strengths", "pair_shifts", "token_shifts", "settings"], "layer_comparison",
             name="compare_layers"),
        node(collect_skips, ["corpus_skipped", "pairs_skipped", "strength_skipped", "shift_skipped"], "skipped",
             name="collect_skips"),
        node(summarize, ["layer_comparison", "token_strengths", "corpus", "pairs", "skipped", "settings"], "headline",
             name="summarize"),
        node(make_plots, ["layer_comparison", "token_shifts", "pairs", "headline", "settings"],
             ["strength_by_layer_plot", "rh_by_layer_plot", "shift_heatmaps_plot"], name="make_plots"),
        node(write_report, ["headline", "layer_comparison", "skipped", "settings"], "report", name="write_report"),
    ], namespace="afn",
        inputs={f"trees_{split}": f"raw_sst2_trees_{split}" for split in ("train", "dev", "test")},
        parameters={"afn", "encoder", "max_length", "seed", "compute"})
