"""The Label Studio rationale format (`label-studio`, also spelled "label studio"; docs/external_rationales.md): a
Label Studio JSON export, a list of tasks with `data` (the `text`, the class in `label`, another field with
`class_field`) and `annotations`, whose `labels` results are the spans; the tags that mark rationales are chosen
with `rationale_labels`. A task's first annotation that is not cancelled is read, the others are logged.

Its writer writes a Label Studio import: a task `{"data": {"text", "label", "source_id"}}` per text (Label Studio
gives each task its own `id`), with an annotation of `labels` results when the text has spans.
"""
from __future__ import annotations

import json
import logging
from typing import Any, Sequence

import pandas as pd

from learned_attribution.core.data.rationales.records import (RationaleFileError, SourceFile, SpanRecord,
                                                              checked_span, record_class, record_id, record_text)
from learned_attribution.core.data.rationales.registry import RationaleFormat, register
from learned_attribution.core.data.rationales.spans import chosen_tags, span_examples

logger = logging.getLogger(__name__)

NAME = "label-studio"
DATA, ANNOTATIONS, CLASS_FIELD, ID_FIELD = "data", "annotations", "label", "source_id"
RATIONALE_TAG = "Rationale"  # the tag written for a span that has none


def _task_where(number: int, task: Any) -> str:
    """`task N` (1-based position in the export), with the task's Label Studio id when it has one."""
    identity = task.get("id") if isinstance(task, dict) else None
    return f"task {number}" + (f" (id {identity})" if identity is not None else "")


def _first_few(names: Sequence[str], n: int = 5) -> str:
    return ", ".join(names[:n]) + (", ..." if len(names) > n else "")


def label_studio_records(tasks: list, source: str, n_classes: int = 2,
                         class_field: str | None = None) -> list[SpanRecord]:
    """The checked records of a Label Studio export's tasks: text `data["text"]`, class `data[class_field]`, spans
    the `labels` results of the task's first annotation that is not cancelled. Tasks without such an annotation are
    left out, and extra annotations ignored, both logged."""
    field = class_field or CLASS_FIELD
    records, unannotated, extra, with_extra = [], [], 0, []
    for number, task in enumerate(tasks, start=1):
        where = _task_where(number, task)
        if not isinstance(task, dict) or not isinstance(task.get(DATA), dict):
            raise RationaleFileError(f"{source}, {where}: a Label Studio task must be an object with 'data' (an "
                                     "object) and 'annotations'")
        annotations = task.get(ANNOTATIONS, [])
        if not isinstance(annotations, list) or not all(isinstance(a, dict) for a in annotations):
            raise RationaleFileError(f"{source}, {where}: 'annotations' must be a list of objects")
        kept = [annotation for annotation in annotations if not annotation.get("was_cancelled")]
        if not kept:
            unannotated.append(where)
            continue
        if len(kept) > 1:
            extra += len(kept) - 1
            with_extra.append(where)
        body = record_text(task[DATA], source, where, "data ")
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
            spans.append(checked_span(value["start"], value["end"], tuple(value["labels"]), body, source, where))
        records.append(SpanRecord(record_id(task, "task", number, source, where), body,
                                  record_class(task[DATA], field, n_classes, source, where, "data "), tuple(spans),
                                  where))
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


@register(NAME)
class LabelStudio(RationaleFormat):
    title = "Label Studio"
    summary = "a Label Studio .json export"
    suffix = ".json"
    class_field = CLASS_FIELD
    tagged = True

    def claims(self, file: SourceFile) -> bool:
        tasks = file.json_list
        return tasks is not None and isinstance(tasks[0], dict) and DATA in tasks[0] and ANNOTATIONS in tasks[0]

    def read(self, file: SourceFile, n_classes: int = 2, *, rationale_labels: Sequence[str] | None = None,
             class_field: str | None = None, tokenizer=None) -> pd.DataFrame:
        records = label_studio_records(file.json_list, file.source, n_classes, class_field)
        return span_examples(records, file.source, chosen_tags(records, rationale_labels, file.source), tokenizer)

    def write(self, records: Sequence[SpanRecord]) -> str:
        tasks = []
        for record in records:
            task: dict[str, Any] = {DATA: {"text": record.text, CLASS_FIELD: record.label, ID_FIELD: record.example_id}}
            if record.spans:
                task[ANNOTATIONS] = [{"result": [
                    {"from_name": "rationale", "to_name": "text", "type": "labels",
                     "value": {"start": span.start, "end": span.end, "labels": list(span.tags or (RATIONALE_TAG,))}}
                    for span in record.spans]}]
            tasks.append(task)
        return json.dumps(tasks, ensure_ascii=False, indent=1) + "\n"
