"""A classifier's class given by name or by index: the one rule every reader of a class follows (a rationale file's
class field, `explain(target=...)`), so that `toxic`, `1` and `"1"` mean the same class everywhere.

    resolve_class("toxic", ["normal", "toxic"], "my.jsonl, line 3: 'label'")   # 1
    resolve_class(1, None, "my.jsonl, line 3: 'label'", n_classes=2)          # 1: no names, integers only

The rules, in order:
- an integer (not a bool) is an index: negative or beyond the last class is refused;
- a string that equals a class name exactly (case included) is that class: the name wins over a number, so a
  classifier whose classes are named "0", "1" reads "1" as the class named "1";
- otherwise a string of digits is an index;
- anything else is refused, listing the classifier's classes with a near miss suggested ("toxc": did you mean
  'toxic'?); names match exactly, so "Toxic" is refused for "toxic", with the suggestion.
A classifier with transformers' default names (LABEL_0, LABEL_1, ...) therefore takes "LABEL_1", 1 and "1" alike.
Without class names (`class_names=None`) only integers are classes, in 0..n_classes-1.

Each refusal is one line that starts with `where`: the file, row and field (or the argument) that holds the value.
"""
from __future__ import annotations

import difflib
import numbers
import re
from typing import Any, Mapping, Sequence

from learned_attribution.core.errors import InputError

NO_CLASS = -1  # a rationale whose file gives no class: scored in predicted mode only (core/data/modes.py)
DIGITS = re.compile(r"[0-9]+")  # ASCII digits only: str.isdigit takes superscripts and other scripts' digits


def class_names_of(id2label: Mapping[Any, Any] | None, n_classes: int) -> tuple[str, ...] | None:
    """A classifier's class names in index order, from its config's `id2label` (keys ints, or their strings as a
    JSON config holds them); None when it does not name every class 0..n_classes-1."""
    if not id2label:
        return None
    by_index = {int(key): str(name) for key, name in id2label.items()}
    if sorted(by_index) != list(range(n_classes)):
        return None
    return tuple(by_index[index] for index in range(n_classes))


def describe_classes(class_names: Sequence[str]) -> str:
    """The classes as messages list them: `0 'normal', 1 'toxic'`."""
    return ", ".join(f"{index} {name!r}" for index, name in enumerate(class_names))


def resolve_class(value: Any, class_names: Sequence[str] | None, where: str, *, n_classes: int | None = None,
                  error: type[Exception] = InputError) -> int:
    """The index of the class `value` names (the rules above) among `class_names` (in index order: a classifier's
    `id2label` values); without names, `value` must be an integer in 0..n_classes-1. A refusal is `error` (an
    `InputError` by default; the rationale readers raise their `RationaleFileError`), one line starting with
    `where`."""
    if class_names is not None:
        class_names = [str(name) for name in class_names]
        if len(set(class_names)) != len(class_names):
            raise ValueError(f"class names must be unique, got {class_names}")
        n_classes = len(class_names)
    if n_classes is None or n_classes < 1:
        raise ValueError(f"resolve_class: give the class names or a positive n_classes, got {n_classes!r}")
    index = _index(value, class_names)
    if index is not None and 0 <= index < n_classes:
        return index
    if class_names is None:
        hint = " (a class by name needs the classifier's class names)" if isinstance(value, str) else ""
        raise error(f"{where} must be an integer class in 0..{n_classes - 1}, got {value!r}{hint}")
    message = (f"{where} must be a class name or index, got {value!r}; the classifier's classes: "
               f"{describe_classes(class_names)}")
    if isinstance(value, str) and index is None:
        near = _near_miss(value, class_names)
        if near is not None:
            message += f"; did you mean {near!r}? (names match exactly, case included)"
    raise error(message)


def _index(value: Any, class_names: Sequence[str] | None) -> int | None:
    """The index `value` reads as (perhaps out of range), or None when it is not a class at all."""
    if isinstance(value, bool) or (hasattr(value, "dtype") and getattr(value.dtype, "kind", "") == "b"):
        return None  # JSON true/false load as bool, a subclass of int: never a class
    if isinstance(value, numbers.Integral):  # numpy integers too (a table column, an argmax)
        return int(value)
    if not isinstance(value, str) or class_names is None:
        return None
    if value in class_names:
        return class_names.index(value)
    return int(value) if DIGITS.fullmatch(value) else None


def _near_miss(value: str, class_names: Sequence[str]) -> str | None:
    """The class name `value` most likely means: the same name in another case, else difflib's closest."""
    folded = {name.casefold(): name for name in class_names}
    if value.casefold() in folded:
        return folded[value.casefold()]
    close = difflib.get_close_matches(value.casefold(), list(folded), n=1, cutoff=0.6)
    return folded[close[0]] if close else None
