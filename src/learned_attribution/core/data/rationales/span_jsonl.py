"""The span JSONL rationale format (`spans`, docs/external_rationales.md): one object a line, `text`, the rationale
spans as `spans` (or `rationale_spans`, not both) `[[start, end], ...]` (character offsets into `text`, end
exclusive), the class in `label` (a class name or index; another field with `class_field`), optional `id`. What a
script or a hand writes; its writer writes a text to annotate with empty `spans`, the predicted class's name in
`label` (the annotator edits it to the class the rationale supports) and the classifier's classes in `classes`.

    {"id": "film", "text": "A great film.", "spans": [[2, 6], [9, 13]], "label": "positive"}
"""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from learned_attribution.core.data.rationales.records import (RationaleFileError, SourceFile, Span, SpanRecord,
                                                              checked_span, jsonl_lines, record_class, written_class)
from learned_attribution.core.data.rationales.registry import RationaleFormat, register
from learned_attribution.core.data.rationales.spans import span_examples, span_lines_records

NAME = "spans"
SPAN_KEYS = ("spans", "rationale_spans")  # the one written is the first
CLASS_FIELD = "label"
CLASSES_FIELD = "classes"  # in a file to annotate: the classifier's classes, in index order


def parse_spans(record: dict, text: str, source: str, where: str) -> tuple[Span, ...]:
    """A record's checked spans, from `spans` or `rationale_spans` (exactly one of them)."""
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
        checked.append(checked_span(item[0], item[1], (), text, source, where))
    return tuple(checked)


@register(NAME)
class SpanJsonl(RationaleFormat):
    title = "span JSONL"
    summary = "span JSONL (.jsonl of text, spans, label)"
    suffix = ".jsonl"
    class_field = CLASS_FIELD
    record_hint = "'spans' (or 'rationale_spans') as [[start, end], ...]"

    def claims(self, file: SourceFile) -> bool:
        record = file.first_object()
        return record is not None and any(key in record for key in SPAN_KEYS)

    def read(self, file: SourceFile, n_classes: int = 2, *, rationale_labels: Sequence[str] | None = None,
             class_field: str | None = None, tokenizer=None,
             class_names: Sequence[str] | None = None) -> pd.DataFrame:
        def read_class(record: dict, where: str) -> int:
            return record_class(record, class_field or CLASS_FIELD, n_classes, file.source, where,
                                class_names=class_names, required=class_field is not None)

        records = span_lines_records(file.text, file.source, parse_spans, read_class)
        return span_examples(records, file.source, None, tokenizer)

    def write(self, records: Sequence[SpanRecord], class_names: Sequence[str] | None = None) -> str:
        return jsonl_lines({"id": record.example_id, "text": record.text,
                            SPAN_KEYS[0]: [[span.start, span.end] for span in record.spans],
                            CLASS_FIELD: written_class(record.label, class_names),
                            **({CLASSES_FIELD: list(class_names)} if class_names else {})}
                           for record in records)
