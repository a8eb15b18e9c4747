"""Nodes of the afn pipeline: SST phrases and shift pairs in; strength, shift and layer tables, plots, a
report and an MLflow run out. The computations live in `learned_attribution.services.afn`."""
from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from learned_attribution.services.afn import plots
from learned_attribution.services.afn.alignment import AlignmentError, align_tokens
from learned_attribution.services.afn.buckets import activation_threshold, high_mask, normalized_ranks, strength_ranks
from learned_attribution.services.afn.corpus import (SKIP_COLUMNS, Skip, check_word_range, read_user_pairs,
                                            read_user_sentences, sample_phrases, sst_phrases)
from learned_attribution.services.afn.layers import PAIR_LAYER_COLUMNS, TOKEN_STRENGTH_COLUMNS, headline, layer_comparison
from learned_attribution.services.afn.pairs import (PROMPT, ShiftPair, context_pair, pairs_from_frame, pairs_to_frame,
                                           prompt_pair, sst_minimal_pairs)
from learned_attribution.services.afn.report import render_report
from learned_attribution.services.afn.shift import PairShift, pair_shift
from learned_attribution.services.afn.strength import (EmptyTextError, TextTooLongError, TokenizedText, iter_hidden_states,
                                              resolve_afn_layer, token_strengths, tokenize_words,
                                              torch_threads)
from learned_attribution.services.tracking import log_run, refuse_own_tracking_uri
from learned_attribution.services.afn.words import split_words, word_class
from learned_attribution.core.data.schema import RawText
from learned_attribution.core.models.encoder import load_encoder, load_tokenizer
from learned_attribution.core.models.runner import Compute

logger = logging.getLogger(__name__)

CORPUS_COLUMNS = ["sentence_id", "source", "text", "words", "label", "split", "line"]
TOKEN_SHIFT_COLUMNS = ["pair_id", "kind", "layer", "token_index", "token", "word_index", "word", "word_class",
                       "special", "aligned", "changed", "high", "strength", "delta"]
SPLITS = ("train", "dev", "test")


