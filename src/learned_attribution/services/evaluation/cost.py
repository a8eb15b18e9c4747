"""What an explainer costs: throughput as a ratio to a plain classification pass over the same examples, timed in
the same run (the one cost table of the folds, the ExpNet+ variants and the students), and the cost-plausibility
Pareto frontier."""
from __future__ import annotations

import time
from typing import Mapping, NamedTuple, Sequence

import numpy as np
import pandas as pd

from learned_attribution.core.models.runner import predict_proba

FORWARD = "forward"  # the cost table's reference row: a plain classification pass over the same examples


class Timed(NamedTuple):
    """One timed method: how many examples it explained, in how many seconds, and where it ran (optional)."""

    method: str
    n_examples: int
    seconds: float
    ran: str | None = None


def timed_forward(classifier, examples: pd.DataFrame, batch_size: int) -> float:
    """Seconds of a plain classification pass (logits only, the explainers' batches) over `examples`: the
    reference of the cost table's `ratio_to_forward`."""
    started = time.perf_counter()
    predict_proba(classifier.model, list(examples["input_ids"]), batch_size, classifier.tokenizer.pad_token_id)
    return time.perf_counter() - started


def cost_table(rows: Sequence[Timed], forward: Mapping[int, float]) -> pd.DataFrame:
    """The cost table, rows in the order given: examples per second and `ratio_to_forward`, the throughput as a
    ratio to the forward pass timed over the same number of examples (`forward`: example count -> seconds), or over
    the most examples when none was timed at that count. A `ran` column when any row says where it ran."""
    table = pd.DataFrame([{"method": r.method, "n_examples": int(r.n_examples), "seconds": r.seconds,
                           "examples_per_second": r.n_examples / r.seconds if r.seconds else np.nan,
                           **({"ran": r.ran} if any(t.ran is not None for t in rows) else {})} for r in rows])
    largest = max(forward)

    def forward_rate(n: int) -> float:
        count = n if n in forward else largest
        return count / forward[count]

    table["ratio_to_forward"] = table["examples_per_second"] / table["n_examples"].map(forward_rate)
    return table


def pareto_frontier(cost: Sequence[float], quality: Sequence[float]) -> np.ndarray:
    """True where no other point is at least as cheap-to-run (higher `cost` = throughput ratio, faster) and at
    least as good (higher `quality`) and strictly better in one of them."""
    cost, quality = np.asarray(cost, dtype=float), np.asarray(quality, dtype=float)
    dominated = ((cost[None, :] >= cost[:, None]) & (quality[None, :] >= quality[:, None])
                 & ((cost[None, :] > cost[:, None]) | (quality[None, :] > quality[:, None])))
    return ~dominated.any(axis=1)


def cost_plausibility(metrics: pd.DataFrame, cost: pd.DataFrame, ablation: pd.DataFrame | None = None,
                      variant_costs: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per explained method: its throughput as a ratio to a plain forward pass (`cost`), its matched
    AUROC with the 95% interval on the examples it explained (`all`, or the expensive methods' `sample`), and
    whether it is on the Pareto frontier among the methods run on every example. With the ExpNet+ `ablation`
    table and `variant_costs`, every variant follows (family `expnet_plus variant`, on every example; the frontier
    stays the methods': a variant that was not selected is not what the fold deploys)."""
    cost = cost[cost["method"] != FORWARD].set_index("method")
    matched = metrics[metrics["rule"] == "matched"]
    rows = []
    for method in cost.index:
        everywhere = matched[(matched["method"] == method) & (matched["subset"] == "all")]
        on_all = bool(len(everywhere)) and everywhere["n_examples"].iloc[0] == matched.loc[
            matched["subset"] == "all", "n_examples"].max()
        row = everywhere if on_all else matched[(matched["method"] == method) & (matched["subset"] == "sample")]
        if not len(row):
            continue
        rows.append({"method": method, "family": row["family"].iloc[0], "ratio_to_forward": cost.at[method,
                     "ratio_to_forward"], "auroc": row["auroc"].iloc[0], "auroc_low": row["auroc_low"].iloc[0],
                     "auroc_high": row["auroc_high"].iloc[0], "subset": "all" if on_all else "sample"})
    table = pd.DataFrame(rows)
    table["pareto"] = False
    every = table["subset"] == "all"
    table.loc[every, "pareto"] = pareto_frontier(table.loc[every, "ratio_to_forward"], table.loc[every, "auroc"])
    if ablation is None or variant_costs is None:
        return table
    variants = ablation.merge(variant_costs[["variant", "ratio_to_forward"]], on="variant")
    variants = variants.assign(method="ExpNet+ " + variants["variant"], family="expnet_plus variant", subset="all",
                               pareto=False)
    return pd.concat([table, variants[table.columns]], ignore_index=True)
