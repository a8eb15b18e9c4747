"""HTML pages: token heatmaps of a fold's explainers against the gold rationale, and explained texts as typed."""
from __future__ import annotations

import html
from typing import Sequence

import numpy as np
import pandas as pd

from learned_attribution.core.explainers import METHODS
from learned_attribution.core.explainers.learned import EXPNET_PLUS, PAPER_EXPNET

POSITIVE, NEGATIVE = "220,40,40", "40,80,220"


PAGE_STYLE = ("body{font-family:sans-serif;max-width:1100px;margin:auto} span{padding:1px 2px;border-radius:3px}"
              " td{padding:4px;vertical-align:top} .m{color:#555;white-space:nowrap} .none{color:#999}")


def heat_levels(values: Sequence[float | None], signed: bool) -> list[tuple[float, bool] | None]:
    """Each score's colour strength in [0, 1] and whether it counts against the class: signed rows on a diverging
    scale around 0 scaled by the row's largest |score| (so signs survive), others min-max scaled within the row;
    None for a missing or non-finite score. The one scale of every heatmap (these pages and the explorer)."""
    present = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    low, high = (present.min(), present.max()) if len(present) else (0.0, 0.0)
    largest = np.abs(present).max() if len(present) else 0.0
    levels: list[tuple[float, bool] | None] = []
    for value in values:
        if value is None or not np.isfinite(value):
            levels.append(None)
        elif signed:
            levels.append((abs(value) / largest if largest > 0 else 0.0, value < 0))
        else:
            levels.append(((value - low) / (high - low) if high > low else 0.0, False))
    return levels


def _token_cells(tokens: Sequence[str], values: Sequence[float | None], color: str, signed: bool = False,
                 marked: Sequence[int] | None = None) -> str:
    """Tokens coloured by score (`heat_levels`). Unsigned: `color`. Signed: red for, blue against the explained
    class. A missing score (None) is shown grey; `marked` tokens (1) are underlined."""
    cells = []
    for index, (token, value, level) in enumerate(zip(tokens, values, heat_levels(values, signed))):
        text = html.escape(str(token))
        if level is None:
            cells.append(f'<span class="none" title="no score">{text}</span>')
            continue
        alpha, against = level
        rgb = (NEGATIVE if against else POSITIVE) if signed else color
        underline = ' class="r"' if marked is not None and marked[index] else ""
        cells.append(f'<span{underline} title="{value:.3f}" style="background: rgba({rgb},{alpha:.2f})">{text}</span>')
    return " ".join(cells)


def _signed_methods(methods: Sequence[str]) -> set[str]:
    return {m for m in methods if m in METHODS and METHODS[m].signed}


def heatmap_page(title: str, examples: list[dict], methods: Sequence[str]) -> str:
    """An HTML page: for each example, a row of tokens per method coloured by score (gold first)."""
    palette = {"gold": "0,150,0", EXPNET_PLUS: "220,40,40", PAPER_EXPNET: "230,120,0"}
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
             f"<h1>{html.escape(title)}</h1><p>Words coloured by each method's score for the class each text's "
             "heading says it explains (the predicted class unless another was asked for; hover for the value): "
             "unsigned methods from white to full colour within the text; signed methods ("
             f"{', '.join(sorted(signed)) or 'none here'}) on a diverging scale, red for and blue against that "
             "class. Underlined: the method's own rationale. Grey: no score (cut by truncation).</p>"]
    for explanation in explanations:
        unknown = (f" — mostly unknown tokens ({explanation.unknown_share:.0%})"
                   if getattr(explanation, "mostly_unknown", False) else "")
        explained = getattr(explanation, "explained_label", None) or explanation.label
        contrast = getattr(explanation, "contrast_label", None)
        explains = ("the predicted class" if getattr(explanation, "explains_predicted", True) else
                    f"{html.escape(explained)}{f' over {html.escape(contrast)}' if contrast else ''}")
        agnostic = ", ".join(getattr(explanation, "class_agnostic", None) or [])
        heading = (f"{html.escape(str(explanation.id)) + ': ' if explanation.id is not None else ''}predicted "
                   f"{html.escape(explanation.label)} (p = {explanation.probability:.3f}); explains {explains}"
                   f"{' — truncated' if explanation.truncated else ''}{unknown}"
                   f"{f' — the same for every class: {html.escape(agnostic)}' if agnostic else ''}")
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


def fold_heatmap_page(token_scores: pd.DataFrame, predictions: pd.DataFrame, best_baseline: str | None, tokenizer,
                      n_examples: int, seed: int, fold: str) -> str:
    """A fold's heatmap page: `n_examples` seeded test examples, each with its gold rationale, ExpNet+, the paper's
    ExpNet and the best baseline."""
    methods = [EXPNET_PLUS, PAPER_EXPNET] + ([best_baseline] if best_baseline else [])
    ids = token_scores["example_id"].drop_duplicates()
    chosen = ids.sample(n=min(n_examples, len(ids)), random_state=seed)
    by_id = predictions.drop_duplicates("example_id").set_index("example_id")
    examples = []
    for example_id in chosen:
        record = by_id.loc[example_id]
        labels = np.asarray(record["token_labels"])
        keep = labels != -100
        tokens = tokenizer.convert_ids_to_tokens(np.asarray(record["input_ids"])[keep].tolist())
        rows = token_scores[token_scores["example_id"] == example_id].set_index("method")
        examples.append({"example_id": example_id, "label": int(record["label"]), "predicted": int(record["predicted"]),
                         "correct": bool(record["correct"]), "tokens": tokens, "gold": labels[keep].tolist(),
                         "scores": {m: rows.at[m, "scores"] for m in methods if m in rows.index}})
    return heatmap_page(f"{fold}: gold rationale, ExpNet+, the paper's ExpNet and the best baseline ({best_baseline})",
                        examples, methods)
