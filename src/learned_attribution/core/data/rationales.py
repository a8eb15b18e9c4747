"""A user's rationale file (docs/external_rationales.md) as examples of the project's schema.

Word-level files: JSONL (one object a line: `words`, `rationale` with one 0/1 per word, `label`, optional `id`), or
through Hugging Face `datasets` a `save_to_disk` folder or a .csv / .parquet / .json file with the same fields (in CSV,
`words` and `rationale` are JSON lists in their cells).

Character-span files, as annotation tools write them: span JSONL (`text`, `spans` or `rationale_spans` as
`[[start, end], ...]`, end exclusive, `label`), a doccano JSONL export (`label` as `[[start, end, tag], ...]` or
`entities`, the class in another field) and a Label Studio JSON export (a list of tasks with `data` and
`annotations`). The text is split into words (the tokenizer's pre-tokenizer words, or whitespace words without a
tokenizer) and a word is a rationale word when a rationale span overlaps any of its characters.

Every fault is a `RationaleFileError` naming the file and the line (JSONL), task (Label Studio) or row.

    examples = read_rationale_file("my_rationales.jsonl")   # n_classes=2: labels 0 or 1
    examples = read_rationale_file("export.json", rationale_labels=["Rationale"], tokenizer=tokenizer)

Read by the evaluate_external pipeline (through a catalog dataset), `fit_rationales` and any other reader of
rationale files.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

import pandas as pd

from learned_attribution.core.data.schema import EXAMPLE_COLUMNS
from learned_attribution.core.data.words import tokenizer_words, whitespace_words
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


def jsonl_records(text: str, source: str) -> Iterator[tuple[int, Any]]:
    """(1-based line number, decoded object) for each non-blank line of JSONL `text`; a line that is not JSON raises
    naming `source` and the line."""
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as error:
            raise RationaleFileError(f"{source}, line {number}: not valid JSON ({error.msg} at column "
                                     f"{error.colno})") from None


def parse_rationale_lines(text: str, source: str, n_classes: int = 2) -> pd.DataFrame:
    """JSONL `text` (one object per line) as examples; blank lines are skipped, any other bad line raises naming
    `source` and its 1-based line number."""
    return examples_from_records(jsonl_records(text, source), source, "line", n_classes)


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


# ----------------------------------------------------------------------------------------------------
# Character spans (span JSONL, doccano, Label Studio) mapped to words
# ----------------------------------------------------------------------------------------------------

WORDS_FORMAT, SPANS_FORMAT, DOCCANO_FORMAT, LABEL_STUDIO_FORMAT = "words", "spans", "doccano", "label studio"
SPAN_KEYS = ("spans", "rationale_spans")
# The field holding the integer class, per format (`class_field` overrides it): doccano's `label` holds the spans.
CLASS_FIELDS = {SPANS_FORMAT: "label", DOCCANO_FORMAT: "class", LABEL_STUDIO_FORMAT: "label"}


@dataclass(frozen=True)
class Span:
    """A character span of a text, `end` exclusive, with the tags an annotation tool gave it (none in span JSONL)."""
    start: int
    end: int
    tags: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"span [{self.start}, {self.end}]" + (f" labelled {', '.join(self.tags)}" if self.tags else "")


@dataclass(frozen=True)
class SpanRecord:
    """One annotated text of a span file, checked: `where` names it in messages (`line 3`, `task 2 (id 57)`)."""
    where: str
    example_id: str
    text: str
    label: int
    spans: tuple[Span, ...]


def merge_spans(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The sorted union of character spans: overlapping or touching spans become one, in text order."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def overlaps(span: tuple[int, int], word: tuple[int, int]) -> bool:
    """Whether a character span and a word's offsets share a character (both end exclusive)."""
    return span[0] < word[1] and span[1] > word[0]


def span_word_rationale(offsets: Sequence[tuple[int, int]], spans: Iterable[tuple[int, int]]) -> list[int]:
    """Per word (its character offsets): 1 when any span overlaps any of its characters, else 0."""
    merged = merge_spans(spans)
    return [int(any(overlaps(span, word) for span in merged)) for word in offsets]


