"""The AFN reports: the run's markdown report (headline numbers beside the paper's, the layer table, plots and
skips) and the two runs' comparison table of docs/results.md."""
from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from ..afn.layers import PAPER, R_H_TOLERANCE
from ..config import AfnSettings
from .tables import table_lines

# Plot files relative to the report (data/08_reporting/afn_report.md); conf/base/catalog_afn.yml writes them.
PLOT_FILES = {
    "Strength by layer: content vs function words and punctuation": "afn/strength_by_layer.png",
    "R_H by layer": "afn/rh_by_layer.png",
    "Delta_i heatmaps of example pairs": "afn/shift_heatmaps.png",
}
LAYER_COLUMNS = {
    "layer": "layer", "mean_strength_content": "S content", "mean_strength_function": "S function",
    "mean_strength_punctuation": "S punct.", "content_function_ratio": "content/function",
    "content_punctuation_ratio": "content/punct.", "mean_rank_norm_content": "rank content",
    "mean_rank_norm_function": "rank function", "high_content_share": "content share of HIGH",
    "r_h_context": "R_H context", "share_high_context": "HIGH share context",
    "r_h_unchanged_context": "R_H unchanged", "changed_shift_share_context": "swapped words' shift share",
    "r_h_prompt": "R_H prompt", "cls_shift_prompt": "[CLS] shift prompt",
}


def _number(value, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}f}"


def _percent(value) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{100 * value:.1f}%"


def _verdict(value: bool | None) -> str:
    return {True: "holds", False: "does not hold", None: "not checked"}[value]


def _numbers_table(frame: pd.DataFrame, digits: int = 3) -> str:
    """`frame` as a Markdown table, each number as `_number` shows it (n/a, yes / no, integers as they are)."""
    return table_lines(list(frame.columns), [[v if isinstance(v, str) else _number(v, digits) for v in row]
                                             for row in frame.astype(object).itertuples(index=False)])


def run_config(head: Mapping, settings: AfnSettings) -> dict:
    """The run's settings and counts as the report's "Run" section lists them."""
    corpus, pairs = settings.corpus, settings.pairs
    return {
        "encoder": head["encoder"], "layers": head["n_layers"], "AFN layer": head["afn_layer"],
        "percentile": settings.percentile, "max_length": settings.max_length, "seed": settings.seed,
        "corpus sentences": f"{head['n_corpus_sentences']} ({head['n_corpus_user_sentences']} from the user file)",
        "corpus phrase length (words)": f"{corpus.min_words}-{corpus.max_words}",
        "context pairs": head["n_context_pairs"], "prompt pairs": head["n_prompt_pairs"],
        "prompt prefixes": [list(prefixes) for prefixes in pairs.prompt_prefixes], "skipped inputs": head["n_skipped"],
    }


