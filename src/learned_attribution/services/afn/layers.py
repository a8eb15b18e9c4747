"""Layer-by-layer comparison and the headline numbers beside the paper's (SPEC §10).

Strength statistics use the corpus tokens (not the shift pairs); word classes come from `words`. The
content-vs-function ratio (mean S of content tokens / mean S of function tokens) is scale free, so it
compares layers whose norms differ in size; so does the normalised rank (0 = a sentence's strongest
token, 1 its weakest). R_H per layer is the mean over pairs of each pair's R_H (pairs with no shift are
left out of the mean).
"""
from __future__ import annotations

import logging
import math

import pandas as pd

from learned_attribution.core.data.words import CONTENT, FUNCTION, PUNCTUATION, WORD_CLASSES

from .pairs import CONTEXT, PROMPT
from ..config import AfnSettings
from .strength import resolve_afn_layer

logger = logging.getLogger(__name__)

PAPER = {
    "share_high": 0.25,  # HIGH tokens are about a quarter of the tokens ...
    "r_h": 0.76,  # ... and carry about 76% of the shift
    "afn_layer": 8,  # of bert-base's 12
}
# How far the measured R_H may lie from the paper's 0.76 to count as "about the same".
R_H_TOLERANCE = 0.10

TOKEN_STRENGTH_COLUMNS = ["sentence_id", "source", "n_tokens", "layer", "token_index", "token", "word_index",
                          "word", "word_class", "strength", "tau", "high", "rank", "rank_norm"]
PAIR_LAYER_COLUMNS = ["pair_id", "kind", "source", "layer", "n_aligned", "n_changed", "n_high", "share_high",
                      "r_h", "r_h_unchanged", "share_high_unchanged", "total_shift", "mean_shift_unchanged",
                      "mean_shift_changed", "cls_shift"]


def _mean(values: pd.Series) -> float:
    values = values.dropna()
    return float(values.mean()) if len(values) else float("nan")


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator and not math.isnan(denominator) else float("nan")


def strength_by_layer(token_strengths: pd.DataFrame) -> pd.DataFrame:
    """Per layer: mean strength, mean normalised rank and HIGH rate of each word class, the
    content/function and content/punctuation ratios, the shares of content words among all and among
    HIGH tokens, and the share of sentences whose strongest token is a content word."""
    missing = set(TOKEN_STRENGTH_COLUMNS) - set(token_strengths.columns)
    if missing:
        raise ValueError(f"the AFN token strength table lacks the columns {sorted(missing)}")
    rows = []
    for layer, tokens in token_strengths.groupby("layer", sort=True):
        row: dict = {"layer": int(layer), "n_tokens": len(tokens)}
        for name in WORD_CLASSES:
            of_class = tokens[tokens["word_class"] == name]
            row[f"n_{name}"] = len(of_class)
            row[f"mean_strength_{name}"] = _mean(of_class["strength"])
            row[f"mean_rank_norm_{name}"] = _mean(of_class["rank_norm"])
            row[f"high_rate_{name}"] = _mean(of_class["high"].astype(float))
        row["content_function_ratio"] = _ratio(row[f"mean_strength_{CONTENT}"], row[f"mean_strength_{FUNCTION}"])
        row["content_punctuation_ratio"] = _ratio(row[f"mean_strength_{CONTENT}"],
                                                  row[f"mean_strength_{PUNCTUATION}"])
        is_content = tokens["word_class"] == CONTENT
        row["content_token_share"] = float(is_content.mean())
        high = tokens["high"].astype(bool)
        row["high_token_share"] = float(high.mean())
        row["high_content_share"] = float(is_content[high].mean()) if high.any() else float("nan")
        strongest = tokens.loc[tokens.groupby("sentence_id")["strength"].idxmax()]
        row["top1_content_share"] = float((strongest["word_class"] == CONTENT).mean())
        rows.append(row)
    return pd.DataFrame(rows)


