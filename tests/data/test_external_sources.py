"""evaluate_external reads rationale sets through Hugging Face `datasets` besides JSONL: a save_to_disk
folder, Parquet, CSV (lists as JSON in their cells) and JSON, all giving the same examples as the JSONL."""
import json

import datasets
import pandas as pd
import pytest

from learned_attribution.pipelines.evaluate_external.nodes import (ExternalRationaleError, load_datasets_rationales,
                                                                   parse_external_rationales)

RECORDS = [{"id": "a", "words": ["a", "fine", "film"], "rationale": [0, 1, 0], "label": 1},
           {"id": "b", "words": ["dull"], "rationale": [1], "label": 0}]


@pytest.fixture
def expected():
    return parse_external_rationales("\n".join(json.dumps(r) for r in RECORDS), "x.jsonl")


def test_every_datasets_source_gives_the_jsonl_examples(tmp_path, expected):
    table = datasets.Dataset.from_list(RECORDS)
    table.save_to_disk(str(tmp_path / "saved"))
    datasets.DatasetDict({"test": table}).save_to_disk(str(tmp_path / "saved_dict"))
    table.to_parquet(str(tmp_path / "set.parquet"))
    table.to_json(str(tmp_path / "set.json"))
    pd.DataFrame([{**r, "words": json.dumps(r["words"]), "rationale": json.dumps(r["rationale"])} for r in RECORDS]
                 ).to_csv(tmp_path / "set.csv", index=False)
    for source in ("saved", "saved_dict", "set.parquet", "set.json", "set.csv"):
        loaded = load_datasets_rationales(tmp_path / source)
        pd.testing.assert_frame_equal(loaded, expected, check_dtype=False, obj=source)


def test_bad_rows_and_formats_are_named(tmp_path):
    bad = [RECORDS[0], {**RECORDS[1], "rationale": [1, 1]}]
    datasets.Dataset.from_list(bad).to_parquet(str(tmp_path / "bad.parquet"))
    with pytest.raises(ExternalRationaleError, match=r"bad.parquet, row 2: 'rationale' has 2 entries but 'words' has 1"):
        load_datasets_rationales(tmp_path / "bad.parquet")
    pd.DataFrame([{**RECORDS[0], "words": "a fine film"}]).to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(ExternalRationaleError, match=r"bad.csv, row 1: 'words' is text that is not a JSON list"):
        load_datasets_rationales(tmp_path / "bad.csv")
    (tmp_path / "set.tsv").write_text("x")
    with pytest.raises(ExternalRationaleError, match="unknown format '.tsv'"):
        load_datasets_rationales(tmp_path / "set.tsv")
    two = datasets.DatasetDict({"a": datasets.Dataset.from_list(RECORDS), "b": datasets.Dataset.from_list(RECORDS)})
    two.save_to_disk(str(tmp_path / "two"))
    with pytest.raises(ExternalRationaleError, match=r"a DatasetDict with splits \['a', 'b'\]"):
        load_datasets_rationales(tmp_path / "two")
