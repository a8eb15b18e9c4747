"""Markdown tables: one renderer of rows, values with their intervals, and the paper's reference numbers."""
from __future__ import annotations

from typing import Sequence

import pandas as pd

# Paper reference (bert-base, held-out task, token F1), SPEC §9.
PAPER_REFERENCE = {
    "sst2": {"expnet_f1": 0.398, "best_baseline": "gae", "best_baseline_f1": 0.350},
    "cola": {"expnet_f1": 0.468, "best_baseline": "grad_cam", "best_baseline_f1": 0.356},
    "hatexplain": {"expnet_f1": 0.473, "best_baseline": "grad_cam", "best_baseline_f1": 0.396},
}


def interval_text(row, metric: str) -> str:
    """`value [low, high]` of `metric` in a row with `<metric>_low` / `<metric>_high` (empty when the value is NaN)."""
    if pd.isna(row[metric]):
        return ""
    return f"{row[metric]:.3f} [{row[metric + '_low']:.3f}, {row[metric + '_high']:.3f}]"


def table_lines(columns: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub Markdown table of `rows` (each a sequence of cells, shown with `str`) under `columns`."""
    header = "| " + " | ".join(map(str, columns)) + " |"
    rule = "|" + "|".join("---" for _ in columns) + "|"
    return "\n".join([header, rule, *("| " + " | ".join(map(str, row)) + " |" for row in rows)])


def markdown_table(frame: pd.DataFrame, digits: int = 3) -> str:
    """A frame as a GitHub Markdown table, floats at `digits` decimals (empty where missing)."""
    formatted = frame.copy()
    for column in formatted.columns:
        if pd.api.types.is_float_dtype(formatted[column]):
            formatted[column] = formatted[column].map(lambda v: "" if pd.isna(v) else f"{v:.{digits}f}")
    return table_lines(list(formatted.columns), list(formatted.itertuples(index=False)))


def with_intervals(table: pd.DataFrame, metrics: Sequence[str], keys: Sequence[str] = ("method", "n_examples")
                   ) -> pd.DataFrame:
    """`keys` of `table` and each of `metrics` as `value [low, high]` (`interval_text`)."""
    if not len(table):
        return table
    shown = table[list(keys)].copy()
    for metric in metrics:
        shown[metric] = table.apply(interval_text, axis=1, metric=metric)
    return shown


def comparison(ours: pd.Series, best: pd.Series, metric: str, name: str) -> str:
    """Whether `ours` is above `best` on `metric`, and whether their intervals separate."""
    if ours[f"{metric}_low"] > best[f"{metric}_high"]:
        return f"{name} above, intervals apart"
    if ours[f"{metric}_high"] < best[f"{metric}_low"]:
        return f"{name} below, intervals apart"
    return f"{name} {'above' if ours[metric] > best[metric] else 'below'} (intervals overlap)"