def shift_by_layer(pair_layers: pd.DataFrame) -> pd.DataFrame:
    """Per layer and pair kind: mean R_H, mean share of HIGH tokens, the same for unchanged tokens only,
    mean shift of unchanged and changed tokens, mean [CLS] shift, and the number of pairs."""
    missing = set(PAIR_LAYER_COLUMNS) - set(pair_layers.columns)
    if missing:
        raise ValueError(f"the AFN pair shift table lacks the columns {sorted(missing)}")
    rows = []
    for layer, pairs in pair_layers.groupby("layer", sort=True):
        row: dict = {"layer": int(layer)}
        for kind in (CONTEXT, PROMPT):
            of_kind = pairs[pairs["kind"] == kind]
            row[f"n_{kind}_pairs"] = int(of_kind["pair_id"].nunique())
            for column in ("r_h", "share_high", "r_h_unchanged", "share_high_unchanged", "mean_shift_unchanged",
                           "mean_shift_changed", "cls_shift"):
                row[f"{column}_{kind}"] = _mean(of_kind[column])
        rows.append(row)
    return pd.DataFrame(rows)


def swap_by_layer(token_shifts: pd.DataFrame) -> pd.DataFrame:
    """Per layer, pooled over the aligned tokens of all context pairs: the share of tokens that belong to a
    changed (swapped) word, the share of the total shift they carry, how often they are HIGH in A, and the
    pooled R_H (HIGH tokens' shift over all pairs / all pairs' shift)."""
    tokens = token_shifts[(token_shifts["kind"] == CONTEXT) & token_shifts["aligned"].astype(bool)]
    rows = []
    for layer, group in tokens.groupby("layer", sort=True):
        changed, high = group["changed"].astype(bool), group["high"].astype(bool)
        total = group["delta"].sum()
        rows.append({
            "layer": int(layer),
            "changed_token_share_context": float(changed.mean()),
            "changed_shift_share_context": float(group.loc[changed, "delta"].sum() / total) if total > 0 else float("nan"),
            "changed_high_rate_context": float(high[changed].mean()) if changed.any() else float("nan"),
            "r_h_pooled_context": float(group.loc[high, "delta"].sum() / total) if total > 0 else float("nan"),
        })
    return pd.DataFrame(rows, columns=["layer", "changed_token_share_context", "changed_shift_share_context",
                                       "changed_high_rate_context", "r_h_pooled_context"])


