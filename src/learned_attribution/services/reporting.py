"""Plots, HTML heatmaps and Markdown tables for people to look at."""
from __future__ import annotations

import html
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

# Paper reference (bert-base, held-out task, token F1), SPEC §9.
PAPER_REFERENCE = {
    "sst2": {"expnet_f1": 0.398, "best_baseline": "gae", "best_baseline_f1": 0.350},
    "cola": {"expnet_f1": 0.468, "best_baseline": "grad_cam", "best_baseline_f1": 0.356},
    "hatexplain": {"expnet_f1": 0.473, "best_baseline": "grad_cam", "best_baseline_f1": 0.396},
}


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
    classifier needs the tokens the method ranks first), one point per method, the amortized student (issue 14)
    and the learned explainers in red, and the methods on the Pareto frontier of the two joined."""
    from learned_attribution.services.evaluation import pareto_frontier

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


POSITIVE, NEGATIVE = "220,40,40", "40,80,220"
PAGE_STYLE = ("body{font-family:sans-serif;max-width:1100px;margin:auto} span{padding:1px 2px;border-radius:3px}"
              " td{padding:4px;vertical-align:top} .m{color:#555;white-space:nowrap} .none{color:#999}")


def _token_cells(tokens: Sequence[str], values: Sequence[float | None], color: str, signed: bool = False,
                 marked: Sequence[int] | None = None) -> str:
    """Tokens coloured by score. Unsigned: `color`, min-max scaled within the row. Signed: a diverging scale
    around 0 (red for, blue against the explained class), scaled by the row's largest |score|, so signs
    survive. A missing score (None) is shown grey; `marked` tokens (1) are underlined."""
    present = np.asarray([v for v in values if v is not None], dtype=float)
    low, high = (present.min(), present.max()) if len(present) else (0.0, 0.0)
    largest = np.abs(present).max() if len(present) else 0.0
    cells = []
    for index, (token, value) in enumerate(zip(tokens, values)):
        text = html.escape(str(token))
        if value is None or not np.isfinite(value):
            cells.append(f'<span class="none" title="no score">{text}</span>')
            continue
        if signed:
            alpha, rgb = (abs(value) / largest if largest > 0 else 0.0), (POSITIVE if value >= 0 else NEGATIVE)
        else:
            alpha, rgb = ((value - low) / (high - low) if high > low else 0.0), color
        underline = ' class="r"' if marked is not None and marked[index] else ""
        cells.append(f'<span{underline} title="{value:.3f}" style="background: rgba({rgb},{alpha:.2f})">{text}</span>')
    return " ".join(cells)


def _signed_methods(methods: Sequence[str]) -> set[str]:
    from learned_attribution.core.explainers import EXPLAINERS

    return {m for m in methods if m in EXPLAINERS and EXPLAINERS[m].signed}


def heatmap_page(title: str, examples: list[dict], methods: Sequence[str]) -> str:
    """An HTML page: for each example, a row of tokens per method coloured by score (gold first)."""
    palette = {"gold": "0,150,0", "expnet_plus": "220,40,40", "expnet_paper": "230,120,0"}
    signed = _signed_methods(methods)
    parts = [f"<html><head><meta charset='utf-8'><title>{html.escape(title)}</title><style>{PAGE_STYLE}</style>"
             "</head><body>",
             f"<h1>{html.escape(title)}</h1><p>Colour = score scaled within the example (hover for the value); signed "
             "methods on a diverging scale (red for, blue against the predicted class). "
             "Gold = human rationale projected to subwords.</p>"]
    for example in examples:
        parts.append(f"<h3>{html.escape(example['example_id'])} — label {example['label']}, predicted "
                     f"{example['predicted']} ({'correct' if example['correct'] else 'wrong'})</h3><table>")
        parts.append(f"<tr><td class='m'>gold</td><td>{_token_cells(example['tokens'], example['gold'], palette['gold'])}</td></tr>")
        for method in methods:
            if method in example["scores"]:
                color = palette.get(method, "40,80,220")
                cells = _token_cells(example['tokens'], example['scores'][method], color, method in signed)
                parts.append(f"<tr><td class='m'>{html.escape(method)}</td><td>{cells}</td></tr>")
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts)


def explanation_page(title: str, explanations: Sequence, methods: Sequence[str]) -> str:
    """A self-contained HTML page (no external assets) of `learned_attribution.services.explain.Explanation`s: per text,
    the predicted label (the classifier's id2label name) and probability, then one row per method: the text as
    typed, each word highlighted at its offsets by the method's word score (a given word list: its words, spaced),
    each method's own-rule rationale underlined."""
    signed = _signed_methods(methods)

    def as_typed(text: str, offsets: Sequence[tuple[int, int]], row: str) -> str:
        # `_token_cells` joins one <span> per word with a space, and html.escape leaves no "<" in a word, so
        # "</span> <span" only ever separates two words' cells: each goes back at its offsets, gaps as typed.
        parts = row.split("</span> <span")
        last = len(parts) - 1
        cells = [("<span" if i else "") + part + ("</span>" if i < last else "") for i, part in enumerate(parts)]
        if len(cells) != len(offsets):
            return row
        out, position = [], 0
        for (start, end), cell in zip(offsets, cells):
            out += [html.escape(text[position:start]), cell]
            position = end
        return "".join(out) + html.escape(text[position:])

    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title><style>"
             f"{PAGE_STYLE} .r{{text-decoration:underline;text-decoration-thickness:2px}} "
             ".typed{white-space:pre-wrap}</style></head><body>",
             f"<h1>{html.escape(title)}</h1><p>Words coloured by each method's score for the predicted class (hover "
             "for the value): unsigned methods from white to full colour within the text; signed methods ("
             f"{', '.join(sorted(signed)) or 'none here'}) on a diverging scale, red for and blue against the "
             "predicted class. Underlined: the method's own rationale. Grey: no score (cut by truncation).</p>"]
    for explanation in explanations:
        unknown = (f" — mostly unknown tokens ({explanation.unknown_share:.0%})"
                   if getattr(explanation, "mostly_unknown", False) else "")
        heading = (f"{html.escape(str(explanation.id)) + ': ' if explanation.id is not None else ''}predicted "
                   f"{html.escape(explanation.label)} (p = {explanation.probability:.3f})"
                   f"{' — truncated' if explanation.truncated else ''}{unknown}")
        parts.append(f"<h3>{heading}</h3><table>")
        offsets = getattr(explanation, "offsets", None)
        for method in methods:
            cells = _token_cells(explanation.words, explanation.word_scores[method], "220,40,40", method in signed,
                                 explanation.rationale[method])
            if offsets is not None:
                cells = as_typed(explanation.text, offsets, cells)
            parts.append(f"<tr><td class='m'>{html.escape(method)}</td><td class='typed'>{cells}</td></tr>")
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts)


