"""Rationale files (`core.data.rationales`) through Hugging Face `datasets` besides JSONL: a save_to_disk folder,
Parquet, CSV (lists as JSON in their cells) and JSON, all giving the same examples as the JSONL; `read_rationale_file`
picks the reader by the path, and every fault names the file and the line or row."""
import json

import datasets
import pandas as pd
import pytest

from learned_attribution.core.data.rationales import (RationaleFileError, parse_rationale_lines,
                                                      read_datasets_rationales, read_rationale_file)
from learned_attribution.core.errors import InputError

RECORDS = [{"id": "a", "words": ["a", "fine", "film"], "rationale": [0, 1, 0], "label": 1},
           {"id": "b", "words": ["dull"], "rationale": [1], "label": 0}]


@pytest.fixture
def expected():
    return parse_rationale_lines("\n".join(json.dumps(r) for r in RECORDS), "x.jsonl")


def test_every_datasets_source_gives_the_jsonl_examples(tmp_path, expected):
    table = datasets.Dataset.from_list(RECORDS)
    table.save_to_disk(str(tmp_path / "saved"))
    datasets.DatasetDict({"test": table}).save_to_disk(str(tmp_path / "saved_dict"))
    table.to_parquet(str(tmp_path / "set.parquet"))
    table.to_json(str(tmp_path / "set.json"))
    pd.DataFrame([{**r, "words": json.dumps(r["words"]), "rationale": json.dumps(r["rationale"])} for r in RECORDS]
                 ).to_csv(tmp_path / "set.csv", index=False)
    for source in ("saved", "saved_dict", "set.parquet", "set.json", "set.csv"):
        loaded = read_datasets_rationales(tmp_path / source)
        pd.testing.assert_frame_equal(loaded, expected, check_dtype=False, obj=source)
        # read_rationale_file picks the datasets reader for everything but a .jsonl file
        pd.testing.assert_frame_equal(read_rationale_file(tmp_path / source), expected, check_dtype=False,
                                      obj=source)
    (tmp_path / "set.jsonl").write_text("\n".join(json.dumps(r) for r in RECORDS) + "\n", encoding="utf-8")
    pd.testing.assert_frame_equal(read_rationale_file(tmp_path / "set.jsonl"), expected)


def test_bad_rows_and_formats_are_named(tmp_path):
    bad = [RECORDS[0], {**RECORDS[1], "rationale": [1, 1]}]
    datasets.Dataset.from_list(bad).to_parquet(str(tmp_path / "bad.parquet"))
    with pytest.raises(RationaleFileError, match=r"bad.parquet, row 2: 'rationale' has 2 entries but 'words' has 1"):
        read_datasets_rationales(tmp_path / "bad.parquet")
    pd.DataFrame([{**RECORDS[0], "words": "a fine film"}]).to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(RationaleFileError, match=r"bad.csv, row 1: 'words' is text that is not a JSON list"):
        read_datasets_rationales(tmp_path / "bad.csv")
    (tmp_path / "set.tsv").write_text("x")
    with pytest.raises(RationaleFileError, match="unknown format '.tsv'"):
        read_datasets_rationales(tmp_path / "set.tsv")
    two = datasets.DatasetDict({"a": datasets.Dataset.from_list(RECORDS), "b": datasets.Dataset.from_list(RECORDS)})
    two.save_to_disk(str(tmp_path / "two"))
    with pytest.raises(RationaleFileError, match=r"a DatasetDict with splits \['a', 'b'\]"):
        read_datasets_rationales(tmp_path / "two")


def test_file_level_faults_are_input_errors_naming_the_file(tmp_path):
    assert issubclass(RationaleFileError, InputError)
    with pytest.raises(RationaleFileError, match=r"no such file .*absent.jsonl \(working directory "):
        read_rationale_file(tmp_path / "absent.jsonl")
    (tmp_path / "latin1.jsonl").write_bytes(json.dumps(RECORDS[0]).encode() + b"\n"
                                            + json.dumps(RECORDS[1]).encode().replace(b"dull", b"d\xfcll") + b"\n")
    with pytest.raises(RationaleFileError, match=r"latin1.jsonl, line 2: not valid UTF-8"):
        read_rationale_file(tmp_path / "latin1.jsonl")
    zeros = [{**r, "rationale": [0] * len(r["words"])} for r in RECORDS]
    datasets.Dataset.from_list(zeros).to_parquet(str(tmp_path / "zeros.parquet"))
    with pytest.raises(RationaleFileError, match=r"zeros.parquet: none of the 2 examples marks a rationale word"):
        read_rationale_file(tmp_path / "zeros.parquet")


def test_labels_are_checked_against_the_number_of_classes(tmp_path):
    source = tmp_path / "three.jsonl"
    source.write_text(json.dumps({**RECORDS[0], "label": 2}) + "\n", encoding="utf-8")
    with pytest.raises(RationaleFileError, match=r"three.jsonl, line 1: 'label' must be an integer class in 0..1"):
        read_rationale_file(source)
    assert read_rationale_file(source, n_classes=3)["label"].tolist() == [2]
