"""AFN figures: strength by layer per word class, R_H by layer, and Delta_i heatmaps of example pairs.

Figures are built with `matplotlib.figure.Figure` (no pyplot state), so nodes can return them to a
MatplotlibDataset and to MLflow alike.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from learned_attribution.core.data.words import WORD_CLASSES

from ..afn.layers import PAPER
from ..afn.pairs import CONTEXT, PROMPT
from ..config import AfnSettings

_CLASS_COLOURS = {"content": "tab:red", "function": "tab:blue", "punctuation": "tab:gray"}


def _mark_afn_layer(axis, afn_layer: int) -> None:
    axis.axvline(afn_layer, color="black", linestyle=":", linewidth=1)
    axis.text(afn_layer, 1.0, f" AFN layer {afn_layer}", transform=axis.get_xaxis_transform(), va="top", fontsize=8)


def plot_strength_by_layer(layers: pd.DataFrame, afn_layer: int) -> Figure:
    """Left: mean strength of content words, function words and punctuation per layer. Right: the
    scale-free content/function and content/punctuation ratios, and content words' mean normalised rank."""
    figure = Figure(figsize=(11, 4.2), layout="constrained")
    left, middle, right = figure.subplots(1, 3)
    for name in WORD_CLASSES:
        left.plot(layers["layer"], layers[f"mean_strength_{name}"], marker="o", label=name,
                  color=_CLASS_COLOURS[name])
        right.plot(layers["layer"], layers[f"mean_rank_norm_{name}"], marker="o", label=name,
                   color=_CLASS_COLOURS[name])
    middle.plot(layers["layer"], layers["content_function_ratio"], marker="o", label="content / function")
    middle.plot(layers["layer"], layers["content_punctuation_ratio"], marker="s", label="content / punctuation")
    middle.axhline(1.0, color="gray", linewidth=0.8)
    left.set(title="Mean strength ||h_i||", xlabel="layer (0 = embeddings)", ylabel="mean L2 norm")
    middle.set(title="Strength ratio", xlabel="layer (0 = embeddings)", ylabel="ratio of mean norms")
    right.set(title="Mean normalised rank (0 = strongest)", xlabel="layer (0 = embeddings)", ylabel="rank")
    for axis in (left, middle, right):
        _mark_afn_layer(axis, afn_layer)
        axis.legend(fontsize=8)
    return figure


def plot_rh_by_layer(layers: pd.DataFrame, afn_layer: int) -> Figure:
    """Mean R_H per layer for context and prompt pairs, with the share of HIGH tokens (what R_H would be
    if the shift were spread evenly) and the paper's 76%."""
    figure = Figure(figsize=(9.5, 4.2), layout="constrained")
    axis = figure.subplots()
    for kind, colour in ((CONTEXT, "tab:red"), (PROMPT, "tab:blue")):
        if f"r_h_{kind}" not in layers or layers[f"r_h_{kind}"].isna().all():
            continue
        axis.plot(layers["layer"], layers[f"r_h_{kind}"], marker="o", color=colour, label=f"R_H, {kind} pairs")
        axis.plot(layers["layer"], layers[f"share_high_{kind}"], linestyle="--", color=colour,
                  label=f"share of HIGH tokens, {kind}")
    if "r_h_unchanged_context" in layers and layers["r_h_unchanged_context"].notna().any():
        axis.plot(layers["layer"], layers["r_h_unchanged_context"], marker="^", color="tab:orange",
                  label="R_H, context pairs, unchanged tokens only")
    axis.axhline(PAPER["r_h"], color="black", linewidth=0.8, label=f"paper: R_H = {PAPER['r_h']:.2f}")
    _mark_afn_layer(axis, afn_layer)
    axis.set(title="Share of the activation shift carried by HIGH tokens", xlabel="layer (0 = embeddings)",
             ylabel="share", ylim=(0, 1.05))
    axis.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return figure


