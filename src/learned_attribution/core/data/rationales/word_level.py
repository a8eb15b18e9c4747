"""The word-level rationale format (`words`, docs/external_rationales.md, "File format: JSONL"): JSONL, one object a
line, `words`, `rationale` with one 0/1 per word, `label` (a class name or index; absent or null: the file gives no
class, and it is scored in predicted mode only), optional `id`; or through Hugging Face `datasets` a
`save_to_disk` folder or a .csv / .parquet / .json file with the same fields (in CSV, `words` and `rationale` are
JSON lists in their cells). It reads every file no other format claims (`sniff.py`). Its writer writes a text's
whitespace words, marked where a span overlaps them; `suggest` does not offer it (no annotation tool marks it).

    {"id": "review-17", "words": ["a", "gutsy", "movie", "."], "rationale": [0, 1, 0, 0], "label": 1}
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import pandas as pd

from learned_attribution.core.data.classes import NO_CLASS
from learned_attribution.core.data.rationales.records import (RationaleFileError, SourceFile, SpanRecord,
                                                              class_value, example_frame, example_row, is_int,
                                                              jsonl_lines, jsonl_records, written_class)
from learned_attribution.core.data.rationales.registry import RationaleFormat, register
from learned_attribution.core.data.rationales.spans import word_marks

NAME = "words"
REQUIRED_KEYS = ("words", "rationale")  # and `label`, the class: absent or null is NO_CLASS (predicted mode only)
DATASETS_FORMATS = {".csv": "csv", ".parquet": "parquet", ".json": "json"}


def record_problem(record: Any) -> str | None:
    """The reason a decoded record does not fit the format, or None when it does (its class aside: `class_value`)."""
    if not isinstance(record, dict):
        return f"expected a JSON object, got {type(record).__name__}"
    missing = [key for key in REQUIRED_KEYS if key not in record]
    if missing:
        return f"missing key(s) {missing}; every line needs {list(REQUIRED_KEYS)} (and optionally 'label', 'id')"
    words, rationale = record["words"], record["rationale"]
    if not isinstance(words, list) or not words:
        return "'words' must be a non-empty list of strings"
    bad_words = [i for i, word in enumerate(words) if not isinstance(word, str) or not word.strip()]
    if bad_words:
        return f"'words' entries at positions {bad_words[:5]} are not non-empty strings"
    if not isinstance(rationale, list):
        return "'rationale' must be a list of 0/1, one per word"
    if len(rationale) != len(words):
        return f"'rationale' has {len(rationale)} entries but 'words' has {len(words)}"
    bad_marks = [i for i, mark in enumerate(rationale) if not is_int(mark) or mark not in (0, 1)]
    if bad_marks:
        return f"'rationale' entries must be 0 or 1 (positions {bad_marks[:5]} are not)"
    if "id" in record and (isinstance(record["id"], bool) or not isinstance(record["id"], str | int)):
        return f"'id' must be a string or an integer, got {record['id']!r}"
    return None


def examples_from_records(records: Iterable[tuple[int, Any]], source: str, unit: str = "line",
                          n_classes: int = 2, class_names: Sequence[str] | None = None) -> pd.DataFrame:
    """Numbered records ((number, record) pairs) -> the example schema, role `rationale_test`; errors name `source`
    and `<unit> <number>`. Examples without an `id` get `<unit><number>`; ids must be unique. `label` is a class
    name or index among `class_names` (without names: an integer in 0..n_classes-1)."""

    def rows() -> Iterator[tuple[str, dict]]:
        for number, record in records:
            reason = record_problem(record)
            if reason:
                raise RationaleFileError(f"{source}, {unit} {number}: {reason}")
            value = record.get("label")
            label = (NO_CLASS if value is None or (isinstance(value, float) and value != value) else  # NaN: empty cell
                     class_value(value, f"{source}, {unit} {number}: 'label'", n_classes, class_names))
            example_id = str(record["id"]) if record.get("id") is not None else f"{unit}{number}"
            yield f"{unit} {number}", example_row(example_id, " ".join(record["words"]), record["words"],
                                                  record["rationale"], label)

    return example_frame(rows(), source)


def parse_rationale_lines(text: str, source: str, n_classes: int = 2,
                          class_names: Sequence[str] | None = None) -> pd.DataFrame:
    """JSONL `text` (one object per line) as examples; blank lines are skipped, any other bad line raises naming
    `source` and its 1-based line number."""
    return examples_from_records(jsonl_records(text, source), source, "line", n_classes, class_names)


def read_datasets_rationales(path: str | Path, n_classes: int = 2,
                             class_names: Sequence[str] | None = None) -> pd.DataFrame:
    """A rationale set through Hugging Face `datasets`: a `save_to_disk` folder (`load_from_disk`, one split), or a
    .csv / .parquet / .json file (`load_dataset(<format>, data_files=...)`). Rows need `words` and `rationale`
    (optional `label`, `id`); in CSV, `words` and `rationale` are JSON lists in their cells. Errors name the source
    and the row (1-based)."""
    import datasets  # Hugging Face datasets takes seconds to import: only for a folder or a table file

    path = Path(path)
    source = str(path)
    if path.is_dir():
        loaded = datasets.load_from_disk(source)
        if isinstance(loaded, datasets.DatasetDict):
            if len(loaded) != 1:
                raise RationaleFileError(f"{source}: a DatasetDict with splits {sorted(loaded)}; save the one split "
                                         "to evaluate (`dataset[split].save_to_disk(...)`)")
            loaded = next(iter(loaded.values()))
    else:
        builder = DATASETS_FORMATS.get(path.suffix)
        if builder is None:
            raise RationaleFileError(f"{source}: unknown format {path.suffix!r}; use .jsonl, .json, .csv, .parquet "
                                     "or a datasets save_to_disk folder")
        loaded = datasets.load_dataset(builder, data_files=source, split="train")

    def records() -> Iterator[tuple[int, Any]]:
        for number, record in enumerate(loaded, start=1):
            record = dict(record)
            for key in ("words", "rationale"):
                if isinstance(record.get(key), str):
                    try:
                        record[key] = json.loads(record[key])
                    except json.JSONDecodeError:
                        raise RationaleFileError(f"{source}, row {number}: '{key}' is text that is not a JSON "
                                                 "list") from None
            yield number, record

    return examples_from_records(records(), source, "row", n_classes, class_names)


@register(NAME)
class WordLevel(RationaleFormat):
    title = "word-level"
    summary = ".jsonl of words, rationale, label (or a datasets folder, .csv, .parquet or .json of them)"
    suffix = ".jsonl"
    for_annotation = False  # an annotator would flip 0/1 per word by hand: no annotation tool marks it

    def claims(self, file: SourceFile) -> bool:
        record = file.first_object()
        return record is not None and "words" in record

    def read(self, file: SourceFile, n_classes: int = 2, *, rationale_labels: Sequence[str] | None = None,
             class_field: str | None = None, tokenizer=None,
             class_names: Sequence[str] | None = None) -> pd.DataFrame:
        if file.is_file_with(".jsonl"):
            return parse_rationale_lines(file.text, file.source, n_classes, class_names)
        return read_datasets_rationales(file.path, n_classes, class_names)

    def write(self, records: Sequence[SpanRecord], class_names: Sequence[str] | None = None) -> str:
        lines = []
        for record in records:
            words, marks = word_marks(record)
            lines.append({"id": record.example_id, "words": words, "rationale": marks,
                          "label": written_class(record.label, class_names)})
        return jsonl_lines(lines)
