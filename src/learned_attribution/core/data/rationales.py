"""A user's rationale file (docs/external_rationales.md) as examples of the project's schema: JSONL (one object a
line: `words`, `rationale` with one 0/1 per word, `label`, optional `id`), or through Hugging Face `datasets` a
`save_to_disk` folder or a .csv / .parquet / .json file with the same fields (in CSV, `words` and `rationale` are JSON
lists in their cells). Every fault is a `RationaleFileError` naming the file and the line (JSONL) or row.

    examples = read_rationale_file("my_rationales.jsonl")   # n_classes=2: labels 0 or 1

Read by the evaluate_external pipeline (through a catalog dataset) and meant for any other reader of rationale files.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Iterable, Iterator

import pandas as pd

from learned_attribution.core.data.schema import EXAMPLE_COLUMNS
from learned_attribution.core.errors import InputError

logger = logging.getLogger(__name__)

REQUIRED_KEYS = ("words", "rationale", "label")
ROLE = "rationale_test"  # the role the scoring protocol reads
TASK = SPLIT = "external"
DATASETS_FORMATS = {".csv": "csv", ".parquet": "parquet", ".json": "json"}


class RationaleFileError(InputError):
    """A rationale file, or one of its records, that cannot be used; the message names the file and line or row."""


def _is_int(value: Any) -> bool:
    # JSON true/false load as bool, a subclass of int: not accepted as labels or rationale entries.
    return isinstance(value, int) and not isinstance(value, bool)


def record_problem(record: Any, n_classes: int = 2) -> str | None:
    """The reason a decoded record does not fit the format, or None when it does."""
    if not isinstance(record, dict):
        return f"expected a JSON object, got {type(record).__name__}"
    missing = [key for key in REQUIRED_KEYS if key not in record]
    if missing:
        return f"missing key(s) {missing}; every line needs {list(REQUIRED_KEYS)} (and optionally 'id')"
    words, rationale, label = record["words"], record["rationale"], record["label"]
    if not isinstance(words, list) or not words:
        return "'words' must be a non-empty list of strings"
    bad_words = [i for i, word in enumerate(words) if not isinstance(word, str) or not word.strip()]
    if bad_words:
        return f"'words' entries at positions {bad_words[:5]} are not non-empty strings"
    if not isinstance(rationale, list):
        return "'rationale' must be a list of 0/1, one per word"
    if len(rationale) != len(words):
        return f"'rationale' has {len(rationale)} entries but 'words' has {len(words)}"
    bad_marks = [i for i, mark in enumerate(rationale) if not _is_int(mark) or mark not in (0, 1)]
    if bad_marks:
        return f"'rationale' entries must be 0 or 1 (positions {bad_marks[:5]} are not)"
    if not _is_int(label) or not 0 <= label < n_classes:
        return f"'label' must be an integer class in 0..{n_classes - 1}, got {label!r}"
    if "id" in record and (isinstance(record["id"], bool) or not isinstance(record["id"], str | int)):
        return f"'id' must be a string or an integer, got {record['id']!r}"
    return None


def examples_from_records(records: Iterable[tuple[int, Any]], source: str, unit: str = "line",
                          n_classes: int = 2) -> pd.DataFrame:
    """Numbered records ((number, record) pairs) -> the example schema, role `rationale_test`; errors name `source`
    and `<unit> <number>`. Examples without an `id` get `<unit><number>`; ids must be unique."""
    rows, first_of = [], {}
    for number, record in records:
        reason = record_problem(record, n_classes)
        if reason:
            raise RationaleFileError(f"{source}, {unit} {number}: {reason}")
        example_id = str(record["id"]) if record.get("id") is not None else f"{unit}{number}"
        if example_id in first_of:
            raise RationaleFileError(f"{source}, {unit} {number}: id {example_id!r} already used on {unit} "
                                     f"{first_of[example_id]}; ids must be unique")
        first_of[example_id] = number
        rows.append({"example_id": example_id, "task": TASK, "split": SPLIT, "role": ROLE,
                     "text": " ".join(record["words"]), "words": list(record["words"]),
                     "word_rationale": list(record["rationale"]), "label": record["label"]})
    if not rows:
        raise RationaleFileError(f"{source}: no examples (the file is empty or holds only blank lines)")
    return pd.DataFrame(rows, columns=EXAMPLE_COLUMNS)


def parse_rationale_lines(text: str, source: str, n_classes: int = 2) -> pd.DataFrame:
    """JSONL `text` (one object per line) as examples; blank lines are skipped, any other bad line raises naming
    `source` and its 1-based line number."""
    def records() -> Iterator[tuple[int, Any]]:
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as error:
                raise RationaleFileError(f"{source}, line {number}: not valid JSON ({error.msg} at column "
                                         f"{error.colno})") from None

    return examples_from_records(records(), source, "line", n_classes)


def _jsonl_text(path: Path) -> str:
    """The file as UTF-8 text; a line that is not valid UTF-8 is an error naming it."""
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        for number, line in enumerate(raw.splitlines(), start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as error:
                raise RationaleFileError(f"{path}, line {number}: not valid UTF-8 ({error.reason} at byte "
                                         f"{error.start})") from None
        raise


def read_datasets_rationales(path: str | Path, n_classes: int = 2) -> pd.DataFrame:
    """A rationale set through Hugging Face `datasets`: a `save_to_disk` folder (`load_from_disk`, one split), or a
    .csv / .parquet / .json file (`load_dataset(<format>, data_files=...)`). Rows need `words`, `rationale` and
    `label` (optional `id`); in CSV, `words` and `rationale` are JSON lists in their cells. Errors name the source
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

    return examples_from_records(records(), source, "row", n_classes)


