"""The doccano rationale format (`doccano`, docs/external_rationales.md): a doccano JSONL export, one object a line,
`text`, the spans and the class, optional `id`. The spans are in `label` as `[[start, end, tag], ...]` (a sequence
labelling export) or in `entities`, as `[start, end, tag]` lists (an "Intent Detection and Slot Filling" export) or
objects with `start_offset`, `end_offset` and `label` (the newer sequence labelling export). The class is the
annotator's category, `cats` (Intent Detection and Slot Filling), else the field `class` imported with the texts
(another field with `class_field`, which then wins over `cats`), a class name or index. The tags that mark
rationales are chosen with `rationale_labels`.

Its writer writes a doccano import. With the classifier's class names (`suggest`), for an Intent Detection and Slot
Filling project: the spans in `entities`, the predicted class's name as the text's category in `cats` (the
annotator changes it to the class the rationale supports), the classes in `classes` and the text's id in
`source_id` (doccano gives each text its own `id`). Without names, for a sequence labelling project: the spans in
`label`, the class index in `class`.

    {"id": 2, "text": "A great film.", "entities": [[2, 6, "Rationale"], [9, 13, "Rationale"]], "cats": ["positive"]}
    {"id": 2, "text": "A great film.", "label": [[2, 6, "Rationale"], [9, 13, "Rationale"]], "class": 1}
"""
from __future__ import annotations

from typing import Any, Sequence

import pandas as pd

from learned_attribution.core.data.rationales.records import (RationaleFileError, SourceFile, Span, SpanRecord,
                                                              checked_span, class_value, jsonl_lines, record_class,
                                                              written_class)
from learned_attribution.core.data.rationales.registry import RationaleFormat, register
from learned_attribution.core.data.rationales.spans import chosen_tags, span_examples, span_lines_records

NAME = "doccano"
SPANS_FIELD, ENTITIES, CLASS_FIELD, ID_FIELD = "label", "entities", "class", "source_id"
CATEGORIES = "cats"  # an Intent Detection and Slot Filling project's text categories: the annotator's class
CLASSES_FIELD = "classes"  # in a file to annotate: the classifier's classes, in index order
RATIONALE_TAG = "Rationale"  # the tag written for a span that has none
ENTITY_HINT = "'entities' entries must be [start, end, tag] lists or objects with start_offset, end_offset and label"


def _tagged(item: Any, text: str, source: str, where: str, hint: str) -> Span:
    """One `[start, end, tag]` list as a checked span (anything else refused with `hint`)."""
    if not isinstance(item, list) or len(item) != 3 or not isinstance(item[2], str):
        raise RationaleFileError(f"{source}, {where}: {hint}, got {item!r}")
    return checked_span(item[0], item[1], (item[2],), text, source, where)


def parse_spans(record: dict, text: str, source: str, where: str) -> tuple[Span, ...]:
    """A record's checked, tagged spans, from `entities` or the `label` list."""
    checked = []
    if ENTITIES in record:
        entities = record[ENTITIES]
        if not isinstance(entities, list):
            raise RationaleFileError(f"{source}, {where}: {ENTITY_HINT} (a list of them)")
        for entity in entities:
            if isinstance(entity, list):
                checked.append(_tagged(entity, text, source, where, ENTITY_HINT))
                continue
            if not isinstance(entity, dict) or not {"start_offset", "end_offset", "label"} <= set(entity) \
                    or not isinstance(entity["label"], str):
                raise RationaleFileError(f"{source}, {where}: {ENTITY_HINT}, got {entity!r}")
            checked.append(checked_span(entity["start_offset"], entity["end_offset"], (entity["label"],), text,
                                        source, where))
    elif isinstance(record.get(SPANS_FIELD), list):
        for item in record[SPANS_FIELD]:
            checked.append(_tagged(item, text, source, where,
                                   "'label' entries must be [start, end, tag] (a doccano sequence-labelling export)"))
    else:
        raise RationaleFileError(f"{source}, {where}: no spans: a doccano record needs 'label' as [[start, end, tag], "
                                 "...] or 'entities'")
    return tuple(checked)


def record_category(record: dict, n_classes: int, source: str, where: str, class_field: str | None = None,
                    class_names: Sequence[str] | None = None) -> int:
    """A record's class: the field `class_field` when given, else the annotator's category (`cats`), else the
    field `class` (an export of texts imported with their class); by name or index (`records.class_value`)."""
    if class_field is None and CATEGORIES in record:
        return class_value(record[CATEGORIES], f"{source}, {where}: the category {CATEGORIES!r}", n_classes,
                           class_names)
    return record_class(record, class_field or CLASS_FIELD, n_classes, source, where, class_names=class_names,
                        required=class_field is not None)


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
             class_field: str | None = None, tokenizer=None,
             class_names: Sequence[str] | None = None) -> pd.DataFrame:
        def read_class(record: dict, where: str) -> int:
            return record_category(record, n_classes, file.source, where, class_field, class_names)

        records = span_lines_records(file.text, file.source, parse_spans, read_class)
        return span_examples(records, file.source, chosen_tags(records, rationale_labels, file.source), tokenizer)

    def write(self, records: Sequence[SpanRecord], class_names: Sequence[str] | None = None) -> str:
        def spans(record: SpanRecord) -> list[list]:
            return [[span.start, span.end, tag] for span in record.spans for tag in span.tags or (RATIONALE_TAG,)]

        if class_names:  # an Intent Detection and Slot Filling import: the class is a category the annotator sets
            return jsonl_lines({"text": record.text, ENTITIES: spans(record),
                                CATEGORIES: [written_class(record.label, class_names)],
                                CLASSES_FIELD: list(class_names), ID_FIELD: record.example_id} for record in records)
        return jsonl_lines({"text": record.text, SPANS_FIELD: spans(record), CLASS_FIELD: record.label,
                            ID_FIELD: record.example_id} for record in records)
