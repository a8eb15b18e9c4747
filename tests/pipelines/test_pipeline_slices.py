"""Pipeline slices run as Kedro runs them, with an in-memory catalog (the Kedro starters' pattern): the nodes'
wiring, names and parameters, without files or a session."""
from __future__ import annotations

import pandas as pd
from kedro.io import DataCatalog, MemoryDataset
from kedro.runner import SequentialRunner

from learned_attribution.core.data.schema import RawText
from learned_attribution.pipelines.data_processing import create_pipeline as data_processing

GLUE = "sentence\tlabel\n{rows}\n"
TREES = {"train": "(3 (2 a) (4 (4 fun) (2 film)))\n(1 (2 a) (0 (0 dull) (2 film)))",
         "dev": "(4 (2 the) (4 best))", "test": "(0 (2 the) (0 worst))\n(3 (2 quite) (3 good))"}


def raw(name: str, text: str) -> MemoryDataset:
    return MemoryDataset(RawText(path=f"memory://{name}", text=text), copy_mode="assign")


def test_reading_and_tokenising_sst2_with_an_in_memory_catalog():
    pipeline = data_processing().only_nodes("read_sst2", "tokenize_sst2")
    catalog = DataCatalog({
        "raw_sst2_glue_train": raw("glue_train", GLUE.format(rows="a fun film\t1\na dull film\t0")),
        "raw_sst2_glue_dev": raw("glue_dev", GLUE.format(rows="the best\t1")),
        "raw_sst2_glue_test": raw("glue_test", GLUE.format(rows="the worst\t0")),
        **{f"raw_sst2_trees_{split}": raw(f"trees_{split}", text) for split, text in TREES.items()},
        "params:data_processing.sst2": MemoryDataset({"max_span": 1}),  # single words only
        "params:data_processing.strict": MemoryDataset(True),
        "params:data_processing.max_per_role": MemoryDataset(None),
        "params:encoder": MemoryDataset({"name_or_path": "packaged:all-MiniLM-L6-v2"}),
        "params:max_length": MemoryDataset(16),
        "params:seed": MemoryDataset(13),
    })
    SequentialRunner().run(pipeline, catalog)
    tokenized = catalog.load("tokenized_sst2")
    skipped = catalog.load("skipped_sst2")
    assert skipped.empty
    assert set(tokenized["role"]) == {"classifier_train", "classifier_val", "classifier_test", "rationale_train",
                                      "rationale_val", "rationale_test"}
    fun = tokenized[(tokenized["role"] == "rationale_train") & (tokenized["text"] == "a fun film")].iloc[0]
    # max_span 1: "fun" (a positive word in a positive sentence) alone: [CLS] a fun film [SEP] -> -100 0 1 0 -100
    assert list(fun["token_labels"]) == [-100, 0, 1, 0, -100] and list(fun["word_ids"]) == [-1, 0, 1, 2, -1]
    assert isinstance(tokenized, pd.DataFrame) and not tokenized["truncated"].any()


def test_a_students_one_table_report_and_summary_run_as_kedro_runs_them(project_root):
    """The amortize pipeline's reporting slice on in-memory tables: the settings node gives the teacher's deadline
    (none without `amortize.teacher_minutes`), the table node joins the fidelity, faithfulness, cost and
    plausibility tables into one, and the report and the summary show it."""
    import math

    import yaml

    from learned_attribution.pipelines.amortize import create_pipeline

    conf = {name: yaml.safe_load((project_root / "conf" / "base" / f"{name}.yml").read_text())
            for name in ("parameters", "parameters_amortize")}
    pipeline = create_pipeline(("sst2",)).only_nodes("student_sst2.parse_settings", "student_sst2.student_table",
                                                     "student_sst2.student_report", "amortize_summary")
    teacher = "teacher (kernel_shap (n_samples 200, seed 0))"
    tables = {
        "fidelity": pd.DataFrame({"method": ["student", teacher], "n_examples": 2, "spearman": [0.8, 0.6],
                                  "spearman_low": [0.7, 0.5], "spearman_high": [0.9, 0.7], "top5_tokens": [0.4, 0.3],
                                  "top5_tokens_low": [0.2, 0.1], "top5_tokens_high": [0.6, 0.5],
                                  **{f"top{k}{end}": 0.5 for k in (10, 20) for end in ("", "_low", "_high")}}),
        "faithfulness": pd.DataFrame({"method": ["student", teacher, "saliency"], "n_examples": 2,
                                      "comprehensiveness": [0.3, 0.2, 0.1], "comprehensiveness_low": [0.2, 0.1, 0.0],
                                      "comprehensiveness_high": [0.4, 0.3, 0.2], "sufficiency": [0.1, 0.2, 0.3],
                                      "sufficiency_low": [0.0, 0.1, 0.2], "sufficiency_high": [0.2, 0.3, 0.4]}),
        "cost": pd.DataFrame({"method": ["forward", "student", "saliency", teacher], "ratio_to_forward": [1, 0.5, 0.4,
                                                                                                          0.01]}),
        "plausibility": pd.DataFrame({"method": ["student", "expnet_plus"], "subset": "all", "rule": "matched",
                                      "auroc": [0.55, 0.65], "auroc_low": [0.5, 0.6], "auroc_high": [0.6, 0.7]}),
        "student_variants": pd.DataFrame({"variant": ["student_encoder"], "val_spearman": [0.7]}),
        "skipped_texts": pd.DataFrame({"example_id": [], "reason": []}),
        "teacher_failures": pd.DataFrame({"example_id": [], "error": []}),
        "held_out_failures": pd.DataFrame({"example_id": [], "error": []}),
        "train_texts": pd.DataFrame({"example_id": ["a", "b", "c"]}),
        "held_out_texts": pd.DataFrame({"example_id": ["d", "e"]})}
    catalog = DataCatalog({
        **{f"student_sst2.{name}": MemoryDataset(table) for name, table in tables.items()},
        "params:amortize": MemoryDataset(conf["parameters_amortize"]["amortize"]),
        "params:explained_layer": MemoryDataset(conf["parameters"]["explained_layer"]),
        "params:compute": MemoryDataset({**conf["parameters"]["compute"], "device": "cpu"})})
    outputs = SequentialRunner().run(pipeline, catalog)
    assert outputs["student_sst2.teacher_deadline"].load() == math.inf
    report, summary = outputs["student_sst2.report"].load(), outputs["amortize_summary"].load()
    rows = ["| student | 0.800 [0.700, 0.900] | 0.400 [0.200, 0.600] | 0.300 [0.200, 0.400] | 0.100 [0.000, 0.200] "
            "| 0.5000 | 0.550 [0.500, 0.600] |",
            f"| {teacher} | 0.600 [0.500, 0.700] | 0.300 [0.100, 0.500] | 0.200 [0.100, 0.300] | 0.200 [0.100, "
            "0.300] | 0.0100 |  |",
            "| saliency |  |  | 0.100 [0.000, 0.200] | 0.300 [0.200, 0.400] | 0.4000 |  |",
            "| expnet_plus |  |  |  |  |  | 0.650 [0.600, 0.700] |"]
    table = "\n".join(rows)
    assert table in report and table in summary and "## sst2" in summary
