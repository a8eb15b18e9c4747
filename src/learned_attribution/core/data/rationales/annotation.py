"""Texts to annotate written as a rationale file (`learned-attribution suggest`, docs/fewshot.md): each text with
its id and the class the classifier predicts (the class its explainer explains; an annotator marks the words that
support it), in a registered format that `suggest` offers (`registry.annotation_formats`), by that format's writer.

    write_annotation_file(picked, "to_annotate.json", "label-studio")   # picked: suggest's frame
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from learned_attribution.core.atomic import write_text_atomically
from learned_attribution.core.data.rationales.records import SpanRecord
from learned_attribution.core.data.rationales.registry import FORMATS, annotation_formats, build_format, canonical
from learned_attribution.core.errors import InputError


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


def annotation_file(suggested: pd.DataFrame, file_format: str) -> str:
    """The texts of `suggested` (columns `id`, `text` and the class to explain, `predicted`: suggest's frame) as a
    file to annotate in `file_format`, with no span marked yet:

    - `label-studio`: a Label Studio import, a JSON list of tasks `{"data": {"text", "label", "source_id"}}`;
      `data["label"]` is the class field the reader takes from the export by default;
    - `doccano`: a doccano JSONL import, `{"text", "label": [], "class", "source_id"}` a line (spans go into
      `label`; `class` is the reader's default class field);
    - `spans`: span JSONL, `{"id", "text", "spans": [], "label"}` a line, for spans added by hand or a script."""
    check_format(file_format)
    records = [SpanRecord(row.id, row.text, int(row.predicted)) for row in suggested.itertuples(index=False)]
    return build_format(file_format).write(records)


def write_annotation_file(suggested: pd.DataFrame, path: str | Path, file_format: str) -> Path:
    """`annotation_file` written to `path`, complete or not at all (`core.atomic`)."""
    path = Path(path)
    check_format(file_format, path)
    write_text_atomically(path, annotation_file(suggested, file_format))
    return path
