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
