"""The project's Kedro pipelines (one package each: nodes.py, pipeline.py), `bind`, the one way a template
fixes a node function's namespace-specific arguments, and `token_table`, the one way a node reads a task's token
rows from their Parquet parts."""
from functools import partial, update_wrapper
from typing import Callable

import pandas as pd

from learned_attribution.core.data.modes import rows_in_mode

Parts = dict[str, Callable[[], pd.DataFrame]]  # a partitioned dataset's parts, loaded on demand


def bind(function, **fixed):
    """`function` with the keyword arguments `fixed` given, keeping its name and docstring (Kedro and kedro-viz
    show them)."""
    bound = partial(function, **fixed)
    update_wrapper(bound, function)
    return bound


def token_table(parts: Parts) -> pd.DataFrame:
    """A task's token rows from its partitions, in part order."""
    return pd.concat([load() for _, load in sorted(parts.items())], ignore_index=True)


def training_pairs(training: tuple) -> list[tuple[pd.DataFrame, pd.DataFrame]]:
    """Each training task's (signal table, gold-class signal rows), from `training` given flat as each task's signal
    parts followed by its gold-class signal rows."""
    if len(training) % 2:
        raise ValueError(f"training signals come in pairs (signal parts, gold-class signals), got {len(training)} "
                         "inputs")
    return [(token_table(training[i]), training[i + 1]) for i in range(0, len(training), 2)]


def tables_in_mode(training: tuple, mode: str) -> list[pd.DataFrame]:
    """Each training task's signal table in `mode` (`modes.rows_in_mode`), from `training` as `training_pairs`
    reads it."""
    return [rows_in_mode(signals, gold, mode) for signals, gold in training_pairs(training)]
