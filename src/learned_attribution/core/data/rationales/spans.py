"""Character spans mapped to words, for every span format (span JSONL, doccano, Label Studio): the text is split into
words (the tokenizer's pre-tokenizer words, or whitespace words without a tokenizer) and a word is a rationale word
when a rationale span overlaps any of its characters. Also shared by the span formats: the records of a span-per-line
JSONL file, and the tags counted as rationale (`rationale_labels`)."""
from __future__ import annotations

import logging
from typing import Any, Callable, Iterable, Iterator, Sequence

import pandas as pd

from learned_attribution.core.data.rationales.records import (RationaleFileError, Span, SpanRecord, example_frame,
                                                              example_row, jsonl_records, record_id, record_text)
from learned_attribution.core.data.words import tokenizer_words, whitespace_words

logger = logging.getLogger(__name__)

# A format's spans of one record: (record, its text, source, where) -> the checked spans.
SpanParser = Callable[[dict, str, str, str], tuple[Span, ...]]
# A format's class of one record: (record, where) -> the class index.
ClassReader = Callable[[dict, str], int]


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


def span_lines_records(text: str, source: str, parse_spans: SpanParser, read_class: ClassReader) -> list[SpanRecord]:
    """The checked records of a JSONL file of one span format, one object a line: `text`, the spans
    (`parse_spans`, the format's), the class (`read_class`, the format's: by name or index, `records.class_value`),
    optional `id`. Every record must be of the file's format (that of its first record)."""
    records = []
    for number, record in jsonl_records(text, source):
        where = f"line {number}"
        if not isinstance(record, dict):
            raise RationaleFileError(f"{source}, {where}: expected a JSON object, got {type(record).__name__}")
        body = record_text(record, source, where)
        spans = parse_spans(record, body, source, where)
        records.append(SpanRecord(record_id(record, "line", number, source, where), body, read_class(record, where),
                                  spans, where))
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

    def rows() -> Iterator[tuple[str, dict[str, Any]]]:
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
            yield record.where, example_row(record.example_id, record.text, words,
                                            span_word_rationale(offsets, rationale_spans), record.label)

    return example_frame(rows(), source)


def word_marks(record: SpanRecord) -> tuple[list[str], list[int]]:
    """A record's whitespace words and, per word, 1 when one of its spans overlaps it (what a reader of its spans
    without a tokenizer gives): how a span record is written word by word."""
    words, offsets = whitespace_words(record.text)
    return words, span_word_rationale(offsets, [(span.start, span.end) for span in record.spans])
