"""The two modes a rationale set is explained and scored in, and the class each example is explained for.

- `predicted`: every example explained for the class the classifier predicted (what a user of the model sees).
- `gold`: every example explained for the class its human rationale supports (its `label`): the question the human
  marks answer (Eberle et al., EMNLP 2023, explain the gold class). On a correctly predicted example the two classes
  are the same, so a second mode recomputes only the mispredicted examples (`recomputed`) and every score of a
  correct one is shared.

A table of examples says which class each row is explained for in its `explained` column; without one, the
`predicted` class is (`explained_classes`), so every table written before modes existed reads as predicted mode.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

PREDICTED, GOLD = "predicted", "gold"
MODES = (PREDICTED, GOLD)
EXPLAINED = "explained"  # column: the class index a row is explained for
CORRECT_ONLY, ALL_EXAMPLES = "correct", "all"


def check_mode(mode: str, where: str = "mode") -> str:
    if mode not in MODES:
        raise ValueError(f"{where}: unknown mode {mode!r}; known: {list(MODES)}")
    return mode


def explained_classes(rows: pd.DataFrame) -> np.ndarray:
    """The class index each row is explained for: `explained` where the table has it, else `predicted`, else 0 (a
    table of texts with no prediction yet)."""
    for column in (EXPLAINED, "predicted"):
        if column in rows:
            return rows[column].to_numpy().astype(int)
    return np.zeros(len(rows), dtype=int)


def in_mode(examples: pd.DataFrame, mode: str) -> pd.DataFrame:
    """A copy of `examples` (with `label` and `predicted`) whose `explained` column is the class `mode` explains."""
    check_mode(mode)
    out = examples.copy()
    out[EXPLAINED] = out["label" if mode == GOLD else "predicted"].astype(int)
    return out


def recomputed(examples: pd.DataFrame) -> pd.DataFrame:
    """The examples gold mode explains for another class than predicted mode (the mispredicted ones), in gold mode:
    the only ones a second mode recomputes."""
    return in_mode(examples[examples["label"].astype(int) != examples["predicted"].astype(int)], GOLD)


def with_explained(rows: pd.DataFrame) -> pd.DataFrame:
    """`rows` with their `explained` column (`explained_classes`: added where the table has none)."""
    return rows if EXPLAINED in rows else rows.assign(**{EXPLAINED: explained_classes(rows)})


def rows_in_mode(rows: pd.DataFrame, gold_rows: pd.DataFrame, mode: str) -> pd.DataFrame:
    """Per-example rows (signals, token scores: predicted mode) in `mode`: in gold mode the examples of `gold_rows`
    (computed for their gold class, `recomputed`) replace theirs; every row says the class it explains."""
    if check_mode(mode) == PREDICTED:
        return with_explained(rows)
    kept = with_explained(rows[~rows["example_id"].isin(set(gold_rows["example_id"]))])
    return pd.concat([kept, gold_rows], ignore_index=True)


@dataclass(frozen=True)
class TrainingExamples:
    """What a learned explainer is trained on: the training tasks' rationale examples predicted correctly (`correct`,
    the paper's filter) or all of them (`all`), with signals computed for the `predicted` class or for the `gold` one
    (on a correct example the two coincide)."""

    examples: str = CORRECT_ONLY
    signals: str = PREDICTED

    def __post_init__(self):
        if self.examples not in (CORRECT_ONLY, ALL_EXAMPLES):
            raise ValueError(f"training examples: {self.examples!r} is neither {CORRECT_ONLY!r} nor {ALL_EXAMPLES!r}")
        check_mode(self.signals, "training signals")

    @property
    def name(self) -> str:
        """`correct`, `all_predicted` or `all_gold` (on correct examples alone the two classes are one)."""
        return CORRECT_ONLY if self.examples == CORRECT_ONLY else f"{ALL_EXAMPLES}_{self.signals}"