def interval_text(row, metric: str) -> str:
    """`value [low, high]` of `metric` in a row with `<metric>_low` / `<metric>_high` (empty when the value is NaN)."""
    if pd.isna(row[metric]):
        return ""
    return f"{row[metric]:.3f} [{row[metric + '_low']:.3f}, {row[metric + '_high']:.3f}]"


def markdown_table(frame: pd.DataFrame, digits: int = 3) -> str:
    """A GitHub Markdown table (no extra dependency)."""
    formatted = frame.copy()
    for column in formatted.columns:
        if pd.api.types.is_float_dtype(formatted[column]):
            formatted[column] = formatted[column].map(lambda v: "" if pd.isna(v) else f"{v:.{digits}f}")
    header = "| " + " | ".join(map(str, formatted.columns)) + " |"
    rule = "|" + "|".join("---" for _ in formatted.columns) + "|"
    body = ["| " + " | ".join(map(str, row)) + " |" for row in formatted.itertuples(index=False)]
    return "\n".join([header, rule, *body])


def ablation_chart(ablation: pd.DataFrame) -> plt.Figure:
    """Per fold: AUROC and matched-budget F1 of every ExpNet+ variant (selected one highlighted) with 95%
    intervals, the best baseline's as a solid line and the all-tokens floor's F1 as a dashed line."""
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
            colors = ["tab:red" if selected else "tab:gray" for selected in variants["selected"]]
            axis.barh(variants["variant"], values, xerr=errors, color=colors, capsize=2)
            if len(baseline):
                axis.axvline(baseline[metric].iloc[0], color="tab:blue", label=f"best baseline: {baseline['variant'].iloc[0]}")
            if metric == "f1_matched" and len(floor):
                axis.axvline(floor[metric].iloc[0], color="black", linestyle="--", label="floor: all tokens")
            axis.set_title(f"{fold}: {metric} (red = chosen on validation)", fontsize=9)
            axis.legend(loc="lower right", fontsize=7)
            axis.tick_params(axis="y", labelsize=7)
    figure.tight_layout()
    return figure