def render_report(head: Mapping, layers: pd.DataFrame, skipped: pd.DataFrame, config: Mapping) -> str:
    """The report text. `head` is `layers.headline(...)`; `config` holds the run's settings to print."""
    claims = head["claims"]
    layer, next_layer = head["afn_layer"], head["next_layer"]
    lines = [
        "# AFN report: activation strength, buckets and shift",
        "",
        "Reproduction of *Towards Explainability of SLMs by investigating Token Level Activation* (SPEC §10): "
        "strength S_i = ||h_i||_2, HIGH tokens above the sentence's 75th percentile, shift "
        "Delta_i = ||h_A,i - h_B,i||_2 and R_H = share of the shift carried by A's HIGH tokens.",
        "",
        "## Run",
        "",
        *[f"- {key}: {value}" for key, value in config.items()],
        "",
        *([f"The paper used bert-base-uncased; this run used {config.get('encoder')}. Set the shared parameter "
           "`encoder.name_or_path` to compare with the paper's model.", ""]
          if config.get("encoder") and "bert-base" not in str(config.get("encoder")) else []),
        f"## Headline at the AFN layer (layer {layer} of {head['n_layers']}) beside the paper "
        f"(bert-base-uncased, layer {PAPER['afn_layer']} of 12)",
        "",
        "| claim | paper | this run | verdict |",
        "|---|---|---|---|",
        f"| share of tokens that are HIGH (context pairs, aligned tokens of A) | about {_percent(PAPER['share_high'])} "
        f"| {_percent(head['share_high_context'])} | |",
        f"| R_H: share of the context shift carried by HIGH tokens | about {_percent(PAPER['r_h'])} "
        f"| {_percent(head['r_h_context'])} | most of the shift: {_verdict(claims['high_tokens_carry_most_shift'])}; "
        f"within {100 * R_H_TOLERANCE:.0f} points of 76%: {_verdict(claims['r_h_near_paper'])} |",
        f"| the swapped words | not reported | {_percent(head['changed_token_share_context'])} of aligned tokens "
        f"carry {_percent(head['changed_shift_share_context'])} of the shift and are HIGH in A for "
        f"{_percent(head['changed_high_rate_context'])} of their tokens; R_H pooled over all pairs "
        f"{_percent(head['r_h_pooled_context'])} | |",
        f"| R_H over unchanged tokens only (swapped word left out) | not reported "
        f"| {_percent(head['r_h_context_unchanged'])} (HIGH share {_percent(head['share_high_context_unchanged'])}) | |",
        f"| R_H, prompt pairs (sentence tokens) | not reported (prompts shift [CLS] and other tokens) "
        f"| {_percent(head['r_h_prompt'])} (HIGH share {_percent(head['share_high_prompt'])}); "
        f"mean [CLS] shift {_number(head['cls_shift_prompt'])} | |",
        f"| content words rank highest at the AFN layer | yes | mean normalised rank (0 = strongest): content "
        f"{_number(head['mean_rank_norm_content'])}, function {_number(head['mean_rank_norm_function'])}, "
        f"punctuation {_number(head['mean_rank_norm_punctuation'])}; content words are "
        f"{_percent(head['high_content_share'])} of HIGH tokens vs {_percent(head['content_token_share'])} of all "
        f"tokens; strongest token is a content word in {_percent(head['top1_content_share'])} of sentences "
        f"| {_verdict(claims['content_words_rank_highest'])} |",
        f"| AFN layer more sensitive to content words than the next (8 vs 9) | yes | content/function strength "
        f"ratio {_number(head['content_function_ratio'])} at layer {layer} vs "
        f"{_number(head['content_function_ratio_next'])} at layer {next_layer if next_layer is not None else 'n/a'} "
        f"| {_verdict(claims['afn_layer_beats_next'])} |",
        f"| over all layers | layer 8 singled out | highest content/function ratio at layer "
        f"{_number(head['best_content_function_layer'])}; the AFN layer ranks {_number(head['afn_layer_ratio_rank'])} "
        f"of {head['n_layers']} | |",
        "",
        "With distinct strengths the number of HIGH tokens follows from the sentence length alone (1 of 4, 2 of 8), "
        "so the HIGH share is the same at every layer; R_H is to be read against it (an even spread of the shift "
        "gives R_H = HIGH share).",
        "",
        "Verdicts use fixed criteria (`afn.layers.headline`): R_H > 50% for \"most of the shift\"; mean "
        "normalised rank of content words below function words and punctuation *and* content words "
        "over-represented among HIGH tokens for \"rank highest\"; a higher content/function ratio than the "
        "next layer for the layer claim.",
        "",
        "## Layer by layer",
        "",
        "S = mean strength; rank = mean normalised rank within the sentence (0 strongest, 1 weakest); R_H and "
        "HIGH share are means over pairs. Layer 0 is the embedding output.",
        "",
        _numbers_table(layers[[c for c in LAYER_COLUMNS if c in layers]].rename(columns=LAYER_COLUMNS)),
        "",
        "## Plots",
        "",
        *[f"![{title}]({path})" for title, path in PLOT_FILES.items()],
        "",
        "## Skipped inputs",
        "",
    ]
    if skipped.empty:
        lines.append("None.")
    else:
        counts = skipped.groupby(["stage", "reason"]).size().rename("count").reset_index()
        lines += [f"{len(skipped)} inputs skipped (listed in data/08_reporting/afn/skipped.csv):", "",
                  _numbers_table(counts)]
    return "\n".join(lines) + "\n"


# AFN headline claims (afn/headline.json) beside the paper's (bert-base-uncased, layer 8 of 12).
AFN_CLAIMS = (("share of tokens that are HIGH (context pairs)", "share_high_context", "about 25%"),
              ("R_H: share of the context shift carried by HIGH tokens", "r_h_context", "about 76%"),
              ("R_H over unchanged tokens only", "r_h_context_unchanged", "not reported"),
              ("R_H, prompt pairs", "r_h_prompt", "not reported"),
              ("content words among HIGH tokens", "high_content_share", "content words rank highest"),
              ("content/function strength ratio at the AFN layer", "content_function_ratio", "highest at layer 8"),
              ("... at the next layer", "content_function_ratio_next", ""))


def afn_comparison_table(small: dict, base: dict) -> str:
    """Markdown: the AFN headline at each run's AFN layer (two thirds of the depth: layer 4 of MiniLM's 6, layer 8
    of MPNet-base's 12, the paper's layer) beside the paper's claims."""
    def layer(head: dict) -> str:
        return f"layer {head['afn_layer']} of {head['n_layers']}"

    lines = []
    for claim, key, paper in AFN_CLAIMS:
        shown = [f"{head[key]:.1%}" if "ratio" not in key else f"{head[key]:.3f}" for head in (small, base)]
        lines.append([claim, paper, shown[0], shown[1]])
    verdicts = [", ".join(name.replace("_", " ") for name, held in head["claims"].items() if held) or "none"
                for head in (small, base)]
    lines.append(["claims that hold (fixed criteria, afn.layers.headline)", "", verdicts[0], verdicts[1]])
    return table_lines(["claim", "paper (bert-base, layer 8 of 12)", f"default run ({layer(small)})",
                        f"base size ({layer(base)})"], lines)