def text_words(text: str, tokenizer=None) -> tuple[list[str], list[tuple[int, int]]]:
    """The words a span file's text is split into, with their offsets: the tokenizer's pre-tokenizer words
    (`core.data.words.tokenizer_words`: BERT splits punctuation off) or, without a tokenizer, whitespace words."""
    return tokenizer_words(tokenizer, text) if tokenizer is not None else whitespace_words(text)


def _task_where(number: int, task: Any) -> str:
    """`task N` (1-based position in the export), with the task's Label Studio id when it has one."""
    identity = task.get("id") if isinstance(task, dict) else None
    return f"task {number}" + (f" (id {identity})" if identity is not None else "")


def _example_id(record: dict, unit: str, number: int, source: str, where: str) -> str:
    identity = record.get("id")
    if identity is None:
        return f"{unit}{number}"
    if isinstance(identity, bool) or not isinstance(identity, str | int):
        raise RationaleFileError(f"{source}, {where}: 'id' must be a string or an integer, got {identity!r}")
    return str(identity)


def _text(record: dict, source: str, where: str, holder: str = "") -> str:
    if "text" not in record:
        raise RationaleFileError(f"{source}, {where}: missing {holder}'text' (the text the spans index); fields: "
                                 f"{sorted(record)}")
    text = record["text"]
    if not isinstance(text, str) or not text.strip():
        raise RationaleFileError(f"{source}, {where}: {holder}'text' must be a non-empty string, got {text!r:.60}")
    return text


def _class(record: dict, field: str, n_classes: int, source: str, where: str, holder: str = "") -> int:
    if field not in record:
        raise RationaleFileError(f"{source}, {where}: missing the class field {holder}{field!r} (fields: "
                                 f"{sorted(record)}); name the field holding the integer class with class_field "
                                 "(CLI: --class-field)")
    value = record[field]
    if not _is_int(value) or not 0 <= value < n_classes:
        raise RationaleFileError(f"{source}, {where}: the class field {holder}{field!r} must be an integer class in "
                                 f"0..{n_classes - 1}, got {value!r}")
    return value


def _span(start: Any, end: Any, tags: tuple[str, ...], text: str, source: str, where: str) -> Span:
    """A span checked against its text: integer offsets, within the text, start below end."""
    if not _is_int(start) or not _is_int(end):
        raise RationaleFileError(f"{source}, {where}: span [{start!r}, {end!r}] must have integer offsets")
    span = Span(start, end, tags)
    if start < 0 or end > len(text):
        raise RationaleFileError(f"{source}, {where}: {span} is outside the text (characters 0..{len(text)})")
    if start >= end:
        raise RationaleFileError(f"{source}, {where}: {span} is empty or reversed (start must be below end)")
    return span


def _span_jsonl_spans(record: dict, text: str, source: str, where: str) -> tuple[Span, ...]:
    given = [key for key in SPAN_KEYS if key in record]
    if len(given) != 1:
        raise RationaleFileError(f"{source}, {where}: " + ("give one of 'spans' and 'rationale_spans', not both"
                                                           if given else "missing 'spans' (or 'rationale_spans')"))
    key = given[0]
    spans = record[key]
    if not isinstance(spans, list):
        raise RationaleFileError(f"{source}, {where}: {key!r} must be a list of [start, end] pairs")
    checked = []
    for item in spans:
        if not isinstance(item, list) or len(item) != 2:
            raise RationaleFileError(f"{source}, {where}: {key!r} entries must be [start, end] pairs, got {item!r}")
        checked.append(_span(item[0], item[1], (), text, source, where))
    return tuple(checked)


