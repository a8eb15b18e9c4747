"""Synthetic signal tables for the learned-explainer tests: token rows whose `informative` column carries the
rationale label, with a per-task offset and scale (imported by the tests of this folder)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd


def synthetic_task(task: str, n_examples: int, seed: int, columns: Sequence[str], informative: int = 0,
                   flip: bool = False, shift: float | None = None) -> pd.DataFrame:
    """Token rows of `n_examples` examples (4-9 tokens, a third of them rationale): column `informative` carries the
    label plus noise (its complement with `flip`), every column scaled by 1 + shift % 3 and offset by `shift`
    (default: the seed)."""
    shift = seed if shift is None else shift
    rng = np.random.default_rng(seed)
    rows = []
    for e in range(n_examples):
        n = int(rng.integers(4, 10))
        labels = np.zeros(n, dtype=int)
        labels[rng.choice(n, size=max(1, n // 3), replace=False)] = 1
        values = rng.normal(size=(n, len(columns)))
        values[:, informative] += 1.5 * (1 - labels if flip else labels)
        values = values * (1 + shift % 3) + shift  # per-task scale and offset
        for j in range(n):
            rows.append({"example_id": f"{task}-{e}", "task": task, "position": j + 1, "token_label": labels[j],
                         **dict(zip(columns, values[j]))})
    return pd.DataFrame(rows)
