"""The Label Studio rationale format (`label-studio`, also spelled "label studio"; docs/external_rationales.md): a
Label Studio JSON export, a list of tasks with `data` (the `text`) and `annotations`, whose `labels` results are the
spans; the tags that mark rationales are chosen with `rationale_labels`. A task's first annotation that is not
cancelled is read, the others are logged.

The class (a class name or index) is, in this order: the annotation's `choices` result of the Choices control named
`class`, the annotator's choice; else that of the task's prediction, the pre-selected class the annotator left; else
`data["label"]`, the class imported with the text. `class_field` names another: the data field of that name where
the task's data has one, else the Choices control of that name.

Its writer writes a Label Studio import: a task `{"data": {"text", "source_id"}}` per text (Label Studio gives each
task its own `id`), with an annotation of `labels` results when the text has spans. With the classifier's class
names (`suggest`), the task's data lists them in `classes` (the options of the Choices control of `LABEL_CONFIG`)
and the record's class is that control's choice: pre-selected by a prediction, which the annotator changes to the
class the rationale supports (or part of the annotation, when the text has spans); without names, the class is
`data["label"]`, an index.
"""
from __future__ import annotations

import json
import logging
from collections import Counter
from typing import Any, Sequence

import pandas as pd

from learned_attribution.core.data.classes import NO_CLASS
from learned_attribution.core.data.rationales.records import (RationaleFileError, SourceFile, SpanRecord,
                                                              checked_span, class_value, record_class, record_id,
                                                              record_text, written_class)
from learned_attribution.core.data.rationales.registry import RationaleFormat, register
from learned_attribution.core.data.rationales.spans import chosen_tags, span_examples

logger = logging.getLogger(__name__)

NAME = "label-studio"
DATA, ANNOTATIONS, PREDICTIONS = "data", "annotations", "predictions"
CLASS_FIELD, ID_FIELD, CLASSES_FIELD = "label", "source_id", "classes"
TEXT, RATIONALE_CONTROL, CLASS_CONTROL = "text", "rationale", "class"  # the names LABEL_CONFIG gives its tags
RATIONALE_TAG = "Rationale"  # the tag written for a span that has none

# The labeling interface of a file `suggest` writes (paste it in the project's Settings > Labeling Interface >
# Code): the text, its rationale spans, and one class chosen among the task's `classes` (dynamic choices), the
# predicted one pre-selected.
LABEL_CONFIG = f"""<View>
  <Labels name="{RATIONALE_CONTROL}" toName="{TEXT}">
    <Label value="{RATIONALE_TAG}"/>
  </Labels>
  <Text name="{TEXT}" value="${TEXT}"/>
  <Choices name="{CLASS_CONTROL}" toName="{TEXT}" value="${CLASSES_FIELD}" choice="single" showInline="true"
           required="true"/>
</View>
"""


def _task_where(number: int, task: Any) -> str:
    """`task N` (1-based position in the export), with the task's Label Studio id when it has one."""
    identity = task.get("id") if isinstance(task, dict) else None
    return f"task {number}" + (f" (id {identity})" if identity is not None else "")


def _first_few(names: Sequence[str], n: int = 5) -> str:
    return ", ".join(names[:n]) + (", ..." if len(names) > n else "")


def _results(holder: dict, source: str, where: str, origin: str = "annotation") -> list:
    """An annotation's or prediction's (`origin`) `result` list."""
    result = holder.get("result", [])
    if not isinstance(result, list):
        raise RationaleFileError(f"{source}, {where}: the {origin}'s 'result' must be a list")
    return result


def _choices(result: list, control: str, source: str, where: str) -> list | None:
    """The choices of the Choices control `control` among `result`; None when the control has no result."""
    found = [item for item in result if isinstance(item, dict) and item.get("type") == "choices"
             and item.get("from_name") == control]
    if not found:
        return None
    chosen = []
    for item in found:
        value = item.get("value")
        if not isinstance(value, dict) or not isinstance(value.get("choices"), list):
            raise RationaleFileError(f"{source}, {where}: a 'choices' result needs 'value' with choices (a list of "
                                     f"names), got {value!r:.120}")
        chosen.extend(value["choices"])
    return chosen