def _doccano_spans(record: dict, text: str, source: str, where: str) -> tuple[Span, ...]:
    checked = []
    if "entities" in record:
        entities = record["entities"]
        if not isinstance(entities, list):
            raise RationaleFileError(f"{source}, {where}: 'entities' must be a list of objects with start_offset, "
                                     "end_offset and label")
        for entity in entities:
            if not isinstance(entity, dict) or not {"start_offset", "end_offset", "label"} <= set(entity) \
                    or not isinstance(entity["label"], str):
                raise RationaleFileError(f"{source}, {where}: 'entities' entries must be objects with start_offset, "
                                         f"end_offset and a label name, got {entity!r}")
            checked.append(_span(entity["start_offset"], entity["end_offset"], (entity["label"],), text, source,
                                 where))
    elif isinstance(record.get("label"), list):
        for item in record["label"]:
            if not isinstance(item, list) or len(item) != 3 or not isinstance(item[2], str):
                raise RationaleFileError(f"{source}, {where}: 'label' entries must be [start, end, tag] (a doccano "
                                         f"sequence-labelling export), got {item!r}")
            checked.append(_span(item[0], item[1], (item[2],), text, source, where))
    else:
        raise RationaleFileError(f"{source}, {where}: no spans: a doccano record needs 'label' as [[start, end, tag], "
                                 "...] or 'entities'")
    return tuple(checked)


def jsonl_format(text: str, source: str) -> str:
    """The format of a JSONL rationale file, from its first record: `words` (word-level), `spans` (span JSONL) or
    `doccano`. A first line that is not a JSON object is left to the word-level reader, which names it."""
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            return WORDS_FORMAT
        if not isinstance(record, dict) or "words" in record:
            return WORDS_FORMAT
        if any(key in record for key in SPAN_KEYS):
            return SPANS_FORMAT
        if "entities" in record or isinstance(record.get("label"), list):
            return DOCCANO_FORMAT
        if "text" in record:
            raise RationaleFileError(f"{source}, line {number}: a record with 'text' needs its spans: 'spans' (or "
                                     "'rationale_spans') as [[start, end], ...], or doccano's 'label' as [[start, "
                                     "end, tag], ...] or 'entities'")
        return WORDS_FORMAT
    return WORDS_FORMAT


def span_lines_records(text: str, source: str, file_format: str, n_classes: int = 2,
                       class_field: str | None = None) -> list[SpanRecord]:
    """The checked records of a span JSONL or doccano JSONL file (`file_format`); every record must be of the
    file's format (that of its first record)."""
    field = class_field or CLASS_FIELDS[file_format]
    records = []
    for number, record in jsonl_records(text, source):
        where = f"line {number}"
        if not isinstance(record, dict):
            raise RationaleFileError(f"{source}, {where}: expected a JSON object, got {type(record).__name__}")
        body = _text(record, source, where)
        spans = (_span_jsonl_spans if file_format == SPANS_FORMAT else _doccano_spans)(record, body, source, where)
        records.append(SpanRecord(where, _example_id(record, "line", number, source, where), body,
                                  _class(record, field, n_classes, source, where), spans))
    return records


def label_studio_tasks(path: Path) -> list | None:
    """The tasks of a Label Studio JSON export at `path` (a JSON list of objects with `data` and `annotations`), or
    None when the file is another JSON file (read through `datasets`)."""
    raw = path.read_bytes()
    if not raw.lstrip().startswith(b"["):
        return None
    try:
        loaded = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise RationaleFileError(f"{path}: not valid UTF-8 ({error.reason} at byte {error.start})") from None
    except json.JSONDecodeError as error:
        raise RationaleFileError(f"{path}: not valid JSON ({error.msg} at line {error.lineno} column "
                                 f"{error.colno})") from None
    if not loaded:
        raise RationaleFileError(f"{path}: no examples (the file is an empty JSON list)")
    first = loaded[0]
    return loaded if isinstance(first, dict) and "data" in first and "annotations" in first else None


def _first_few(names: Sequence[str], n: int = 5) -> str:
    return ", ".join(names[:n]) + (", ..." if len(names) > n else "")


