"""Faithfulness of every method's scores (ERASER comprehensiveness and sufficiency, `core.models.faithfulness`):
the one loop over methods, in process or as Dask tasks, and its summary with bootstrap intervals."""
from __future__ import annotations

from typing import Mapping, NamedTuple, Sequence

import numpy as np
import pandas as pd

from learned_attribution.core.models.faithfulness import faithfulness
from learned_attribution.core.metrics.plausibility import bootstrap_ci

from ..distributed import DaskSettings, dask_client, faithfulness_on_dask


class Scored(NamedTuple):
    """One method's scores of some examples, in the order they are scored: ids, token ids, scores, explained
    class."""

    example_ids: Sequence[str]
    input_ids: Sequence[Sequence[int]]
    scores: Sequence[np.ndarray]
    target: Sequence[int]


def scored(table: pd.DataFrame, input_ids: Mapping[str, Sequence[int]], target: Mapping[str, int] | None = None
           ) -> Scored:
    """A token-score table's rows (`example_id`, `scores`, and `predicted` unless `target` gives each example's
    class) with their examples' token ids."""
    ids = list(table["example_id"])
    classes = table["predicted"].tolist() if target is None else [int(target[i]) for i in ids]
    return Scored(ids, [list(input_ids[i]) for i in ids], [np.asarray(s, dtype=float) for s in table["scores"]],
                  classes)


def faithfulness_rows(classifier, methods: Mapping[str, Scored], fractions: Sequence[float], batch_size: int,
                      dask: DaskSettings | None = None) -> pd.DataFrame:
    """Per method and example: comprehensiveness and sufficiency (AOPC over `fractions`, and per fraction) for the
    explained class, in process or as Dask tasks when `dask` is set; columns `method`, `example_id`, then the
    metric's."""
    tables = []
    if dask is None:  # one call for every method: a sequence several of them remove the same tokens from runs once
        table = faithfulness(classifier.model, [ids for rows in methods.values() for ids in rows.input_ids],
                             [scores for rows in methods.values() for scores in rows.scores],
                             [target for rows in methods.values() for target in rows.target],
                             fractions=tuple(fractions), batch_size=batch_size,
                             pad_token_id=classifier.tokenizer.pad_token_id)
        starts = np.cumsum([0, *(len(rows.example_ids) for rows in methods.values())])
        for (method, rows), start, end in zip(methods.items(), starts[:-1], starts[1:]):
            tables.append(_labelled(table.iloc[start:end].assign(example=np.arange(end - start)), method, rows))
        return pd.concat(tables, ignore_index=True)
    with dask_client(dask) as client:
        for method, rows in methods.items():
            tables.append(_labelled(faithfulness_on_dask(client, classifier, rows.input_ids, rows.scores, rows.target,
                                                         tuple(fractions), batch_size, dask), method, rows))
    return pd.concat(tables, ignore_index=True)


def _labelled(table: pd.DataFrame, method: str, rows: Scored) -> pd.DataFrame:
    """A method's faithfulness rows with its name and example ids first."""
    table = table.reset_index(drop=True)
    table.insert(0, "method", method)
    table.insert(1, "example_id", np.asarray(rows.example_ids))
    return table


def faithfulness_summary(rows: pd.DataFrame, n_boot: int, seed: int) -> pd.DataFrame:
    """Per method (in the rows' order): examples, mean comprehensiveness and sufficiency with bootstrap 95%
    intervals."""
    out = []
    for method, table in rows.groupby("method", sort=False):
        row = {"method": method, "n_examples": len(table)}
        for metric in ("comprehensiveness", "sufficiency"):
            row[metric] = float(table[metric].mean())
            row[f"{metric}_low"], row[f"{metric}_high"] = bootstrap_ci(table[metric].to_numpy(), n_boot, seed)
        out.append(row)
    return pd.DataFrame(out)
