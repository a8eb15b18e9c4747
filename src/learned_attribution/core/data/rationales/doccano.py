"""The doccano rationale format (`doccano`, docs/external_rationales.md): a doccano sequence-labelling JSONL export,
one object a line, `text`, the spans in `label` as `[[start, end, tag], ...]` (or `entities`, objects with
`start_offset`, `end_offset` and `label`), the class in `class` (another field with `class_field`), optional `id`.
The tags that mark rationales are chosen with `rationale_labels`. Its writer writes a doccano import: the spans in
`label`, the class in `class` and the text's id in `source_id` (doccano gives each text its own `id`).

    {"id": 2, "text": "A great film.", "label": [[2, 6, "Rationale"], [9, 13, "Rationale"]], "class": 1}
"""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from learned_attribution.core.data.rationales.records import (RationaleFileError, SourceFile, Span, SpanRecord,
                                                              checked_span, jsonl_lines)
from learned_attribution.core.data.rationales.registry import RationaleFormat, register
from learned_attribution.core.data.rationales.spans import chosen_tags, span_examples, span_lines_records

NAME = "doccano"
SPANS_FIELD, ENTITIES, CLASS_FIELD, ID_FIELD = "label", "entities", "class", "source_id"
RATIONALE_TAG = "Rationale"  # the tag written for a span that has none


def parse_spans(record: dict, text: str, source: str, where: str) -> tuple[Span, ...]:
    """A record's checked, tagged spans, from `entities` or the `label` list."""
    checked = []
    if ENTITIES in record:
        entities = record[ENTITIES]
        if not isinstance(entities, list):
            raise RationaleFileError(f"{source}, {where}: 'entities' must be a list of objects with start_offset, "
                                     "end_offset and label")
        for entity in entities:
            if not isinstance(entity, dict) or not {"start_offset", "end_offset", "label"} <= set(entity) \
                    or not isinstance(entity["label"], str):
                raise RationaleFileError(f"{source}, {where}: 'entities' entries must be objects with start_offset, "
                                         f"end_offset and a label name, got {entity!r}")
            checked.append(checked_span(entity["start_offset"], entity["end_offset"], (entity["label"],), text,
                                        source, where))
    elif isinstance(record.get(SPANS_FIELD), list):
        for item in record[SPANS_FIELD]:
            if not isinstance(item, list) or len(item) != 3 or not isinstance(item[2], str):
                raise RationaleFileError(f"{source}, {where}: 'label' entries must be [start, end, tag] (a doccano "
                                         f"sequence-labelling export), got {item!r}")
            checked.append(checked_span(item[0], item[1], (item[2],), text, source, where))
    else:
        raise RationaleFileError(f"{source}, {where}: no spans: a doccano record needs 'label' as [[start, end, tag], "
                                 "...] or 'entities'")
    return tuple(checked)


@register(NAME)
class Doccano(RationaleFormat):
    title = "doccano"
    summary = "a doccano .jsonl export"
    suffix = ".jsonl"
    class_field = CLASS_FIELD
    tagged = True
    record_hint = "doccano's 'label' as [[start, end, tag], ...] or 'entities'"

    def claims(self, file: SourceFile) -> bool:
        record = file.first_object()
        return record is not None and (ENTITIES in record or isinstance(record.get(SPANS_FIELD), list))

    def read(self, file: SourceFile, n_classes: int = 2, *, rationale_labels: Sequence[str] | None = None,
             class_field: str | None = None, tokenizer=None) -> pd.DataFrame:
        records = span_lines_records(file.text, file.source, parse_spans, class_field or CLASS_FIELD, n_classes)
        return span_examples(records, file.source, chosen_tags(records, rationale_labels, file.source), tokenizer)

    def write(self, records: Sequence[SpanRecord]) -> str:
        return jsonl_lines({"text": record.text,
                            SPANS_FIELD: [[span.start, span.end, tag] for span in record.spans
                                          for tag in span.tags or (RATIONALE_TAG,)],
                            CLASS_FIELD: record.label, ID_FIELD: record.example_id} for record in records)