def choose_heatmap_pairs(pair_table: pd.DataFrame, n_pairs: int) -> list[str]:
    """Pair ids to draw: the example pairs first, then context pairs, and one prompt pair when there is one."""
    if n_pairs < 1:
        return []
    examples = pair_table.loc[pair_table["source"] == "example", "pair_id"].tolist()
    context = pair_table.loc[(pair_table["kind"] == CONTEXT) & (pair_table["source"] != "example"), "pair_id"].tolist()
    prompts = pair_table.loc[pair_table["kind"] == PROMPT, "pair_id"].tolist()
    n_context = n_pairs - 1 if prompts else n_pairs
    chosen = (examples + context)[:n_context]
    return chosen + prompts[: n_pairs - len(chosen)]


def row_normalised(matrix: np.ndarray) -> np.ndarray:
    """Each row divided by its largest value (NaN cells ignored and kept; an all-zero row stays zero)."""
    row_max = np.where(np.isnan(matrix), 0.0, matrix).max(axis=1, keepdims=True)
    scaled = np.divide(matrix, row_max, out=np.zeros_like(matrix), where=row_max > 0)
    return np.where(np.isnan(matrix), np.nan, scaled)


def plot_shift_heatmaps(token_shifts: pd.DataFrame, pair_table: pd.DataFrame, pair_ids: Sequence[str],
                        afn_layer: int) -> Figure:
    """One heatmap per pair: Delta_i of A's tokens (columns) at every layer (rows), each row divided by its
    largest value so the distribution within a layer shows. '*' marks tokens HIGH at the AFN layer, '>'
    changed words; blank cells have no counterpart in B (prompt prefixes)."""
    figure = Figure(figsize=(10, 2.6 * max(len(pair_ids), 1)), layout="constrained")
    axes = np.atleast_1d(figure.subplots(max(len(pair_ids), 1), 1))
    if not pair_ids:
        axes[0].text(0.5, 0.5, "no pairs to show", ha="center", va="center")
        axes[0].set_axis_off()
        return figure
    texts = pair_table.set_index("pair_id")
    for axis, pair_id in zip(axes, pair_ids):
        rows = token_shifts[token_shifts["pair_id"] == pair_id]
        matrix = rows.pivot(index="layer", columns="token_index", values="delta").sort_index()
        scaled = row_normalised(matrix.to_numpy(dtype=float))
        image = axis.imshow(np.ma.masked_invalid(scaled), aspect="auto", cmap="viridis", vmin=0, vmax=1)
        labels = rows[rows["layer"] == afn_layer].set_index("token_index").loc[matrix.columns]
        axis.set_xticks(range(len(matrix.columns)), [
            (">" if changed else "") + token + ("*" if high else "")
            for token, high, changed in zip(labels["token"], labels["high"], labels["changed"])],
            rotation=60, fontsize=8)
        axis.set_yticks(range(len(matrix.index)), [str(layer) for layer in matrix.index], fontsize=8)
        axis.set_ylabel("layer")
        pair = texts.loc[pair_id]
        axis.set_title(f"{pair_id} ({pair['kind']})  A: {pair['text_a']}  |  B: {pair['text_b']}", fontsize=9)
        figure.colorbar(image, ax=axis, label="Delta / row max")
    return figure


def afn_figures(layers: pd.DataFrame, token_shifts: pd.DataFrame, pair_table: pd.DataFrame, afn_layer: int,
                settings: AfnSettings) -> tuple[Figure, Figure, Figure]:
    """The run's three figures: strength by layer, R_H by layer, and the Delta_i heatmaps of
    `afn.plots.n_heatmap_pairs` measured pairs."""
    measured = pair_table[pair_table["pair_id"].isin(set(token_shifts["pair_id"]))]
    chosen = choose_heatmap_pairs(measured, settings.plots.n_heatmap_pairs)
    return (plot_strength_by_layer(layers, afn_layer), plot_rh_by_layer(layers, afn_layer),
            plot_shift_heatmaps(token_shifts, pair_table, chosen, afn_layer))
