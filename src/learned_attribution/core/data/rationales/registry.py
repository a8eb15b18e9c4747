"""Rationale file formats by name. A format is one module of this package holding a `RationaleFormat`: how its files
are recognised (`claims`), its reader and its writer, registered with `@register(name)` the way explainers are
(`core/explainers/base.py`). `build_format(name)` takes any spelling of a name: case, spaces, hyphens and
underscores aside, so "label studio", "Label Studio" and "label-studio" are one format. Which format reads a given
file is decided in one place, `sniff.py`.

A new format is one module (a registered subclass, imported by the package's `__init__`) plus its test fixtures;
tests/data/test_rationale_formats.py registers one inside a test."""
from __future__ import annotations

from typing import Callable, ClassVar, Sequence

import pandas as pd

from learned_attribution.core.data.rationales.records import SourceFile, SpanRecord
from learned_attribution.core.errors import InputError


class RationaleFormat:
    """Base class: subclasses set the class variables below and implement `claims`, `read` and `write`."""

    name: ClassVar[str] = ""
    title: ClassVar[str] = ""  # in messages: "read as a <title> file"
    summary: ClassVar[str] = ""  # the file in a few words, for help texts
    suffix: ClassVar[str] = ""  # what a written file is named, to be read back as this format
    # The field holding the class (a name or an index) by default, when the user may name another (`class_field`);
    # None: the format has no such choice and `class_field` is ignored.
    class_field: ClassVar[str | None] = None
    # Spans carry tag names (an annotation tool's labels): `rationale_labels` picks the rationale ones.
    tagged: ClassVar[bool] = False
    # `suggest` offers it (a file of texts an annotator marks); a file no annotation tool marks is not offered.
    for_annotation: ClassVar[bool] = True
    # What a JSONL record needs to be of this format, for the message about a record with a text and no spans.
    record_hint: ClassVar[str] = ""

    def claims(self, file: SourceFile) -> bool:
        """Whether `file` is of this format (read cheaply: its suffix, first record or top-level list)."""
        raise NotImplementedError

    def read(self, file: SourceFile, n_classes: int = 2, *, rationale_labels: Sequence[str] | None = None,
             class_field: str | None = None, tokenizer=None,
             class_names: Sequence[str] | None = None) -> pd.DataFrame:
        """The file's examples in the project's schema (`records.example_frame`); every fault a
        `RationaleFileError` naming the file and the line, task or row. A class is read by name or index among
        the classifier's `class_names` (`records.class_value`; without names: an integer in 0..n_classes-1)."""
        raise NotImplementedError

    def write(self, records: Sequence[SpanRecord], class_names: Sequence[str] | None = None) -> str:
        """The text of a file of this format holding `records` (their ids, texts, classes and spans) in the
        format's own field names. With the classifier's `class_names` (a file to annotate), a record's class is
        written by name, where the annotation tool lets the annotator change it, and the file lists the classes;
        without them, as an index."""
        raise NotImplementedError


FORMATS: dict[str, type[RationaleFormat]] = {}


def canonical(name: str) -> str:
    """A format name as registered: lower case, words joined by hyphens ("Label Studio" -> "label-studio")."""
    return "-".join(str(name).lower().replace("_", " ").replace("-", " ").split())


def register(name: str) -> Callable[[type[RationaleFormat]], type[RationaleFormat]]:
    """Class decorator: make a rationale format available to `build_format(name)` and to the sniffing."""

    def add(cls: type[RationaleFormat]) -> type[RationaleFormat]:
        if name != canonical(name):
            raise ValueError(f"rationale format {name!r}: register it as {canonical(name)!r}")
        if name in FORMATS:
            raise ValueError(f"rationale format {name!r} registered twice")
        cls.name = name
        FORMATS[name] = cls
        return cls

    return add


def build_format(name: str) -> RationaleFormat:
    """The format registered as `name`, in any spelling (`canonical`)."""
    key = canonical(name)
    if key not in FORMATS:
        raise InputError(f"unknown rationale format {name!r}; registered: {', '.join(FORMATS)}")
    return FORMATS[key]()


def annotation_formats() -> list[str]:
    """The registered formats `suggest` writes texts to annotate in, in the order registered."""
    return [name for name, cls in FORMATS.items() if cls.for_annotation]
