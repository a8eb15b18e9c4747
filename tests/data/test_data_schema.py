"""The shared schema and the strict / skip handling of malformed records."""
from __future__ import annotations

import pytest

from learned_attribution.core.data.schema import (
    EXAMPLE_COLUMNS,
    SKIP_COLUMNS,
    BadRecords,
    DataFormatError,
    check_rationale_length,
    make_examples_frame,
)


def _row(**overrides) -> dict:
    row = {"example_id": "x1", "task": "t", "split": "train", "role": "classifier_train", "text": "a b",
           "words": ["a", "b"], "word_rationale": None, "label": 1}
    return {**row, **overrides}


def test_examples_frame_has_the_schema_columns_in_order_and_integer_labels():
    frame = make_examples_frame([_row(), _row(example_id="x2", role="rationale_test", word_rationale=[0, 1])])
    assert list(frame.columns) == EXAMPLE_COLUMNS
    assert str(frame["label"].dtype) == "int64"
    assert frame["word_rationale"].tolist() == [None, [0, 1]]


def test_examples_frame_rejects_an_unknown_role():
    with pytest.raises(ValueError, match="rationale_tset"):
        make_examples_frame([_row(role="rationale_tset")])


def test_empty_examples_frame_keeps_the_schema():
    frame = make_examples_frame([])
    assert list(frame.columns) == EXAMPLE_COLUMNS and len(frame) == 0


@pytest.mark.parametrize(("rationale", "expected"), [
    (None, None),
    ([0, 1, 1], None),
    ([0, 1], "rationale has 2 entries but the text has 3 words"),
    ([0, 2, 1], "rationale entries must be 0 or 1"),
])
def test_check_rationale_length(rationale, expected):
    assert check_rationale_length(["a", "b", "c"], rationale) == expected


def test_strict_bad_records_raise_naming_file_and_location():
    bad = BadRecords("sst2", strict=True)
    with pytest.raises(DataFormatError, match=r"data/x\.tsv, line 7: label '9' not in"):
        bad.report("train", "data/x.tsv", "line 7", "label '9' not in {0, 1}")
    assert bad.frame().empty


def test_lenient_bad_records_are_recorded_not_raised():
    bad = BadRecords("cola", strict=False)
    bad.report("dev", "f.tsv", "line 2", "empty text")
    bad.leave_out("dev", "f.tsv", "line 3", "excluded by rule")
    frame = bad.frame()
    assert list(frame.columns) == SKIP_COLUMNS
    assert frame.to_dict("records") == [
        {"task": "cola", "split": "dev", "role": None, "file": "f.tsv", "location": "line 2", "reason": "empty text"},
        {"task": "cola", "split": "dev", "role": None, "file": "f.tsv", "location": "line 3",
         "reason": "excluded by rule"},
    ]


def test_leave_out_never_raises_even_when_strict():
    bad = BadRecords("hatexplain", strict=True)
    bad.leave_out("test", "d.json", "post 7", "undecided")
    assert len(bad.frame()) == 1