def task_class(task: dict, annotation: dict, source: str, where: str, n_classes: int, class_field: str | None,
               class_names: Sequence[str] | None, origins: Counter) -> int:
    """A task's class: the annotation's choice of the class control, else its prediction's, else the data field
    (the module's docstring); `origins` counts where each task's class came from."""
    if class_field is not None and class_field in task[DATA]:  # the user named a field imported with the text
        origins["data"] += 1
        return record_class(task[DATA], class_field, n_classes, source, where, "data ", class_names)
    control = class_field or CLASS_CONTROL
    candidates = [("annotation", annotation)] + [("prediction", prediction) for prediction in task.get(PREDICTIONS) or []
                                                 if isinstance(prediction, dict)]
    for origin, holder in candidates:
        chosen = _choices(_results(holder, source, where, origin), control, source, where)
        if chosen is not None:
            origins[origin] += 1
            return class_value(chosen, f"{source}, {where}: the {origin}'s {control!r} choice", n_classes,
                               class_names)
    field = class_field or CLASS_FIELD
    if field not in task[DATA]:
        others = sorted({item["from_name"] for item in _results(annotation, source, where)
                         if isinstance(item, dict) and item.get("type") == "choices"
                         and isinstance(item.get("from_name"), str)})
        if class_field is None and not others:  # no class anywhere: predicted mode only
            origins["none"] += 1
            return NO_CLASS
        raise RationaleFileError(
            f"{source}, {where}: missing the class field data {field!r} (fields: {sorted(task[DATA])}), and no "
            f"{control!r} choice in the annotation or a prediction"
            + (f"; the annotation has choices of {others}" if others else "")
            + "; name the Choices control or the data field holding the class with class_field (CLI: --class-field)")
    origins["data"] += 1
    return record_class(task[DATA], field, n_classes, source, where, "data ", class_names)


def label_studio_records(tasks: list, source: str, n_classes: int = 2, class_field: str | None = None,
                         class_names: Sequence[str] | None = None) -> list[SpanRecord]:
    """The checked records of a Label Studio export's tasks: text `data["text"]`, class `task_class`, spans the
    `labels` results of the task's first annotation that is not cancelled. Tasks without such an annotation are
    left out, and extra annotations ignored, both logged, as is where the classes came from."""
    records, unannotated, extra, with_extra, origins = [], [], 0, [], Counter()
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
        spans = []
        for item in _results(kept[0], source, where):
            if not isinstance(item, dict) or item.get("type") != "labels":
                continue  # choices (the class, above), ratings, relations: not spans
            value = item.get("value")
            if not isinstance(value, dict) or not {"start", "end", "labels"} <= set(value) \
                    or not isinstance(value["labels"], list) or not all(isinstance(t, str) for t in value["labels"]):
                raise RationaleFileError(f"{source}, {where}: a 'labels' result needs 'value' with start, end and "
                                         f"labels (a list of names), got {value!r:.120}")
            spans.append(checked_span(value["start"], value["end"], tuple(value["labels"]), body, source, where))
        label = task_class(task, kept[0], source, where, n_classes, class_field, class_names, origins)
        records.append(SpanRecord(record_id(task, "task", number, source, where), body, label, tuple(spans), where))
    if unannotated:
        logger.warning("%s: %d of %d task(s) have no annotation that is not cancelled (%s): left out", source,
                       len(unannotated), len(tasks), _first_few(unannotated))
    if extra:
        logger.warning("%s: %d task(s) have more than one annotation not cancelled (%s): %d extra annotation(s) "
                       "ignored, the first of each task is read", source, len(with_extra), _first_few(with_extra),
                       extra)
    if not records:
        raise RationaleFileError(f"{source}: no examples (no task has an annotation that is not cancelled)")
    logger.info("%s: the class of %d task(s) is the annotator's choice, of %d the prediction's (left as "
                "pre-selected), of %d the data field; %d give none (predicted mode only)", source,
                origins["annotation"], origins["prediction"], origins["data"], origins["none"])
    return records


def _choice(record: SpanRecord, class_names: Sequence[str]) -> dict[str, Any]:
    """The record's class as a result of the class control."""
    return {"from_name": CLASS_CONTROL, "to_name": TEXT, "type": "choices",
            "value": {"choices": [written_class(record.label, class_names)]}}


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
             class_field: str | None = None, tokenizer=None,
             class_names: Sequence[str] | None = None) -> pd.DataFrame:
        records = label_studio_records(file.json_list, file.source, n_classes, class_field, class_names)
        return span_examples(records, file.source, chosen_tags(records, rationale_labels, file.source), tokenizer)

    def write(self, records: Sequence[SpanRecord], class_names: Sequence[str] | None = None) -> str:
        tasks = []
        for record in records:
            data: dict[str, Any] = {TEXT: record.text, ID_FIELD: record.example_id}
            if class_names:  # the options of LABEL_CONFIG's dynamic Choices
                data[CLASSES_FIELD] = [{"value": str(name)} for name in class_names]
            else:
                data[CLASS_FIELD] = record.label
            task: dict[str, Any] = {DATA: data}
            result = [{"from_name": RATIONALE_CONTROL, "to_name": TEXT, "type": "labels",
                       "value": {"start": span.start, "end": span.end, "labels": list(span.tags or (RATIONALE_TAG,))}}
                      for span in record.spans]
            if class_names and not record.spans:  # a text to annotate: the class pre-selected, for the annotator
                task[PREDICTIONS] = [{"result": [_choice(record, class_names)]}]
            elif class_names:
                result.append(_choice(record, class_names))
            if result:
                task[ANNOTATIONS] = [{"result": result}]
            tasks.append(task)
        return json.dumps(tasks, ensure_ascii=False, indent=1) + "\n"
