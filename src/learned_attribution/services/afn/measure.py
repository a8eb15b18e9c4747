"""The AFN measurements from the parsed settings: S_i, tau, HIGH and rank of every corpus token at every layer
(`measure_strengths`), and Delta_i of every token of A with per pair and layer R_H (`measure_shifts`), each with its
skip table (texts over max_length, empty texts, pairs that do not align)."""
from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from learned_attribution.core.data.words import word_class
from learned_attribution.core.models.loading import load_encoder, load_tokenizer
from learned_attribution.core.models.runner import torch_threads

from ..config import ComputeSettings
from .alignment import AlignmentError, align_tokens
from .buckets import activation_threshold, high_mask, normalized_ranks, strength_ranks
from .corpus import Skip, skips_frame
from .layers import PAIR_LAYER_COLUMNS, TOKEN_STRENGTH_COLUMNS
from .pairs import ShiftPair, pairs_from_frame
from ..config import AfnSettings
from .shift import PairShift, pair_shift
from .strength import (EmptyTextError, TextTooLongError, TokenizedText, iter_hidden_states, token_strengths,
                       tokenize_words)

logger = logging.getLogger(__name__)

TOKEN_SHIFT_COLUMNS = ["pair_id", "kind", "layer", "token_index", "token", "word_index", "word", "word_class",
                       "special", "aligned", "changed", "high", "strength", "delta"]


def load_afn_encoder(settings: AfnSettings, compute: ComputeSettings):
    """The tokenizer and the encoder (`encoder.name_or_path`) on the `compute` device."""
    return load_tokenizer(settings.encoder), compute.place(load_encoder(settings.encoder))


def _tokenize_or_skip(tokenizer, words: list[str], max_length: int, stage: str, item: str,
                      skips: list[Skip]) -> TokenizedText | None:
    try:
        return tokenize_words(tokenizer, words, max_length)
    except TextTooLongError as error:
        skips.append(Skip(stage, item, "over max_length", str(error)))
    except EmptyTextError as error:
        skips.append(Skip(stage, item, "empty text", str(error)))
    return None


def strength_blocks(row, tokens: TokenizedText, hidden: np.ndarray, percentile: float) -> list[pd.DataFrame]:
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


def measure_strengths(corpus: pd.DataFrame, tokenizer, model, settings: AfnSettings
                      ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """S_i, tau, HIGH, rank of every non-special token of every corpus sentence at every layer."""
    percentile = float(settings.percentile)
    skips: list[Skip] = []
    kept = []
    for row in corpus.itertuples(index=False):
        tokens = _tokenize_or_skip(tokenizer, list(row.words), settings.max_length, "strength", row.sentence_id,
                                   skips)
        if tokens is not None:
            kept.append((row, tokens))
    states = iter_hidden_states(model, [t for _, t in kept], settings.batch_size, tokenizer.pad_token_id,
                                desc="AFN strength")
    with torch_threads(settings.num_threads):
        blocks = [block for index, hidden in states for block in strength_blocks(*kept[index], hidden, percentile)]
    table = (pd.concat(blocks, ignore_index=True) if blocks else pd.DataFrame(columns=TOKEN_STRENGTH_COLUMNS))
    table = table.sort_values(["sentence_id", "layer", "token_index"], kind="stable").reset_index(drop=True)
    logger.info("AFN strength: %d sentences, %d skipped", len(kept), len(skips))
    return table[TOKEN_STRENGTH_COLUMNS], skips_frame(skips)


def shift_blocks(pair: ShiftPair, tokens_a: TokenizedText, shift: PairShift) -> list[pd.DataFrame]:
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


def _shift_jobs(pairs: pd.DataFrame, tokenizer, max_length: int, skips: list[Skip]) -> list[tuple]:
    """(pair, tokens of A, tokens of B, token units) of every pair that tokenizes and aligns; one skip per pair
    that does not."""
    jobs = []
    for pair in pairs_from_frame(pairs):
        tokens_a = _tokenize_or_skip(tokenizer, list(pair.words_a), max_length, "shift", f"{pair.pair_id} (A)", skips)
        if tokens_a is None:
            continue
        tokens_b = _tokenize_or_skip(tokenizer, list(pair.words_b), max_length, "shift", f"{pair.pair_id} (B)", skips)
        if tokens_b is None:
            continue
        try:
            jobs.append((pair, tokens_a, tokens_b, align_tokens(tokens_a.word_ids, tokens_b.word_ids, pair.links)))
        except AlignmentError as error:
            skips.append(Skip("shift", pair.pair_id, "alignment failed", str(error)))
    return jobs


def measure_shifts(pairs: pd.DataFrame, tokenizer, model, settings: AfnSettings
                   ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Delta_i of every token of A at every layer, and per pair and layer R_H and shift statistics."""
    percentile = float(settings.percentile)
    skips: list[Skip] = []
    jobs = _shift_jobs(pairs, tokenizer, settings.max_length, skips)
    texts = [t for _, a, b, _ in jobs for t in (a, b)]
    states: dict[int, np.ndarray] = {}
    token_blocks, pair_rows = [], []
    with torch_threads(settings.num_threads):
        for index, hidden in iter_hidden_states(model, texts, settings.batch_size, tokenizer.pad_token_id,
                                                desc="AFN shift"):
            states[index] = hidden
            job = index // 2
            if 2 * job not in states or 2 * job + 1 not in states:
                continue  # wait for the other side of the pair
            pair, tokens_a, _, units = jobs[job]
            shift = pair_shift(tokens_a.word_ids, states.pop(2 * job), states.pop(2 * job + 1), units, percentile)
            token_blocks += shift_blocks(pair, tokens_a, shift)
            pair_rows += [{"pair_id": pair.pair_id, "kind": pair.kind, "source": pair.source, "layer": layer,
                           **shift.layer_summary(layer)} for layer in range(shift.deltas.shape[0])]
    token_table = (pd.concat(token_blocks, ignore_index=True) if token_blocks
                   else pd.DataFrame(columns=TOKEN_SHIFT_COLUMNS))
    pair_table = pd.DataFrame(pair_rows, columns=PAIR_LAYER_COLUMNS)
    order = ["pair_id", "layer"]
    logger.info("AFN shift: %d pairs measured, %d skipped", len(jobs), len(skips))
    return (token_table.sort_values([*order, "token_index"], kind="stable").reset_index(drop=True),
            pair_table.sort_values(order, kind="stable").reset_index(drop=True), skips_frame(skips))