def label_studio_records(tasks: list, source: str, n_classes: int = 2,
                         class_field: str | None = None) -> list[SpanRecord]:
    """The checked records of a Label Studio export's tasks: text `data["text"]`, class `data[class_field]`, spans
    the `labels` results of the task's first annotation that is not cancelled. Tasks without such an annotation are
    left out, and extra annotations ignored, both logged."""
    field = class_field or CLASS_FIELDS[LABEL_STUDIO_FORMAT]
    records, unannotated, extra, with_extra = [], [], 0, []
    for number, task in enumerate(tasks, start=1):
        where = _task_where(number, task)
        if not isinstance(task, dict) or not isinstance(task.get("data"), dict):
            raise RationaleFileError(f"{source}, {where}: a Label Studio task must be an object with 'data' (an "
                                     "object) and 'annotations'")
        annotations = task.get("annotations", [])
        if not isinstance(annotations, list) or not all(isinstance(a, dict) for a in annotations):
            raise RationaleFileError(f"{source}, {where}: 'annotations' must be a list of objects")
        kept = [annotation for annotation in annotations if not annotation.get("was_cancelled")]
        if not kept:
            unannotated.append(where)
            continue
        if len(kept) > 1:
            extra += len(kept) - 1
            with_extra.append(where)
        body = _text(task["data"], source, where, "data ")
        result = kept[0].get("result", [])
        if not isinstance(result, list):
            raise RationaleFileError(f"{source}, {where}: the annotation's 'result' must be a list")
        spans = []
        for item in result:
            if not isinstance(item, dict) or item.get("type") != "labels":
                continue  # choices, ratings, relations: not spans
            value = item.get("value")
            if not isinstance(value, dict) or not {"start", "end", "labels"} <= set(value) \
                    or not isinstance(value["labels"], list) or not all(isinstance(t, str) for t in value["labels"]):
                raise RationaleFileError(f"{source}, {where}: a 'labels' result needs 'value' with start, end and "
                                         f"labels (a list of names), got {value!r:.120}")
            spans.append(_span(value["start"], value["end"], tuple(value["labels"]), body, source, where))
        records.append(SpanRecord(where, _example_id(task, "task", number, source, where), body,
                                  _class(task["data"], field, n_classes, source, where, "data "), tuple(spans)))
    if unannotated:
        logger.warning("%s: %d of %d task(s) have no annotation that is not cancelled (%s): left out", source,
                       len(unannotated), len(tasks), _first_few(unannotated))
    if extra:
        logger.warning("%s: %d task(s) have more than one annotation not cancelled (%s): %d extra annotation(s) "
                       "ignored, the first of each task is read", source, len(with_extra), _first_few(with_extra),
                       extra)
    if not records:
        raise RationaleFileError(f"{source}: no examples (no task has an annotation that is not cancelled)")
    return records


def chosen_tags(records: Sequence[SpanRecord], rationale_labels: Sequence[str] | None, source: str) -> set[str]:
    """The tags counted as rationale: `rationale_labels`, each of which must be present in the export; without it,
    the one tag present (logged). Several tags present and none chosen is an error listing them."""
    present = sorted({tag for record in records for span in record.spans for tag in span.tags})
    if isinstance(rationale_labels, str):
        rationale_labels = [rationale_labels]
    if rationale_labels:
        absent = [name for name in rationale_labels if name not in present]
        if absent:
            raise RationaleFileError(f"{source}: rationale label(s) {absent} not in the export; labels present: "
                                     f"{present}")
        return set(rationale_labels)
    if len(present) > 1:
        raise RationaleFileError(f"{source}: the export has {len(present)} labels {present}: name the rationale "
                                 "ones with rationale_labels (CLI: --rationale-labels)")
    if present:
        logger.info("%s: one label in the export, %r: its spans are the rationales", source, present[0])
    return set(present)


