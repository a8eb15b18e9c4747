"""The charts people look at: per-method bars with intervals and floors, cost against plausibility and
faithfulness with the Pareto frontier, and the ExpNet+ ablation."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ..evaluation.cost import pareto_frontier  # noqa: E402

def metrics_bar_chart(metrics: pd.DataFrame, title: str) -> plt.Figure:
    """F1 (matched budget) and AUROC per method with 95% intervals; floors as dashed lines."""
    rows = metrics[(metrics["subset"] == "all") & (metrics["rule"].isin(["matched"]))
                   & (metrics["family"] != "floor")].sort_values("auroc")
    floors = metrics[(metrics["subset"] == "all") & (metrics["family"] == "floor")].set_index("method")
    figure, axes = plt.subplots(1, 2, figsize=(12, 0.35 * len(rows) + 2), sharey=True)
    for axis, metric in zip(axes, ("f1", "auroc")):
        values = rows[metric].to_numpy()
        errors = np.vstack([values - rows[f"{metric}_low"].to_numpy(), rows[f"{metric}_high"].to_numpy() - values])
        colors = ["tab:red" if family == "learned" else "tab:blue" for family in rows["family"]]
        axis.barh(rows["method"], values, xerr=np.abs(errors), color=colors, capsize=2)
        for floor, style in (("all_tokens", "--"), ("random", ":")):
            if floor in floors.index:
                axis.axvline(floors.at[floor, metric], color="black", linestyle=style, label=f"floor: {floor}")
        axis.set_xlabel(f"{metric} ({'matched budget' if metric == 'f1' else 'per example'}), 95% CI")
        axis.legend(loc="lower right", fontsize=8)
    figure.suptitle(title)
    figure.tight_layout()
    return figure


def cost_plausibility_chart(points: pd.DataFrame, title: str) -> plt.Figure:
    """Throughput (ratio to a plain forward pass) against AUROC with its 95% interval, one point per method
    (`evaluation.cost_plausibility`), the Pareto frontier of the methods run on every example as a line; hollow
    points: AUROC on the expensive methods' sample only; diamonds: the ExpNet+ candidates of the fold's selection
    (named in the legend; the selected one is the red `expnet_plus` point). Left: every method (log scale); right:
    the single-pass methods (ratio >= 0.2), where they crowd."""
    figure, axes = plt.subplots(1, 2, figsize=(15, 5.5), gridspec_kw={"width_ratios": [1, 1.3]})
    variants = points[points["family"] == "expnet_plus variant"]
    shades = plt.cm.viridis(np.linspace(0.1, 0.9, max(len(variants), 1)))
    colours = dict(zip(variants["method"], shades))
    zoom = points[points["ratio_to_forward"] >= 0.2]
    for axis, shown in ((axes[0], points), (axes[1], zoom)):
        for row in shown.itertuples():
            variant = row.family == "expnet_plus variant"
            color = colours[row.method] if variant else "tab:red" if row.family in ("learned", "amortized") else \
                "tab:blue"
            axis.errorbar(row.ratio_to_forward, row.auroc,
                          yerr=[[row.auroc - row.auroc_low], [row.auroc_high - row.auroc]], fmt="D" if variant else "o",
                          color=color, mfc=color if row.subset == "all" else "white", capsize=2, ms=5 if variant else 6,
                          label=row.method.removeprefix("ExpNet+ ") if variant and axis is axes[1] else None)
            if not variant:
                axis.annotate(row.method, (row.ratio_to_forward, row.auroc), textcoords="offset points", xytext=(5, 3),
                              fontsize=7)
        front = shown[shown["pareto"]].sort_values("ratio_to_forward")
        axis.plot(front["ratio_to_forward"], front["auroc"], color="black", linestyle="--", linewidth=1, marker="o",
                  ms=13, mfc="none", label="Pareto frontier (methods run on every example)" if axis is axes[0] else None)
        axis.axvline(1.0, color="grey", linestyle=":", linewidth=1,
                     label="a plain forward pass" if axis is axes[0] else None)
        axis.set_ylabel("AUROC per example (matched), 95% CI")
    axes[0].set_xscale("log")
    axes[0].set_xlabel("throughput, ratio to a plain forward pass (log; right = cheaper)")
    axes[1].set_xlabel("throughput, ratio to a plain forward pass (single-pass methods)")
    axes[0].legend(loc="lower left", fontsize=8)
    if len(variants):
        axes[1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, title="ExpNet+ candidates",
                       title_fontsize=7)
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    return figure


def cost_faithfulness_chart(points: pd.DataFrame, title: str) -> plt.Figure:
    """Throughput (ratio to a plain forward pass, log scale) against ERASER comprehensiveness AOPC (higher: the
    classifier needs the tokens the method ranks first), one point per method, the amortized student
    and the learned explainers in red, and the methods on the Pareto frontier of the two joined."""
    figure, axis = plt.subplots(figsize=(9, 5.5))
    for row in points.itertuples():
        colour = "tab:red" if row.family in ("learned", "amortized") else "tab:blue"
        axis.plot(row.ratio_to_forward, row.comprehensiveness, "o", color=colour, ms=6)
        axis.annotate(row.method, (row.ratio_to_forward, row.comprehensiveness), textcoords="offset points",
                      xytext=(5, 3), fontsize=7)
    front = points[pareto_frontier(points["ratio_to_forward"], points["comprehensiveness"])]
    front = front.sort_values("ratio_to_forward")
    axis.plot(front["ratio_to_forward"], front["comprehensiveness"], color="black", linestyle="--", linewidth=1,
              label="Pareto frontier")
    axis.axvline(1.0, color="grey", linestyle=":", linewidth=1, label="a plain forward pass")
    axis.set_xscale("log")
    axis.set_xlabel("throughput, ratio to a plain forward pass (log; right = cheaper)")
    axis.set_ylabel("comprehensiveness AOPC (higher = more faithful)")
    axis.legend(loc="lower left", fontsize=8)
    axis.set_title(title, fontsize=10)
    figure.tight_layout()
    return figure


def ablation_chart(ablation: pd.DataFrame) -> plt.Figure:
    """Per fold: AUROC and matched-budget F1 of every ExpNet+ candidate (the one the selection rule picks in red) and
    of the main job's ExpNet+ (green) with 95% intervals, the best baseline's as a solid line and the all-tokens
    floor's F1 as a dashed line."""
    folds = list(dict.fromkeys(ablation["fold"]))
    figure, axes = plt.subplots(len(folds), 2, figsize=(13, 3.2 * len(folds)), squeeze=False)
    for row, fold in enumerate(folds):
        rows = ablation[ablation["fold"] == fold]
        variants = rows[~rows["description"].isin(["best baseline", "floor"])]
        baseline = rows[rows["description"] == "best baseline"]
        floor = rows[rows["variant"].str.startswith("all_tokens")]
        for axis, metric in zip(axes[row], ("auroc", "f1_matched")):
            values = variants[metric].to_numpy()
            errors = np.abs(np.vstack([values - variants[f"{metric}_low"].to_numpy(),
                                       variants[f"{metric}_high"].to_numpy() - values]))
            picked = variants["selected"].eq(True)  # NaN on the reference rows
            colors = ["tab:green" if description == "main job" else "tab:red" if pick else "tab:gray"
                      for description, pick in zip(variants["description"], picked)]
            axis.barh(variants["variant"], values, xerr=errors, color=colors, capsize=2)
            if len(baseline):
                axis.axvline(baseline[metric].iloc[0], color="tab:blue", label=f"best baseline: {baseline['variant'].iloc[0]}")
            if metric == "f1_matched" and len(floor):
                axis.axvline(floor[metric].iloc[0], color="black", linestyle="--", label="floor: all tokens")
            axis.set_title(f"{fold}: {metric} (red: picked on validation; green: the main job's)", fontsize=9)
            axis.legend(loc="lower right", fontsize=7)
            axis.tick_params(axis="y", labelsize=7)
    figure.tight_layout()
    return figure
