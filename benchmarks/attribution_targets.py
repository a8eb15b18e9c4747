"""The cost benchmark's targets and chart (attribution_throughput.py): what each explainer must cost, as a ratio to
the plain forward pass timed beside it, checked on its table; and the table as a log-scale bar chart.

Against a baseline a learned explainer's speed-up is the ratio of the two methods' ratios to the forward pass on
their own texts (like for like when they ran on different numbers of texts).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from harness import saved_figure
from one_text_cost import CAPTUM_METHODS

# "Not slower" targets compare two nearly equal costs (the API computes what captum computes, without its Python
# overhead): a measured speed ratio this far below 1 is within the run-to-run timing noise.
TIMING_TOLERANCE = 0.98
PAPER_EXPNET_EXAMPLES_PER_S = 13.9
# ExpNet's throughput relative to the forward pass and to each baseline.
TARGETS = (("forward_all", 0.8), ("integrated_gradients", 20.0), ("lime", 200.0), ("kernel_shap", 200.0))


def one_text_targets(by_method: pd.DataFrame) -> list[dict]:
    """Fast single requests: the API's batch-1 cost of a method at most its own captum call on one text, and
    Integrated Gradients batched at least as fast per text as alone (both as speed ratios, `TIMING_TOLERANCE`)."""
    rows = []
    for method in CAPTUM_METHODS:
        if method in by_method.index and np.isfinite(by_method.at[method, "api_vs_captum_one_text"]):
            value = float(by_method.at[method, "api_vs_captum_one_text"])
            rows.append({"target": f"{method} batch-1 cost <= captum's own one-text call (captum s / API s)",
                         "measured": value, "required": TIMING_TOLERANCE, "met": bool(value >= TIMING_TOLERANCE)})
    if "integrated_gradients" in by_method.index and np.isfinite(by_method.at["integrated_gradients",
                                                                              "batched_vs_alone"]):
        value = float(by_method.at["integrated_gradients", "batched_vs_alone"])
        rows.append({"target": "integrated_gradients batched per text <= alone per text (alone s / batched s)",
                     "measured": value, "required": TIMING_TOLERANCE, "met": bool(value >= TIMING_TOLERANCE)})
    return rows


def targets_table(table: pd.DataFrame) -> pd.DataFrame:
    """Every target the table can check: the learned explainers' (the ExpNet+ variants, the students, the `api:`
    entries), the one-text ones and the paper's ExpNet's against the forward pass and each baseline."""
    by_method = table.set_index("method")
    rows = []
    from learned_attribution.core.models.signals import GRADIENT_SETS

    for method, record in by_method.iterrows():
        if method.startswith("api:") and np.isfinite(record["ratio_to_forward"]):
            # through the public API, non-gradient learned explainers >= 0.8x a forward pass, and
            # the ExpNet+ variants that read the saliency gradient within 10% of the saliency baseline.
            if "saliency" in record["settings"].split(" (")[0] and "saliency" in by_method.index:
                value = record["ratio_to_forward"] / by_method.at["saliency", "ratio_to_forward"]
                rows.append({"target": f"{method} / saliency baseline", "measured": value, "required": 0.9,
                             "met": bool(value >= 0.9)})
            elif not any(s in record["settings"] for s in GRADIENT_SETS) and method != "api:saliency":
                rows.append({"target": f"{method} / plain forward pass (no gradients, end to end)",
                             "measured": record["ratio_to_forward"], "required": 0.8,
                             "met": bool(record["ratio_to_forward"] >= 0.8)})
        if method.startswith("expnet_plus:") and np.isfinite(record["ratio_to_forward"]):
            gradients = any(s in record["settings"] for s in GRADIENT_SETS)
            required = 0.5 if gradients else 0.8  # with / without a backward pass
            rows.append({"target": f"{method} / plain forward pass ({'gradients' if gradients else 'no gradients'})",
                         "measured": record["ratio_to_forward"], "required": required,
                         "met": bool(record["ratio_to_forward"] >= required)})
        if method.startswith("student:") and np.isfinite(record["ratio_to_forward"]):
            # a student over forward-pass signals >= 0.9x a forward pass; one that reads gradients, or runs layers
            # beyond the classifier's pass (a second forward pass through its copy of the encoder, or its own new
            # attention layers), at least the saliency baseline's own ratio
            second_pass = any(s in record["settings"] for s in (*GRADIENT_SETS, "encoder", "attention layers"))
            if second_pass and "saliency" in by_method.index:
                required, what = by_method.at["saliency", "ratio_to_forward"], "saliency's own ratio"
            else:
                required, what = 0.9, "no gradients"
            rows.append({"target": f"{method} / plain forward pass ({what})", "measured": record["ratio_to_forward"],
                         "required": required, "met": bool(record["ratio_to_forward"] >= required)})
    rows.extend(one_text_targets(by_method))
    if "expnet_paper" not in by_method.index or not np.isfinite(by_method.at["expnet_paper", "ratio_to_forward"]):
        return pd.DataFrame(rows)
    expnet_relative = by_method.at["expnet_paper", "ratio_to_forward"]
    for other, target in TARGETS:
        if other not in by_method.index:
            continue
        if other == "forward_all":
            value, what = expnet_relative, "ExpNet / plain forward pass"
        else:
            value, what = expnet_relative / by_method.at[other, "ratio_to_forward"], f"ExpNet / {other}"
        rows.append({"target": what, "measured": value, "required": target, "met": bool(value >= target)})
    rows.append({"target": "ExpNet examples/s (paper: 13.9 on its hardware)",
                 "measured": by_method.at["expnet_paper", "examples_per_s"], "required": PAPER_EXPNET_EXAMPLES_PER_S,
                 "met": bool(by_method.at["expnet_paper", "examples_per_s"] >= PAPER_EXPNET_EXAMPLES_PER_S)})
    return pd.DataFrame(rows)


def save_chart(table: pd.DataFrame, path: Path, subtitle: str) -> None:
    """Log-scale horizontal bars of examples/s, coloured by family, with the forward pass as a line."""
    shown = table[np.isfinite(table["examples_per_s"])].sort_values("examples_per_s")
    families = list(dict.fromkeys(shown["family"]))
    with saved_figure(path, (8, 0.38 * len(shown) + 1.6)) as (plt, axis):
        colours = dict(zip(families, plt.get_cmap("tab10").colors))
        labels = [f"{m} (n={n})" for m, n in zip(shown["method"], shown["n_examples"])]
        axis.barh(labels, shown["examples_per_s"], color=[colours[f] for f in shown["family"]])
        for y, (value, ratio) in enumerate(zip(shown["examples_per_s"], shown["ratio_to_forward"])):
            axis.text(value * 1.08, y, f"{value:.3g}/s  ({ratio:.2g}x fwd)", va="center", fontsize=7)
        forward = table.loc[table["method"] == "forward_all", "examples_per_s"]
        if len(forward):
            axis.axvline(float(forward.iloc[0]), color="black", linestyle="--", linewidth=0.8)
        axis.set_xscale("log")
        axis.set_xlim(shown["examples_per_s"].min() / 2, shown["examples_per_s"].max() * 20)
        axis.set_xlabel("examples per second (log scale; dashed: plain forward pass)")
        axis.set_title(f"Cost of an explanation\n{subtitle}", fontsize=9)
        handles = [plt.Rectangle((0, 0), 1, 1, color=colours[f]) for f in families]
        axis.legend(handles, families, fontsize=7, loc="lower right")