def span_examples(records: Sequence[SpanRecord], source: str, tags: set[str] | None = None,
                  tokenizer=None) -> pd.DataFrame:
    """Span records as examples of the schema (the text split by `text_words`; a word is a rationale word when a
    rationale span overlaps any of its characters, overlapping spans merged). Rationale spans: every span when
    `tags` is None (span JSONL), else those with a tag in `tags`. Every span must cover a word; ids must be
    unique."""
    rows, first_of = [], {}
    for record in records:
        words, offsets = text_words(record.text, tokenizer)
        if not words:
            raise RationaleFileError(f"{source}, {record.where}: 'text' has no words")
        for span in record.spans:
            if not any(overlaps((span.start, span.end), word) for word in offsets):
                raise RationaleFileError(f"{source}, {record.where}: {span} covers no word (only "
                                         f"{record.text[span.start:span.end]!r})")
        rationale_spans = [(span.start, span.end) for span in record.spans
                           if tags is None or set(span.tags) & tags]
        if record.example_id in first_of:
            raise RationaleFileError(f"{source}, {record.where}: id {record.example_id!r} already used on "
                                     f"{first_of[record.example_id]}; ids must be unique")
        first_of[record.example_id] = record.where
        rows.append({"example_id": record.example_id, "task": TASK, "split": SPLIT, "role": ROLE,
                     "text": record.text, "words": words, "word_rationale": span_word_rationale(offsets,
                                                                                               rationale_spans),
                     "label": record.label})
    if not rows:
        raise RationaleFileError(f"{source}: no examples (the file is empty or holds only blank lines)")
    return pd.DataFrame(rows, columns=EXAMPLE_COLUMNS)


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


def read_rationale_file(path: str | Path, n_classes: int = 2, *, rationale_labels: Sequence[str] | None = None,
                        class_field: str | None = None, tokenizer=None) -> pd.DataFrame:
    """The rationale file at `path` (relative to the working directory), parsed and validated into the example
    schema (`core.data.schema.EXAMPLE_COLUMNS`; task and split `external`, role `rationale_test`). Labels are
    classes 0..n_classes-1. The format is read from the file:

    - .jsonl, word-level (`words`, `rationale`, `label`): the words as given; the other arguments are ignored.
    - .jsonl, span JSONL (`text`, `spans` or `rationale_spans`, class in `label`) or a doccano export (`text`,
      `label` as [[start, end, tag], ...] or `entities`, class in `class`).
    - .json, a Label Studio export (a list of tasks with `data` and `annotations`; class in `data["label"]`).
    - otherwise a datasets folder or .csv / .parquet / .json file of word-level rows.

    For the span formats, `class_field` names the field holding the integer class (defaults above), the text is
    split into `tokenizer`'s pre-tokenizer words (`core.data.words.tokenizer_words`; without a tokenizer:
    whitespace words, punctuation attached), and a word is a rationale word when a rationale span overlaps any of
    its characters (overlapping or unordered spans are merged). doccano and Label Studio spans count when their tag
    is in `rationale_labels` (needed when the export has several tags; each must be present).

    Raises `RationaleFileError` naming the file and line, task or row at fault, or when no example marks a
    rationale word. The frame's `attrs["file"]` is `path`."""
    path = Path(path)
    if not path.exists():
        raise RationaleFileError(f"no such file {path} (working directory {Path.cwd()})")
    source = str(path)
    file_format, tasks = WORDS_FORMAT, None
    if path.is_file() and path.suffix == ".jsonl":
        text = _jsonl_text(path)
        file_format = jsonl_format(text, source)
        if file_format == WORDS_FORMAT:
            examples = parse_rationale_lines(text, source, n_classes)
        else:
            records = span_lines_records(text, source, file_format, n_classes, class_field)
            tags = chosen_tags(records, rationale_labels, source) if file_format == DOCCANO_FORMAT else None
            examples = span_examples(records, source, tags, tokenizer)
    elif path.is_file() and path.suffix == ".json" and (tasks := label_studio_tasks(path)) is not None:
        file_format = LABEL_STUDIO_FORMAT
        records = label_studio_records(tasks, source, n_classes, class_field)
        examples = span_examples(records, source, chosen_tags(records, rationale_labels, source), tokenizer)
    else:
        examples = read_datasets_rationales(path, n_classes)
    ignored = {name: value for name, value in (("rationale_labels", rationale_labels), ("class_field", class_field))
               if value is not None and (file_format == WORDS_FORMAT or (name == "rationale_labels"
                                                                          and file_format == SPANS_FORMAT))}
    if ignored:
        logger.warning("%s: %s ignored (a %s file)", source, ", ".join(f"{k}={v!r}" for k, v in ignored.items()),
                       "word-level" if file_format == WORDS_FORMAT else "span JSONL")
    logger.info("%s: read as a %s file", source, file_format)
    examples.attrs["file"] = str(path)
    return check_rationales(examples, str(path))
