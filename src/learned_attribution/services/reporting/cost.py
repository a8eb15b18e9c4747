"""The results record's tables of what things cost: each method's throughput (the cost benchmark's table, and the
default and base-size runs side by side), cost against plausibility per fold, the main job's time per stage, and the
served model under load."""
from __future__ import annotations

import pandas as pd

from learned_attribution.core.explainers.learned import EXPNET_PLUS
from learned_attribution.core.tasks import held_out_task

from ..evaluation.cost import cost_plausibility
from .tables import markdown_table, table_lines


def throughput_comparison_table(small: pd.DataFrame, base: pd.DataFrame) -> str:
    """Markdown: every method's throughput as a ratio to a plain forward pass of its own encoder, MiniLM and
    MPNet-base side by side (each from its own one-run benchmark), and the forward pass's examples/s."""
    def ratios(table: pd.DataFrame) -> pd.Series:
        return table.drop_duplicates("method").set_index("method")["ratio_to_forward"]

    joined = pd.DataFrame({"MiniLM ratio to forward": ratios(small), "MPNet-base ratio to forward": ratios(base)})
    joined = joined.sort_values("MPNet-base ratio to forward", ascending=False, na_position="last")
    rates = {name: table.set_index("method").at["forward_all", "examples_per_s"]
             for name, table in (("MiniLM", small), ("MPNet-base", base)) if "forward_all" in set(table["method"])}
    note = ", ".join(f"{name} {rate:.1f} examples/s" for name, rate in rates.items())
    return f"Forward pass: {note}.\n\n" + markdown_table(joined.reset_index(names="method"), digits=3)


def pareto_table(metrics: pd.DataFrame, costs: dict[str, pd.DataFrame]) -> str:
    """Markdown: per fold, the Pareto frontier of throughput (ratio to a forward pass) against AUROC among the
    methods run on every example, ExpNet+'s point, and the baselines both cheaper and more plausible."""
    lines = []
    for fold, rows in metrics.groupby("fold", sort=False):
        task = held_out_task(fold)
        if task not in costs:
            continue
        points = cost_plausibility(rows, costs[task])
        points = points[points["subset"] == "all"]
        if EXPNET_PLUS not in set(points["method"]):
            continue
        plus = points[points["method"] == EXPNET_PLUS].iloc[0]
        frontier = points[points["pareto"]].sort_values("ratio_to_forward", ascending=False)
        better = points[(points["family"] != "learned") & (points["ratio_to_forward"] > plus["ratio_to_forward"])
                        & (points["auroc"] > plus["auroc"])]

        def named(frame: pd.DataFrame) -> str:
            return ", ".join(f"{r.method} ({r.ratio_to_forward:.2f}x, {r.auroc:.3f})"
                             for r in frame.itertuples()) or "none"

        lines.append([task, named(frontier), f"{plus['ratio_to_forward']:.2f}x, {plus['auroc']:.3f}", named(better)])
    return table_lines(["held-out task", "on the frontier (cheapest first: ratio to a forward pass, AUROC)", "ExpNet+",
                        "baselines both cheaper and more plausible than ExpNet+"], lines)


def stage_walls(timings: pd.DataFrame) -> pd.Series:
    """Each node's share of the run's wall time: from the end of the node before it (the run's start for the first)
    to its own end, so loading its inputs and the hooks between nodes count too; the shares add up to the wall time
    (first start to last end). Without start and end columns (an older timings file): NaN."""
    if not {"start_s", "end_s"} <= set(timings.columns):
        return pd.Series(float("nan"), index=timings.index)
    ordered = timings.sort_values("end_s")
    previous = ordered["end_s"].shift(1).fillna(ordered["start_s"].min())
    return (ordered["end_s"] - previous).reindex(timings.index)


def stage_table(timings: pd.DataFrame) -> str:
    """Markdown: per stage of the main job's last `kedro run` (node_timings/crosstask.csv) its wall time (its nodes'
    shares of the run's wall time, `stage_walls`) beside the sum of its nodes' own times (outputs saved included),
    the run's totals, and the kernels it ran on."""
    walls = stage_walls(timings)
    rows = [{"stage": stage, "wall minutes": walls[nodes.index].sum() / 60, "node minutes": nodes["seconds"].sum() / 60}
            for stage, nodes in timings.groupby("stage", sort=False)]
    rows.append({"stage": "**total**", "wall minutes": walls.sum() / 60, "node minutes": timings["seconds"].sum() / 60})
    kernels = timings["kernels"].dropna().iloc[0] if "kernels" in timings and timings["kernels"].notna().any() else ""
    return "\n".join([*([f"Kernels: {kernels}.", ""] if kernels else []),
                      markdown_table(pd.DataFrame(rows), digits=1)])


def throughput_table(throughput: pd.DataFrame) -> str:
    """Markdown of benchmarks/attribution_throughput.csv: every method's examples/s and ratio to a forward pass."""
    columns = [c for c in ("method", "family", "batch_size", "examples_per_s", "ratio_to_forward",
                           "examples_per_s_batch1", "ratio_to_forward_batch1", "api_one_text_s", "captum_one_text_s",
                           "model_calls_per_example") if c in throughput.columns]
    shown = throughput[columns].sort_values("ratio_to_forward", ascending=False)
    return markdown_table(shown.reset_index(drop=True), digits=3)


def serving_table(load: pd.DataFrame) -> str:
    columns = [c for c in ("clients", "texts_per_request", "requests", "errors", "p50_s", "p95_s", "texts_per_s")
               if c in load.columns]
    return markdown_table(load[columns].reset_index(drop=True), digits=3)
