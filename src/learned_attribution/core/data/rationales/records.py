"""What every rationale format shares: the error, the file as the formats look at it (`SourceFile`, each part read
once), an annotated text (`SpanRecord`: what a span reader checks and what every writer writes), the checks of a
record's fields (id, text, class, span) and the example frame of the project's schema that every reader returns.

Every fault is a `RationaleFileError` naming the file and the line (JSONL), task (Label Studio) or row at fault.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import pandas as pd

from learned_attribution.core.data.classes import NO_CLASS, resolve_class
from learned_attribution.core.data.schema import EXAMPLE_COLUMNS
from learned_attribution.core.errors import InputError

ROLE = "rationale_test"  # the role the scoring protocol reads
TASK = SPLIT = "external"


class RationaleFileError(InputError):
    """A rationale file, or one of its records, that cannot be used; the message names the file and line or row."""


def is_int(value: Any) -> bool:
    """An integer that is not a bool: JSON true/false load as bool, a subclass of int, and are not accepted as
    classes, offsets or rationale entries."""
    return isinstance(value, int) and not isinstance(value, bool)


# ----------------------------------------------------------------------------------------------------
# The file, read once
# ----------------------------------------------------------------------------------------------------

class SourceFile:
    """A rationale file as the formats look at it (`RationaleFormat.claims`, then its reader): its path and, read
    on first use and kept, its UTF-8 text, the first record of a .jsonl file and the top-level list of a .json
    file. Unreadable text is an error naming the file (and the line, for JSONL)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.source = str(self.path)

    def is_file_with(self, suffix: str) -> bool:
        """Whether the path is a file (not a datasets folder) with this suffix."""
        return self.path.is_file() and self.path.suffix == suffix

    @cached_property
    def text(self) -> str:
        """The file as UTF-8 text; a line that is not valid UTF-8 is an error naming it."""
        raw = self.path.read_bytes()
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            for number, line in enumerate(raw.splitlines(), start=1):
                try:
                    line.decode("utf-8")
                except UnicodeDecodeError as error:
                    raise RationaleFileError(f"{self.source}, line {number}: not valid UTF-8 ({error.reason} at "
                                             f"byte {error.start})") from None
            raise

    @cached_property
    def first_record(self) -> tuple[int, Any] | None:
        """(1-based line number, decoded object) of a .jsonl file's first non-blank line; None for another file, an
        empty one, or a first line that is not JSON (left to the reader, which names it)."""
        if not self.is_file_with(".jsonl"):
            return None
        for number, line in enumerate(self.text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                return number, json.loads(line)
            except json.JSONDecodeError:
                return None
        return None

    def first_object(self) -> dict | None:
        """The first record of a .jsonl file when it is a JSON object, else None."""
        first = self.first_record
        return first[1] if first is not None and isinstance(first[1], dict) else None

    @cached_property
    def json_list(self) -> list | None:
        """The top-level list of a .json file whose text starts with `[` (not valid UTF-8 or JSON, or an empty
        list: an error naming the file); None for any other file."""
        if not self.is_file_with(".json"):
            return None
        raw = self.path.read_bytes()
        if not raw.lstrip().startswith(b"["):
            return None
        try:
            loaded = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as error:
            raise RationaleFileError(f"{self.source}: not valid UTF-8 ({error.reason} at byte {error.start})") from None
        except json.JSONDecodeError as error:
            raise RationaleFileError(f"{self.source}: not valid JSON ({error.msg} at line {error.lineno} column "
                                     f"{error.colno})") from None
        if not loaded:
            raise RationaleFileError(f"{self.source}: no examples (the file is an empty JSON list)")
        return loaded


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


def jsonl_lines(records: Iterable[dict]) -> str:
    """Objects as JSONL text, one a line, non-ASCII characters as they are."""
    return "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)


# ----------------------------------------------------------------------------------------------------
# An annotated text and the checks of its fields
# ----------------------------------------------------------------------------------------------------

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
    """One annotated text: its id, the text, its class (an index) and its character spans. A reader's records are
    checked, and `where` names one in messages (`line 3`, `task 2 (id 57)`); a writer writes them (a text to
    annotate has no spans yet)."""
    example_id: str
    text: str
    label: int
    spans: tuple[Span, ...] = ()
    where: str = ""


def record_id(record: dict, unit: str, number: int, source: str, where: str) -> str:
    """The record's `id` as text, or `<unit><number>` when it has none."""
    identity = record.get("id")
    if identity is None:
        return f"{unit}{number}"
    if isinstance(identity, bool) or not isinstance(identity, str | int):
        raise RationaleFileError(f"{source}, {where}: 'id' must be a string or an integer, got {identity!r}")
    return str(identity)


def record_text(record: dict, source: str, where: str, holder: str = "") -> str:
    """The record's `text`, a non-empty string (`holder` names the object holding it in messages: `data `)."""
    if "text" not in record:
        raise RationaleFileError(f"{source}, {where}: missing {holder}'text' (the text the spans index); fields: "
                                 f"{sorted(record)}")
    text = record["text"]
    if not isinstance(text, str) or not text.strip():
        raise RationaleFileError(f"{source}, {where}: {holder}'text' must be a non-empty string, got {text!r:.60}")
    return text


def record_class(record: dict, field: str, n_classes: int, source: str, where: str, holder: str = "",
                 class_names: Sequence[str] | None = None, required: bool = False) -> int:
    """The class in the record's `field` (a format's default, or the user's `class_field`: `required`), by name or
    index (`core.data.classes.resolve_class`: names only with the classifier's `class_names`). A format's default
    field absent or null is `NO_CLASS`: the rationale is scored in predicted mode only."""
    if field not in record or record[field] is None:
        if not required:
            return NO_CLASS
        raise RationaleFileError(f"{source}, {where}: missing the class field {holder}{field!r} (fields: "
                                 f"{sorted(record)}); name the field holding the class (a name or an index) with "
                                 "class_field (CLI: --class-field)")
    return class_value(record[field], f"{source}, {where}: the class field {holder}{field!r}", n_classes,
                       class_names)


def class_value(value: Any, where: str, n_classes: int, class_names: Sequence[str] | None = None) -> int:
    """A class read from a file (`where` names the file, row and field) as its index: a `RationaleFileError`
    when it is not one of the classifier's classes. A list is an annotation tool's choice of classes, of which
    there must be one (`one_choice`)."""
    if isinstance(value, list):
        value = one_choice(value, where)
    return resolve_class(value, class_names, where, n_classes=n_classes, error=RationaleFileError)


def one_choice(values: list, where: str) -> Any:
    """The one class an annotator chose, from a tool's list of chosen classes (doccano's `cats`, a Label Studio
    `choices` value; a doccano category object `{"label": name}` reads as its name). No class, or several
    different ones (a collaborative export whose annotators disagree), is refused naming `where`."""
    chosen = [value.get("label") if isinstance(value, dict) else value for value in values]
    distinct: list = []  # one class chosen by several annotators is that class
    for value in chosen:
        if value not in distinct:
            distinct.append(value)
    if not distinct:
        raise RationaleFileError(f"{where} holds no class: choose the class the rationale supports")
    if len(distinct) > 1:
        raise RationaleFileError(f"{where} holds {len(distinct)} classes {distinct}: a rationale supports one class, "
                                 "choose one")
    return distinct[0]


def written_class(label: int, class_names: Sequence[str] | None) -> int | str | None:
    """A record's class as a writer writes it: its name among `class_names`, else its index; None (JSON null: no
    class) for `NO_CLASS`."""
    if label == NO_CLASS:
        return None
    return str(class_names[label]) if class_names else label


def checked_span(start: Any, end: Any, tags: tuple[str, ...], text: str, source: str, where: str) -> Span:
    """A span checked against its text: integer offsets, within the text, start below end."""
    if not is_int(start) or not is_int(end):
        raise RationaleFileError(f"{source}, {where}: span [{start!r}, {end!r}] must have integer offsets")
    span = Span(start, end, tags)
    if start < 0 or end > len(text):
        raise RationaleFileError(f"{source}, {where}: {span} is outside the text (characters 0..{len(text)})")
    if start >= end:
        raise RationaleFileError(f"{source}, {where}: {span} is empty or reversed (start must be below end)")
    return span


# ----------------------------------------------------------------------------------------------------
# The example frame every reader returns
# ----------------------------------------------------------------------------------------------------

def example_row(example_id: str, text: str, words: Sequence[str], rationale: Sequence[int], label: int) -> dict:
    """One example of the schema (`core.data.schema.EXAMPLE_COLUMNS`), task and split `external`, role
    `rationale_test`."""
    return {"example_id": example_id, "task": TASK, "split": SPLIT, "role": ROLE, "text": text, "words": list(words),
            "word_rationale": list(rationale), "label": label}


def example_frame(rows: Iterable[tuple[str, dict]], source: str) -> pd.DataFrame:
    """(where, `example_row`) pairs as the frame of examples; an id used twice is an error naming both places,
    and so is a file with no example."""
    kept, first_of = [], {}
    for where, row in rows:
        example_id = row["example_id"]
        if example_id in first_of:
            raise RationaleFileError(f"{source}, {where}: id {example_id!r} already used on {first_of[example_id]}; "
                                     "ids must be unique")
        first_of[example_id] = where
        kept.append(row)
    if not kept:
        raise RationaleFileError(f"{source}: no examples (the file is empty or holds only blank lines)")
    return pd.DataFrame(kept, columns=EXAMPLE_COLUMNS)