def _setting(params: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in params:
        raise KeyError(f"parameter {where}.{key} is missing (see conf/base/parameters_afn.yml)")
    return params[key]


def _trees_by_split(train: RawText, dev: RawText, test: RawText, splits: list[str], where: str) -> dict[str, RawText]:
    unknown = set(splits) - set(SPLITS)
    if not splits or unknown:
        raise ValueError(f"parameter {where}.splits={splits!r}: choose from {list(SPLITS)}")
    return {split: trees for split, trees in zip(SPLITS, (train, dev, test)) if split in splits}


def _skips_frame(skips: list[Skip]) -> pd.DataFrame:
    for skip in skips:
        logger.warning("AFN skipped %s %s: %s %s", skip.stage, skip.item, skip.reason, skip.detail)
    return pd.DataFrame([skip.as_row() for skip in skips], columns=SKIP_COLUMNS)


def build_corpus(trees_train: RawText, trees_dev: RawText, trees_test: RawText, corpus: dict[str, Any],
                 seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The AFN corpus: `n_phrases` sentiment-bearing SST phrases (seeded) and the user's sentences."""
    where = "afn.corpus"
    min_words, max_words = _setting(corpus, "min_words", where), _setting(corpus, "max_words", where)
    check_word_range(min_words, max_words, where)
    trees = _trees_by_split(trees_train, trees_dev, trees_test, _setting(corpus, "splits", where), where)
    grouped = [group for split, raw in trees.items() for group in sst_phrases(raw, split, min_words, max_words)]
    phrases = sample_phrases(grouped, _setting(corpus, "n_phrases", where), seed)
    rows = [{"sentence_id": f"sst:{p.split}:{p.line}:{p.start}", "source": "sst", "text": " ".join(p.words),
             "words": list(p.words), "label": p.label, "split": p.split, "line": p.line} for p in phrases]
    skips: list[Skip] = []
    if corpus.get("user_sentences_file"):
        sentences, skips = read_user_sentences(corpus["user_sentences_file"])
        rows += [{"sentence_id": f"user:{line}", "source": "user", "text": " ".join(words), "words": words,
                  "label": None, "split": None, "line": line} for line, words in sentences]
    frame = pd.DataFrame(rows, columns=CORPUS_COLUMNS)
    frame["label"] = frame["label"].astype("Int64")
    logger.info("AFN corpus: %d SST phrases, %d user sentences", len(phrases), len(frame) - len(phrases))
    return frame, _skips_frame(skips)


def build_pairs(trees_train: RawText, trees_dev: RawText, trees_test: RawText, corpus: pd.DataFrame,
                pairs: dict[str, Any], seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Shift pairs: SST minimal pairs, the example pairs of the parameters, the user's TSV pairs, and every
    prompt prefix pair applied to the first `n_prompt_sentences` corpus sentences."""
    where = "afn.pairs"
    min_words, max_words = _setting(pairs, "min_words", where), _setting(pairs, "max_words", where)
    check_word_range(min_words, max_words, where)
    trees = _trees_by_split(trees_train, trees_dev, trees_test, _setting(pairs, "splits", where), where)
    phrases = [p for split, raw in trees.items() for group in sst_phrases(raw, split, min_words, max_words)
               for p in group]
    built: list[ShiftPair] = []
    for k, (a, b) in enumerate(sst_minimal_pairs(phrases, _setting(pairs, "n_context_pairs", where), seed)):
        built.append(context_pair(f"sst{k:04d}", "sst_minimal_pair", a.words, b.words, a.label, b.label))
    for k, example in enumerate(pairs.get("example_pairs") or []):
        if len(example) != 2:
            raise ValueError(f"parameter {where}.example_pairs[{k}]={example!r}: expected [sentence_a, sentence_b]")
        try:
            built.append(context_pair(f"example{k:02d}", "example", split_words(example[0]), split_words(example[1])))
        except AlignmentError as error:
            raise ValueError(f"parameter {where}.example_pairs[{k}]={example!r}: {error}") from error
    skips: list[Skip] = []
    if pairs.get("user_pairs_file"):
        user_pairs, skips = read_user_pairs(pairs["user_pairs_file"])
        for line, a, b in user_pairs:
            try:
                built.append(context_pair(f"user{line:04d}", "user_file", split_words(a), split_words(b)))
            except AlignmentError as error:
                skips.append(Skip("pairs", f"{pairs['user_pairs_file']}:{line}", "alignment failed", str(error)))
    prefixes = _setting(pairs, "prompt_prefixes", where) or []
    sentences = corpus.head(int(_setting(pairs, "n_prompt_sentences", where)))
    for k, prefix_pair in enumerate(prefixes):
        if len(prefix_pair) != 2 or not all(isinstance(p, str) and split_words(p) for p in prefix_pair):
            raise ValueError(f"parameter {where}.prompt_prefixes[{k}]={prefix_pair!r}: expected two non-empty prefixes")
        for row in sentences.itertuples(index=False):
            built.append(prompt_pair(f"prompt{k}:{row.sentence_id}", list(row.words), *prefix_pair,
                                     label=None if pd.isna(row.label) else int(row.label)))
    logger.info("AFN pairs: %d context, %d prompt", sum(p.kind != PROMPT for p in built),
                sum(p.kind == PROMPT for p in built))
    return pairs_to_frame(built), _skips_frame(skips)


def _tokenize_or_skip(tokenizer, words: list[str], max_length: int, stage: str, item: str,
                      skips: list[Skip]) -> TokenizedText | None:
    try:
        return tokenize_words(tokenizer, words, max_length)
    except TextTooLongError as error:
        skips.append(Skip(stage, item, "over max_length", str(error)))
    except EmptyTextError as error:
        skips.append(Skip(stage, item, "empty text", str(error)))
    return None


def _load(encoder: dict[str, Any], compute: dict[str, Any] | None):
    name = _setting(encoder, "name_or_path", "encoder")
    return load_tokenizer(name), Compute.from_params(compute).place(load_encoder(name))


def measure_strengths(corpus: pd.DataFrame, encoder: dict[str, Any], max_length: int, afn: dict[str, Any],
                      compute: dict[str, Any] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """S_i, tau, HIGH, rank of every non-special token of every corpus sentence at every layer (encoder on the
    `compute` device)."""
    tokenizer, model = _load(encoder, compute)
    percentile = float(_setting(afn, "percentile", "afn"))
    skips: list[Skip] = []
    kept = []
    for row in corpus.itertuples(index=False):
        tokens = _tokenize_or_skip(tokenizer, list(row.words), max_length, "strength", row.sentence_id, skips)
        if tokens is not None:
            kept.append((row, tokens))
    states = iter_hidden_states(model, [t for _, t in kept], int(_setting(afn, "batch_size", "afn")),
                                tokenizer.pad_token_id, desc="AFN strength")
    with torch_threads(afn.get("num_threads")):
        blocks = [block for index, hidden in states for block in _strength_blocks(*kept[index], hidden, percentile)]
    table = (pd.concat(blocks, ignore_index=True) if blocks else pd.DataFrame(columns=TOKEN_STRENGTH_COLUMNS))
    table = table.sort_values(["sentence_id", "layer", "token_index"], kind="stable").reset_index(drop=True)
    logger.info("AFN strength: %d sentences, %d skipped", len(kept), len(skips))
    return table[TOKEN_STRENGTH_COLUMNS], _skips_frame(skips)


def _strength_blocks(row, tokens: TokenizedText, hidden: np.ndarray, percentile: float) -> list[pd.DataFrame]:
    """The strength table rows of one sentence (non-special tokens), one block per layer."""
    positions = tokens.content_positions
    strengths = token_strengths(hidden)[:, positions]
    words = [str(w) for w in row.words]
    word_index = [tokens.word_ids[p] for p in positions]
    return [pd.DataFrame({
        "sentence_id": row.sentence_id, "source": row.source, "n_tokens": len(positions), "layer": layer,
        "token_index": positions, "token": [tokens.tokens[p] for p in positions], "word_index": word_index,
        "word": [words[w] for w in word_index], "word_class": [word_class(words[w]) for w in word_index],
        "strength": values, "tau": activation_threshold(values, percentile), "high": high_mask(values, percentile),
        "rank": strength_ranks(values), "rank_norm": normalized_ranks(values)})
        for layer, values in enumerate(strengths)]


def measure_shifts(pairs: pd.DataFrame, encoder: dict[str, Any], max_length: int, afn: dict[str, Any],
                   compute: dict[str, Any] | None = None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Delta_i of every token of A at every layer, and per pair and layer R_H and shift statistics (encoder on
    the `compute` device)."""
    tokenizer, model = _load(encoder, compute)
    percentile = float(_setting(afn, "percentile", "afn"))
    skips: list[Skip] = []
    jobs = []  # (pair, tokens A, tokens B, token units)
    for pair in pairs_from_frame(pairs):
        tokens_a = _tokenize_or_skip(tokenizer, list(pair.words_a), max_length, "shift", f"{pair.pair_id} (A)", skips)
        if tokens_a is None:
            continue  # one skip per pair
        tokens_b = _tokenize_or_skip(tokenizer, list(pair.words_b), max_length, "shift", f"{pair.pair_id} (B)", skips)
        if tokens_b is None:
            continue
        try:
            jobs.append((pair, tokens_a, tokens_b, align_tokens(tokens_a.word_ids, tokens_b.word_ids, pair.links)))
        except AlignmentError as error:
            skips.append(Skip("shift", pair.pair_id, "alignment failed", str(error)))
    texts = [t for _, a, b, _ in jobs for t in (a, b)]
    states: dict[int, np.ndarray] = {}
    token_blocks, pair_rows = [], []
    batch_size = int(_setting(afn, "batch_size", "afn"))
    with torch_threads(afn.get("num_threads")):
        for index, hidden in iter_hidden_states(model, texts, batch_size, tokenizer.pad_token_id, desc="AFN shift"):
            states[index] = hidden
            job = index // 2
            if 2 * job not in states or 2 * job + 1 not in states:
                continue  # wait for the other side of the pair
            pair, tokens_a, _, units = jobs[job]
            shift = pair_shift(tokens_a.word_ids, states.pop(2 * job), states.pop(2 * job + 1), units, percentile)
            token_blocks += _shift_blocks(pair, tokens_a, shift)
            pair_rows += [{"pair_id": pair.pair_id, "kind": pair.kind, "source": pair.source, "layer": layer,
                           **shift.layer_summary(layer)} for layer in range(shift.deltas.shape[0])]
    token_table = (pd.concat(token_blocks, ignore_index=True) if token_blocks
                   else pd.DataFrame(columns=TOKEN_SHIFT_COLUMNS))
    pair_table = pd.DataFrame(pair_rows, columns=PAIR_LAYER_COLUMNS)
    order = ["pair_id", "layer"]
    logger.info("AFN shift: %d pairs measured, %d skipped", len(jobs), len(skips))
    return (token_table.sort_values([*order, "token_index"], kind="stable").reset_index(drop=True),
            pair_table.sort_values(order, kind="stable").reset_index(drop=True), _skips_frame(skips))


def _shift_blocks(pair: ShiftPair, tokens_a: TokenizedText, shift: PairShift) -> list[pd.DataFrame]:
    """The token shift table rows of one pair (every token of A, special ones included), one block per layer."""
    words = list(pair.words_a)
    word_index = [w if w is not None else -1 for w in tokens_a.word_ids]
    word = [words[w] if w >= 0 else "" for w in word_index]
    classes = [word_class(w) if w else "special" for w in word]
    return [pd.DataFrame({
        "pair_id": pair.pair_id, "kind": pair.kind, "layer": layer, "token_index": range(len(tokens_a.tokens)),
        "token": list(tokens_a.tokens), "word_index": word_index, "word": word, "word_class": classes,
        "special": shift.special, "aligned": shift.aligned, "changed": shift.changed, "high": shift.high[layer],
        "strength": shift.strengths[layer], "delta": shift.deltas[layer]})
        for layer in range(shift.deltas.shape[0])]


def _afn_layer(token_strengths_table: pd.DataFrame, afn: dict[str, Any]) -> tuple[int, int]:
    if token_strengths_table.empty:
        raise ValueError("the AFN corpus gave no token strengths: every sentence was skipped (see the skip table)")
    n_layers = int(token_strengths_table["layer"].max())
    return resolve_afn_layer(afn.get("layer"), n_layers), n_layers


def compare_layers(token_strengths_table: pd.DataFrame, pair_layers: pd.DataFrame, token_shifts: pd.DataFrame,
                   afn: dict[str, Any]) -> pd.DataFrame:
    """The per-layer comparison table (every layer, 0 = embeddings)."""
    afn_layer, _ = _afn_layer(token_strengths_table, afn)
    table = layer_comparison(token_strengths_table, pair_layers, afn_layer, token_shifts)
    logger.info("AFN layer comparison (AFN layer %d):\n%s", afn_layer, table[
        ["layer", "content_function_ratio", "mean_rank_norm_content"]
        + [c for c in ("r_h_context", "r_h_prompt") if c in table]].to_string(index=False))
    return table


def collect_skips(*skip_tables: pd.DataFrame) -> pd.DataFrame:
    """All skipped inputs of the run in one table (stage, item, reason, detail)."""
    tables = [t for t in skip_tables if not t.empty]
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=SKIP_COLUMNS)


def summarize(layers: pd.DataFrame, token_strengths_table: pd.DataFrame, corpus: pd.DataFrame,
              pair_table: pd.DataFrame, skipped: pd.DataFrame, afn: dict[str, Any],
              encoder: dict[str, Any]) -> dict[str, Any]:
    """Headline numbers at the AFN layer, the claim checks, and the run's counts."""
    afn_layer, n_layers = _afn_layer(token_strengths_table, afn)
    head = headline(layers, afn_layer, n_layers)
    counts = {
        "encoder": encoder["name_or_path"],
        "n_corpus_sentences": int(token_strengths_table["sentence_id"].nunique()),
        "n_corpus_user_sentences": int((corpus["source"] == "user").sum()),
        "n_context_pairs": int((pair_table["kind"] != PROMPT).sum()),
        "n_prompt_pairs": int((pair_table["kind"] == PROMPT).sum()),
        "n_skipped": len(skipped),
    }
    return {**counts, **head}


def make_plots(layers: pd.DataFrame, token_shifts: pd.DataFrame, pair_table: pd.DataFrame,
               head: dict[str, Any], afn: dict[str, Any]) -> tuple[Figure, Figure, Figure, dict[str, Figure]]:
    """The three PNG figures, and the same figures keyed by MLflow artifact path."""
    afn_layer = int(head["afn_layer"])
    n_pairs = int(afn.get("plots", {}).get("n_heatmap_pairs", 4))
    measured = pair_table[pair_table["pair_id"].isin(set(token_shifts["pair_id"]))]
    strength = plots.plot_strength_by_layer(layers, afn_layer)
    rh = plots.plot_rh_by_layer(layers, afn_layer)
    heatmaps = plots.plot_shift_heatmaps(token_shifts, pair_table, plots.choose_heatmap_pairs(measured, n_pairs),
                                         afn_layer)
    return strength, rh, heatmaps, {"plots/strength_by_layer.png": strength, "plots/rh_by_layer.png": rh,
                                    "plots/shift_heatmaps.png": heatmaps}


def _run_config(head: dict[str, Any], afn: dict[str, Any], max_length: int, seed: int) -> dict[str, Any]:
    return {
        "encoder": head["encoder"], "layers": head["n_layers"], "AFN layer": head["afn_layer"],
        "percentile": afn.get("percentile"), "max_length": max_length, "seed": seed,
        "corpus sentences": f"{head['n_corpus_sentences']} ({head['n_corpus_user_sentences']} from the user file)",
        "corpus phrase length (words)": f"{afn['corpus']['min_words']}-{afn['corpus']['max_words']}",
        "context pairs": head["n_context_pairs"], "prompt pairs": head["n_prompt_pairs"],
        "prompt prefixes": afn["pairs"].get("prompt_prefixes"), "skipped inputs": head["n_skipped"],
    }


def write_report(head: dict[str, Any], layers: pd.DataFrame, skipped: pd.DataFrame, afn: dict[str, Any],
                 max_length: int, seed: int) -> str:
    """data/08_reporting/afn_report.md."""
    return render_report(head, layers, skipped, _run_config(head, afn, max_length, seed))


def log_to_mlflow(report: str, head: dict[str, Any], layers: pd.DataFrame, figures: dict[str, Figure],
                  afn: dict[str, Any], mlflow: dict[str, Any], encoder: dict[str, Any], max_length: int,
                  seed: int) -> dict[str, str]:
    """One MLflow run in experiment `afn.mlflow.experiment` of the store `mlflow.tracking_uri` (the one every
    pipeline logs to; `MLFLOW_TRACKING_URI` wins) with the parameters, headline metrics (per-layer metrics as
    steps), the report and the plots. Returns where the run is. The store was checked before the first node
    (hooks.py); `log_run` checks it again for a direct call."""
    from learned_attribution.services import tracking

    settings = _setting(afn, "mlflow", "afn")
    refuse_own_tracking_uri(afn)
    uri = tracking.resolve_tracking_uri((mlflow or {}).get("tracking_uri"))
    experiment = _setting(settings, "experiment", "afn.mlflow")
    params = {"encoder": encoder, "max_length": max_length, "seed": seed,
              "afn": {k: v for k, v in afn.items() if k != "mlflow"}}
    metrics = {k: v for k, v in head.items() if k != "encoder"}
    run_id = log_run(uri, experiment, params, metrics, layers,
                     {"afn_report.md": report, "layer_comparison.csv": layers.to_csv(index=False)}, figures,
                     artifact_location=settings.get("artifact_location"), run_name="afn")
    logger.info("AFN results logged to MLflow run %s (experiment %r, %s)", run_id, experiment, uri)
    return {"run_id": run_id, "experiment": experiment, "tracking_uri": uri}
