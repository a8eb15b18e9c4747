"""Texts to annotate written as a rationale file (`learned-attribution suggest`, docs/fewshot.md): each text with
its id and the class the classifier predicts (the class its explainer explains), in a registered format that
`suggest` offers (`registry.annotation_formats`), by that format's writer. The predicted class is written by name
as the default of a class choice the annotator can change (the class the rationale they mark supports), and the
file lists the classifier's classes; the reader then takes the annotator's choice.

    write_annotation_file(picked, "to_annotate.json", "label-studio")   # picked: suggest's frame
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd

from learned_attribution.core.atomic import write_text_atomically
from learned_attribution.core.data.rationales.records import SpanRecord
from learned_attribution.core.data.rationales.registry import FORMATS, annotation_formats, build_format, canonical
from learned_attribution.core.errors import InputError

CLASS_NAMES = "class_names"  # the key of suggest's frame's `attrs` holding the classifier's classes


def check_format(file_format: str, path: str | Path | None = None) -> None:
    """Refuse a format `suggest` does not write, or an output file whose suffix the rationale reader would not read
    as that format (`read_rationale_file`), in one line."""
    name = canonical(file_format)
    offered = ", ".join(annotation_formats())
    if name not in FORMATS:
        raise InputError(f"--format {file_format!r}: unknown; choose one of {offered}")
    if not FORMATS[name].for_annotation:
        raise InputError(f"--format {file_format!r}: a {FORMATS[name].title} file is not written to annotate; "
                         f"choose one of {offered}")
    suffix = FORMATS[name].suffix
    if path is not None and Path(path).suffix != suffix:
        raise InputError(f"--output {path}: a {name} file is read back as {suffix}; name it "
                         f"{Path(path).with_suffix(suffix).name}")


def annotation_file(suggested: pd.DataFrame, file_format: str, class_names: Sequence[str] | None = None) -> str:
    """The texts of `suggested` (columns `id`, `text` and the class to explain, `predicted`: suggest's frame) as a
    file to annotate in `file_format`, with no span marked yet. `class_names` (default: the frame's
    `attrs["class_names"]`, which `suggest` sets) are the classifier's classes in index order; the predicted class
    is written by name as the annotator's changeable choice:

    - `label-studio`: a Label Studio import, a JSON list of tasks `{"data": {"text", "source_id", "classes"},
      "predictions": [...]}`, the predicted class pre-selected in the Choices control `class` of
      `label_studio.LABEL_CONFIG` (its options: `data["classes"]`);
    - `doccano`: a doccano JSONL import for an Intent Detection and Slot Filling project, `{"text", "entities": [],
      "cats": [predicted name], "classes", "source_id"}` a line;
    - `spans`: span JSONL, `{"id", "text", "spans": [], "label": predicted name, "classes"}` a line, for spans
      added by hand or a script (the class edited in `label`)."""
    check_format(file_format)
    names = class_names if class_names is not None else suggested.attrs.get(CLASS_NAMES)
    if not names:
        raise InputError("the classifier's class names are needed to write a file to annotate (the annotator chooses "
                         "among them): pass class_names, or write suggest's own frame (it carries them)")
    records = [SpanRecord(str(row.id), row.text, int(row.predicted)) for row in suggested.itertuples(index=False)]
    outside = sorted({record.label for record in records} - set(range(len(names))))
    if outside:
        raise InputError(f"predicted class(es) {outside} outside the {len(names)} class names {list(names)}")
    return build_format(file_format).write(records, class_names=[str(name) for name in names])


def write_annotation_file(suggested: pd.DataFrame, path: str | Path, file_format: str,
                          class_names: Sequence[str] | None = None) -> Path:
    """`annotation_file` written to `path`, complete or not at all (`core.atomic`)."""
    path = Path(path)
    check_format(file_format, path)
    write_text_atomically(path, annotation_file(suggested, file_format, class_names))
    return path
