"""The data_processing pipeline's per-role cap (smoke slices) and data report (`core.data.schema`), and the report
node over them."""
from __future__ import annotations

import pandas as pd
import pytest

from learned_attribution.core.data.schema import REPORT_COLUMNS, SKIP_COLUMNS, cap_examples, data_report
from learned_attribution.pipelines.data_processing.nodes import build_data_report


@pytest.fixture
def examples() -> pd.DataFrame:
    roles = ["classifier_train"] * 5 + ["rationale_test"] * 2 + ["classifier_test"]
    return pd.DataFrame({"example_id": [f"e{i}" for i in range(len(roles))], "role": roles,
                         "label": [i % 2 for i in range(len(roles))]})


def test_cap_keeps_at_most_n_per_role_and_every_column(examples):
    capped = cap_examples(examples, 2, seed=13)
    assert list(capped.columns) == list(examples.columns)
    assert capped["role"].value_counts().to_dict() == {"classifier_train": 2, "rationale_test": 2,
                                                       "classifier_test": 1}
    # Rows are whole original rows, none duplicated.
    merged = capped.merge(examples, on=list(examples.columns), how="left", indicator=True)
    assert (merged["_merge"] == "both").all() and capped["example_id"].is_unique
    assert capped.equals(cap_examples(examples, 2, seed=13))
    assert capped.index.tolist() == list(range(5))


@pytest.mark.parametrize("max_per_role", [None, 0, 100])
def test_no_cap_or_a_large_cap_keeps_everything(examples, max_per_role):
    capped = cap_examples(examples, max_per_role, seed=13)
    assert sorted(capped["example_id"]) == sorted(examples["example_id"])


def test_cap_of_an_empty_frame_keeps_its_columns(examples):
    assert list(cap_examples(examples.iloc[:0], 3, seed=1).columns) == list(examples.columns)


def _tokenized(task: str, rows: list[tuple[str, str, list[int] | None, bool]]) -> pd.DataFrame:
    return pd.DataFrame([{"task": task, "split": split, "role": role, "word_rationale": rationale,
                          "truncated": truncated} for split, role, rationale, truncated in rows],
                        columns=["task", "split", "role", "word_rationale", "truncated"])


def _skipped(task: str, splits: list[str], roles: list[str | None] | None = None) -> pd.DataFrame:
    roles = roles or [None] * len(splits)
    return pd.DataFrame([{"task": task, "split": s, "role": r, "file": "f", "location": f"line {i}", "reason": "r"}
                         for i, (s, r) in enumerate(zip(splits, roles))], columns=SKIP_COLUMNS)


def test_data_report_counts_density_truncation_and_skips():
    hatexplain = _tokenized("hatexplain", [
        ("test", "classifier_test", None, True), ("test", "classifier_test", None, False),
        ("test", "classifier_test", None, False),
        ("test", "rationale_test", [1, 0, 0, 1], False), ("test", "rationale_test", [0, 0], True),
    ])
    sst2 = _tokenized("sst2", [("train", "classifier_train", None, False)])
    cola = _tokenized("cola", [("train", "rationale_val", [1, 1, 0], False)])
    tables = (hatexplain, sst2, cola,
              _skipped("hatexplain", ["test", "test", "val", "test"],
                       ["classifier_test", None, "classifier_val", "rationale_test"]),
              _skipped("sst2", ["train"], ["rationale_train"]), _skipped("cola", []))
    report = data_report(*tables)
    pd.testing.assert_frame_equal(build_data_report(*tables), report)  # the pipeline's node
    assert list(report.columns) == REPORT_COLUMNS
    rows = report.astype(object).where(report.notna(), None).values.tolist()
    assert rows == [
        # n_with_rationale counts rationales with at least one marked word; density = marked / words.
        # each skip counted once, on its role's row (a skip without a role on the split's classifier row)
        ["hatexplain", "test", "classifier_test", 3, 0, None, 1, 2],
        ["hatexplain", "test", "rationale_test", 2, 1, round(2 / 6, 4), 1, 1],
        ["sst2", "train", "classifier_train", 1, 0, None, 0, 0],
        ["cola", "train", "rationale_val", 1, 1, round(2 / 3, 4), 0, 0],
        # every val record was skipped, and no tree of the sst2 rationale split survived: they show up with their skips
        ["hatexplain", "val", "classifier_val", 0, 0, None, 0, 1],
        ["sst2", "train", "rationale_train", 0, 0, None, 0, 1],
    ]
    assert report["n_skipped"].sum() == 5


def test_the_data_report_needs_a_skipped_table_per_tokenized_table():
    sst2 = _tokenized("sst2", [("train", "classifier_train", None, False)])
    with pytest.raises(ValueError, match="each task's tokenized table, then each task's skipped records: got 3"):
        data_report(sst2, sst2, _skipped("sst2", []))