def no_rationale_words(examples: pd.DataFrame) -> pd.Series:
    """Per example: whether its rationale marks no word (such an example is not scored, SPEC §1)."""
    return examples["word_rationale"].map(lambda rationale: sum(rationale) == 0)


def check_rationales(examples: pd.DataFrame, source: str) -> pd.DataFrame:
    """`examples` once at least one of them marks a rationale word (else a `RationaleFileError` naming `source`);
    logs how many mark none (they are skipped by the scoring, SPEC §1)."""
    n_empty = int(no_rationale_words(examples).sum())
    logger.info("%s: %d examples, %d of them with no rationale word", source, len(examples), n_empty)
    if n_empty == len(examples):
        raise RationaleFileError(f"{source}: none of the {len(examples)} examples marks a rationale word (every "
                                 "'rationale' is all 0): nothing to score, plausibility needs at least one marked "
                                 "word per example (SPEC §1)")
    if n_empty:
        logger.warning("%s: %d of %d examples have no rationale word: skipped (not scored, SPEC §1)", source,
                       n_empty, len(examples))
    return examples


def read_rationale_file(path: str | Path, n_classes: int = 2) -> pd.DataFrame:
    """The rationale file at `path` (relative to the working directory), parsed and validated into the example
    schema (`core.data.schema.EXAMPLE_COLUMNS`; task and split `external`, role `rationale_test`): a .jsonl file,
    or a datasets folder or .csv / .parquet / .json file. Labels are classes 0..n_classes-1. Raises
    `RationaleFileError` naming the file and line or row at fault, or when no example marks a rationale word. The
    frame's `attrs["file"]` is `path`."""
    path = Path(path)
    if not path.exists():
        raise RationaleFileError(f"no such file {path} (working directory {Path.cwd()})")
    if path.is_file() and path.suffix == ".jsonl":
        examples = parse_rationale_lines(_jsonl_text(path), str(path), n_classes)
    else:
        examples = read_datasets_rationales(path, n_classes)
    examples.attrs["file"] = str(path)
    return check_rationales(examples, str(path))
