"""The parse of one parameter block: every key required, none unknown, and each error naming `parameter
<block>.<key>`."""
from __future__ import annotations

from dataclasses import fields
from typing import Any, Mapping, Sequence


def block(values: Mapping[str, Any] | None, where: str, required: Sequence[str],
          optional: Sequence[str] = ()) -> dict[str, Any]:
    """`values` as a dict, once every key of `required` is there and no key outside `required` and `optional` is;
    the error names `parameter <where>.<key>`."""
    if values is None or not isinstance(values, Mapping):
        raise ValueError(f"parameter {where} must be a mapping of {list(required)}, got {values!r}")
    values = dict(values)
    unknown = sorted(set(values) - set(required) - set(optional))
    if unknown:
        raise ValueError(f"unknown parameter(s) {', '.join(f'{where}.{k}' for k in unknown)}; expected "
                         f"{sorted([*required, *optional])}")
    missing = [key for key in required if key not in values]
    if missing:
        raise ValueError(f"parameter(s) {', '.join(f'{where}.{k}' for k in missing)} missing (conf/base)")
    return values


def positive_int(value: Any, where: str, minimum: int = 1, none: bool = False) -> int | None:
    """`value` as an int of at least `minimum` (None allowed with `none`); the error names `parameter <where>`."""
    if value is None and none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        allowed = " or null" if none else ""
        raise ValueError(f"parameter {where}={value!r}: must be an integer of at least {minimum}{allowed}")
    return int(value)


def dataclass_from(cls, values: Mapping[str, Any], where: str, **fixed):
    """`cls(**values, **fixed)` with every field of `cls` but `fixed` required in `values` (errors name the
    parameter); a value the dataclass refuses is reported under `where`."""
    names = [f.name for f in fields(cls) if f.name not in fixed]
    values = block(values, where, names)
    try:
        return cls(**values, **fixed)
    except (TypeError, ValueError) as error:
        raise ValueError(f"parameter {where}: {error}") from error
