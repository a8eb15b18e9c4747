"""`params:baseline_record`: every baseline on every example, in parts committed to the record (services/record)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from .blocks import block, positive_int
from .crosstask import ScoringSettings


@dataclass(frozen=True)
class RecordSettings:
    """Which methods the record runs on every example (name -> settings), in parts of `part_size` examples, and
    this invocation's minutes (None: no limit)."""

    methods: dict[str, dict[str, Any]]
    part_size: int
    minutes: float | None


def record_settings(baseline_record: Mapping[str, Any], scoring: ScoringSettings) -> RecordSettings:
    """`params:baseline_record` against the folds' scoring protocol: `methods` names baselines of
    `crosstask.baselines` (null: the ones the main job runs on its sample only, `crosstask.expensive`), with their
    settings there."""
    values = block(baseline_record, "baseline_record", ("methods", "part_size", "minutes"))
    names = list(scoring.expensive) if values["methods"] is None else [str(m) for m in values["methods"]]
    unknown = [name for name in names if name not in scoring.baselines]
    if unknown:
        raise ValueError(f"parameter baseline_record.methods names {unknown}, which are not in "
                         f"crosstask.baselines ({list(scoring.baselines)})")
    minutes = values["minutes"]
    if minutes is not None and (isinstance(minutes, bool) or not isinstance(minutes, (int, float)) or minutes <= 0):
        raise ValueError(f"parameter baseline_record.minutes={minutes!r}: a positive number of minutes, or null "
                         "(no limit)")
    return RecordSettings({name: dict(scoring.baselines[name]) for name in names},
                          positive_int(values["part_size"], "baseline_record.part_size"),
                          None if minutes is None else float(minutes))
