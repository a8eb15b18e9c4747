"""A user's rationale file (docs/external_rationales.md) as examples of the project's schema, and texts to annotate
written as one: the public entry to the rationale formats.

Each format is one module of this package holding its reader and its writer, registered by name (`registry.py`):
word-level files (`word_level.py`: JSONL, or a datasets folder / .csv / .parquet / .json), span JSONL
(`span_jsonl.py`), doccano (`doccano.py`) and Label Studio (`label_studio.py`) exports. `sniff.py` decides which
format reads a file; the pieces they share live in `records.py` (the file, an annotated text, field checks, the
example frame) and `spans.py` (character spans mapped to words by overlap). Importing the package registers them.

Every fault is a `RationaleFileError` naming the file and the line (JSONL), task (Label Studio) or row.

    examples = read_rationale_file("my_rationales.jsonl")   # no class names: labels 0 or 1
    examples = read_rationale_file("export.json", class_names=["negative", "positive"],   # "positive" or 1
                                   rationale_labels=["Rationale"], tokenizer=tokenizer)
    write_annotation_file(picked, "to_annotate.json", "label-studio")

Read by the evaluate_external pipeline (through a catalog dataset), `fit_rationales` and any other reader of
rationale files; written by `learned-attribution suggest`.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence

import pandas as pd

# The formats, in the order `suggest` offers them; importing each registers it.
from learned_attribution.core.data.rationales import label_studio, doccano, span_jsonl, word_level  # noqa: F401
from learned_attribution.core.data.rationales.annotation import annotation_file, check_format, write_annotation_file
from learned_attribution.core.data.rationales.records import RationaleFileError, SourceFile, Span, SpanRecord
from learned_attribution.core.data.rationales.registry import (FORMATS, RationaleFormat, annotation_formats,
                                                               build_format, register)
from learned_attribution.core.data.rationales.sniff import recognise
from learned_attribution.core.data.rationales.spans import merge_spans, span_examples, span_word_rationale
from learned_attribution.core.data.rationales.word_level import parse_rationale_lines, read_datasets_rationales
from learned_attribution.core.errors import InputError

logger = logging.getLogger(__name__)

__all__ = ["FORMATS", "RationaleFileError", "RationaleFormat", "SourceFile", "Span", "SpanRecord",
           "annotation_file", "annotation_formats", "build_format", "check_format", "check_rationales",
           "merge_spans", "no_rationale_words", "parse_rationale_lines", "read_datasets_rationales",
           "read_rationale_file", "register", "span_examples", "span_word_rationale", "write_annotation_file"]


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


def read_rationale_file(path: str | Path, n_classes: int | None = None, *,
                        rationale_labels: Sequence[str] | None = None, class_field: str | None = None, tokenizer=None,
                        class_names: Sequence[str] | None = None) -> pd.DataFrame:
    """The rationale file at `path` (relative to the working directory), parsed and validated into the example
    schema (`core.data.schema.EXAMPLE_COLUMNS`; task and split `external`, role `rationale_test`). Labels are
    class indices: a file's class is a name or an index of the classifier's `class_names` (in index order, its
    config's `id2label` values: `core.data.classes.resolve_class`); without names, an integer in 0..n_classes-1
    (`n_classes` defaults to the number of names, else 2). The format is read from the file (`sniff.py`):

    - .jsonl, word-level (`words`, `rationale`, `label`): the words as given; the other arguments are ignored.
    - .jsonl, span JSONL (`text`, `spans` or `rationale_spans`, class in `label`) or a doccano export (`text`,
      `label` as [[start, end, tag], ...] or `entities`, class the category in `cats`, else `class`).
    - .json, a Label Studio export (a list of tasks with `data` and `annotations`; class the annotation's choice
      of the `class` control, else its prediction's, else `data["label"]`).
    - a file of any other registered format (`FORMATS`);
    - otherwise a datasets folder or .csv / .parquet / .json file of word-level rows.

    For the span formats, `class_field` names the field holding the class (defaults above), the text is
    split into `tokenizer`'s pre-tokenizer words (`core.data.words.tokenizer_words`; without a tokenizer:
    whitespace words, punctuation attached), and a word is a rationale word when a rationale span overlaps any of
    its characters (overlapping or unordered spans are merged). doccano and Label Studio spans count when their tag
    is in `rationale_labels` (needed when the export has several tags; each must be present).

    Raises `RationaleFileError` naming the file and line, task or row at fault, or when no example marks a
    rationale word. The frame's `attrs["file"]` is `path`, its `attrs["class_names"]` the names read by."""
    path = Path(path)
    class_names, n_classes = _classes(class_names, n_classes)
    if not path.exists():
        raise RationaleFileError(f"no such file {path} (working directory {Path.cwd()})")
    file = SourceFile(path)
    reader = recognise(file)
    examples = reader.read(file, n_classes, rationale_labels=rationale_labels, class_field=class_field,
                           tokenizer=tokenizer, class_names=class_names)
    # What the format has no use for is said, not silently dropped.
    ignored = {name: value for name, value, used in (("rationale_labels", rationale_labels, reader.tagged),
                                                     ("class_field", class_field, reader.class_field is not None))
               if value is not None and not used}
    if ignored:
        logger.warning("%s: %s ignored (a %s file)", file.source, ", ".join(f"{k}={v!r}" for k, v in ignored.items()),
                       reader.title)
    logger.info("%s: read as a %s file", file.source, reader.title)
    examples.attrs["file"] = str(path)
    examples.attrs["class_names"] = list(class_names) if class_names is not None else None  # what a class read as
    return check_rationales(examples, str(path))


def _classes(class_names: Sequence[str] | None, n_classes: int | None) -> tuple[tuple[str, ...] | None, int]:
    """The class names (a tuple, or None) and their number, checked against each other."""
    if class_names is None:
        return None, 2 if n_classes is None else int(n_classes)
    if isinstance(class_names, str):
        raise InputError(f"class_names={class_names!r}: give a list of names, one per class in index order")
    names = tuple(str(name) for name in class_names)
    if n_classes is not None and int(n_classes) != len(names):
        raise InputError(f"class_names={list(names)} names {len(names)} classes but n_classes={n_classes}")
    return names, len(names)