def layer_comparison(token_strengths: pd.DataFrame, pair_layers: pd.DataFrame, afn_layer: int,
                     token_shifts: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per layer (0 = embeddings): strength statistics and shift statistics side by side
    (the swapped-word statistics of `swap_by_layer` too when `token_shifts` is given)."""
    table = strength_by_layer(token_strengths)
    if not pair_layers.empty:
        table = table.merge(shift_by_layer(pair_layers), on="layer", how="outer")
    if token_shifts is not None and not token_shifts.empty:
        table = table.merge(swap_by_layer(token_shifts), on="layer", how="left")
    table.insert(1, "is_afn_layer", table["layer"] == afn_layer)
    return table.sort_values("layer").reset_index(drop=True)


def _at(table: pd.DataFrame, layer: int, column: str) -> float:
    values = table.loc[table["layer"] == layer, column] if column in table else pd.Series(dtype=float)
    return float(values.iloc[0]) if len(values) else float("nan")


def _finite(value: float) -> float | None:
    """JSON has no NaN: missing numbers become null."""
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def headline(layers: pd.DataFrame, afn_layer: int, n_layers: int) -> dict:
    """The headline numbers at the AFN layer and the checks of the paper's three claims.

    Claims, as checked here: (1) HIGH tokens carry most of the context shift (mean R_H > 0.5), and
    R_H lies within R_H_TOLERANCE of the paper's 0.76; (2) content words rank highest at the AFN layer:
    their mean normalised rank is below (stronger than) that of function words and of punctuation, and
    they are over-represented among HIGH tokens; (3) the AFN layer is more sensitive to content words than
    the next layer: a higher content/function strength ratio (undefined at the last layer)."""
    at = lambda column, layer=afn_layer: _at(layers, layer, column)  # noqa: E731
    next_layer = afn_layer + 1 if afn_layer < n_layers else None
    blocks = layers[layers["layer"] >= 1]
    ratios = blocks.set_index("layer")["content_function_ratio"]
    best_layer = int(ratios.idxmax()) if ratios.notna().any() else None
    rank_of_afn = int((ratios > at("content_function_ratio")).sum()) + 1 if ratios.notna().any() else None
    rh_context = at("r_h_context")
    rank_content, rank_function, rank_punct = (at(f"mean_rank_norm_{c}") for c in WORD_CLASSES)
    ratio_next = at("content_function_ratio", next_layer) if next_layer is not None else float("nan")
    claims = {
        "high_tokens_carry_most_shift": bool(rh_context > 0.5) if not math.isnan(rh_context) else None,
        "r_h_near_paper": bool(abs(rh_context - PAPER["r_h"]) <= R_H_TOLERANCE) if not math.isnan(rh_context) else None,
        "content_words_rank_highest": bool(rank_content < rank_function
                                           and (math.isnan(rank_punct) or rank_content < rank_punct)
                                           and at("high_content_share") > at("content_token_share")),
        "afn_layer_beats_next": (bool(at("content_function_ratio") > ratio_next)
                                 if not math.isnan(ratio_next) else None),
    }
    numbers = {
        "n_layers": n_layers, "afn_layer": afn_layer, "next_layer": next_layer,
        "r_h_context": rh_context, "share_high_context": at("share_high_context"),
        "r_h_context_unchanged": at("r_h_unchanged_context"),
        "share_high_context_unchanged": at("share_high_unchanged_context"),
        "r_h_prompt": at("r_h_prompt"), "share_high_prompt": at("share_high_prompt"),
        "r_h_pooled_context": at("r_h_pooled_context"),
        "changed_token_share_context": at("changed_token_share_context"),
        "changed_shift_share_context": at("changed_shift_share_context"),
        "changed_high_rate_context": at("changed_high_rate_context"),
        "mean_shift_unchanged_context": at("mean_shift_unchanged_context"),
        "mean_shift_changed_context": at("mean_shift_changed_context"),
        "cls_shift_prompt": at("cls_shift_prompt"),
        "content_function_ratio": at("content_function_ratio"), "content_function_ratio_next": ratio_next,
        "content_punctuation_ratio": at("content_punctuation_ratio"),
        "mean_rank_norm_content": rank_content, "mean_rank_norm_function": rank_function,
        "mean_rank_norm_punctuation": rank_punct,
        "content_token_share": at("content_token_share"), "high_content_share": at("high_content_share"),
        "high_token_share": at("high_token_share"), "top1_content_share": at("top1_content_share"),
        "best_content_function_layer": best_layer, "afn_layer_ratio_rank": rank_of_afn,
    }
    return {**{key: _finite(value) for key, value in numbers.items()}, "claims": claims}



def afn_layer_of(token_strengths: pd.DataFrame, settings: AfnSettings) -> tuple[int, int]:
    """(the AFN layer, the encoder's number of blocks) from the measured strengths and `afn.layer`."""
    if token_strengths.empty:
        raise ValueError("the AFN corpus gave no token strengths: every sentence was skipped (see the skip table)")
    n_layers = int(token_strengths["layer"].max())
    return resolve_afn_layer(settings.layer, n_layers), n_layers


def compare_layers(token_strengths: pd.DataFrame, pair_layers: pd.DataFrame, token_shifts: pd.DataFrame,
                   settings: AfnSettings) -> pd.DataFrame:
    """The per-layer comparison table (every layer, 0 = embeddings) at the configured AFN layer, logged."""
    afn_layer, _ = afn_layer_of(token_strengths, settings)
    table = layer_comparison(token_strengths, pair_layers, afn_layer, token_shifts)
    logger.info("AFN layer comparison (AFN layer %d):\n%s", afn_layer, table[
        ["layer", "content_function_ratio", "mean_rank_norm_content"]
        + [c for c in ("r_h_context", "r_h_prompt") if c in table]].to_string(index=False))
    return table


def summary(layers: pd.DataFrame, token_strengths: pd.DataFrame, corpus: pd.DataFrame, pair_table: pd.DataFrame,
            skipped: pd.DataFrame, settings: AfnSettings) -> dict:
    """The headline numbers at the AFN layer, the claim checks (`headline`) and the run's counts."""
    afn_layer, n_layers = afn_layer_of(token_strengths, settings)
    counts = {
        "encoder": settings.encoder,
        "n_corpus_sentences": int(token_strengths["sentence_id"].nunique()),
        "n_corpus_user_sentences": int((corpus["source"] == "user").sum()),
        "n_context_pairs": int((pair_table["kind"] != PROMPT).sum()),
        "n_prompt_pairs": int((pair_table["kind"] == PROMPT).sum()),
        "n_skipped": len(skipped),
    }
    return {**counts, **headline(layers, afn_layer, n_layers)}
