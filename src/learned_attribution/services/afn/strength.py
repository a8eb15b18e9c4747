"""Hidden states and activation strength S_i = ||h_i||_2 at every layer (SPEC §10).

Layer l indexes `output.hidden_states`: 0 is the embedding output, l >= 1 the output of encoder block l.
Texts are given as word lists and tokenised with `is_split_into_words=True` (every word with its word-start
marker: `architectures.prepare_tokenizer`), so every subword token knows the word it belongs to (`word_ids`;
None for [CLS], [SEP]). Texts longer than `max_length` tokens are rejected rather than truncated: a cut
sentence would change every token's percentile threshold.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from tqdm.auto import tqdm

from learned_attribution.core.models.architectures import prepare_tokenizer
from learned_attribution.core.models.runner import eval_mode, forward, iter_batches, pad_batch

from learned_attribution.core.explainers.activation import default_afn_layer  # one rule for the AFN layer (SPEC §10)


class TextTooLongError(ValueError):
    """A text with more tokens than `max_length`."""


class EmptyTextError(ValueError):
    """A text without words, or whose words give no tokens."""


@dataclass(frozen=True)
class TokenizedText:
    """One text as the encoder sees it."""

    input_ids: tuple[int, ...]
    tokens: tuple[str, ...]
    word_ids: tuple[int | None, ...]  # word index per token; None for special tokens

    @property
    def content_positions(self) -> list[int]:
        """Positions of the non-special tokens."""
        return [i for i, word in enumerate(self.word_ids) if word is not None]


def resolve_afn_layer(layer: int | None, num_layers: int) -> int:
    """The configured AFN layer (`afn.layer`, checked when the settings are parsed; None = `default_afn_layer`),
    checked against the encoder's depth."""
    if layer is None:
        return default_afn_layer(num_layers)
    if layer > num_layers:
        raise ValueError(f"parameter afn.layer={layer!r}: this encoder has blocks 1..{num_layers} "
                         "(0 is the embedding output)")
    return layer


def tokenize_words(tokenizer, words: Sequence[str], max_length: int) -> TokenizedText:
    """Tokenise a word list with special tokens and no truncation; raise EmptyTextError / TextTooLongError."""
    if not words or not any(word.strip() for word in words):
        raise EmptyTextError("empty text")
    # Every word with its word-start marker (byte-level BPE: add_prefix_space), as in core/models/projection.py.
    encoding = prepare_tokenizer(tokenizer)(list(words), is_split_into_words=True, add_special_tokens=True,
                                            truncation=False)
    word_ids = tuple(encoding.word_ids())
    if all(word is None for word in word_ids):
        raise EmptyTextError(f"the words {list(words)!r} give no tokens")
    if len(word_ids) > max_length:
        raise TextTooLongError(f"{len(word_ids)} tokens, over max_length={max_length}")
    ids = tuple(int(i) for i in encoding["input_ids"])
    return TokenizedText(ids, tuple(tokenizer.convert_ids_to_tokens(list(ids))), word_ids)


def iter_hidden_states(model: torch.nn.Module, texts: Sequence[TokenizedText], batch_size: int,
                       pad_token_id: int, desc: str | None = None) -> Iterator[tuple[int, np.ndarray]]:
    """Yield (index into `texts`, hidden states [n_layers + 1, n_tokens, hidden] as float32) for every text.

    Batched forward passes under `torch.inference_mode`; texts are batched by length so padding stays
    small, hence the yield order is not the input order. The attention mask keeps padding out of every
    real token's state.
    """
    if batch_size < 1:
        raise ValueError(f"parameter afn.batch_size={batch_size!r}: must be at least 1")
    batches = list(iter_batches([t.input_ids for t in texts], batch_size))
    with torch.inference_mode(), eval_mode(model):
        for batch in tqdm(batches, desc=desc, unit="batch", disable=desc is None):
            input_ids, attention_mask = pad_batch([texts[i].input_ids for i in batch], pad_token_id)
            output = forward(model, input_ids, attention_mask, hidden_states=True)
            stacked = torch.stack(output.hidden_states, dim=1).float().cpu()  # [batch, layers + 1, width, hidden]
            for row, i in enumerate(batch):
                yield i, stacked[row, :, :len(texts[i].input_ids)].numpy().copy()


def token_strengths(hidden: np.ndarray) -> np.ndarray:
    """S_i = ||h_i||_2 for every layer and token: [n_layers + 1, n_tokens] from [n_layers + 1, n_tokens, hidden]."""
    return np.linalg.norm(hidden, axis=-1)
