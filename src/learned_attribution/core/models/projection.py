"""Word-to-subword label projection (SPEC §3).

`project_batch` is the one implementation; `project_dataset` runs it over a Hugging Face `datasets.Dataset`
with `Dataset.map(batched=True)` (the data pipeline's example tables, Arrow-backed), `project_to_subwords`
over a pandas frame in one call (a handful of texts: the API, external rationale files).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from .architectures import prepare_tokenizer

logger = logging.getLogger(__name__)

IGNORE = -100  # label of special tokens: excluded from every loss and metric


@dataclass
class ProjectionCounts:
    """What projection lost, summed over batches (logged once at the end)."""

    n_examples: int = 0
    n_truncated: int = 0
    n_vanished: int = 0  # words without any subword token (e.g. a lone zero-width joiner)
    n_vanished_positive: int = 0

    def log(self, max_length: int) -> None:
        if self.n_vanished:
            logger.info("%d words (%d of them rationale words) have no subword token and no label", self.n_vanished,
                        self.n_vanished_positive)
        if self.n_truncated:
            logger.info("%d of %d examples truncated to max_length=%d", self.n_truncated, self.n_examples, max_length)


def _check(max_length: int) -> None:
    if max_length < 3:
        raise ValueError(f"parameter max_length must be at least 3, got {max_length}")


def project_batch(words: Sequence[Sequence[str]], rationales: Sequence[Sequence[int] | None], tokenizer,
                  max_length: int, counts: ProjectionCounts | None = None) -> dict[str, list]:
    """Tokenise each example's words and give every subword its word's rationale label.

    Returns the columns `input_ids`, `word_ids` (word index per token, -1 for special tokens),
    `token_labels` (0/1 per token, -100 for special tokens; None when the example has no rationale) and
    `truncated`. Truncation keeps the first `max_length - 2` subwords, so every kept subword keeps its own
    word's label. Each word is tokenised as a word of its own, with its word-start marker (`Ġ`, `▁`) where the
    tokenizer uses one (`architectures.prepare_tokenizer`).
    """
    word_lists = [list(w) for w in words]
    # Every word gets its word-start marker (a byte-level BPE tokenizer needs add_prefix_space for word lists).
    # verbose=False: transformers' "Token indices sequence length is longer than ..." warning is wrong here, since
    # the ids are cut to max_length below, and the caller warns about truncation once, in its own words.
    encoded = prepare_tokenizer(tokenizer)(word_lists, is_split_into_words=True, add_special_tokens=False,
                                           verbose=False)
    cls_id, sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id
    out: dict[str, list] = {"input_ids": [], "word_ids": [], "token_labels": [], "truncated": []}
    counts = counts if counts is not None else ProjectionCounts()
    keep = max_length - 2
    for index, rationale in enumerate(rationales):
        ids = encoded["input_ids"][index]
        word_ids = encoded.word_ids(index)
        was_truncated = len(ids) > keep
        ids, word_ids = ids[:keep], word_ids[:keep]
        n_kept_words = word_ids[-1] + 1 if was_truncated else len(word_lists[index])
        vanished = set(range(n_kept_words)) - set(word_ids)
        counts.n_vanished += len(vanished)
        if rationale is not None:
            counts.n_vanished_positive += sum(int(rationale[w]) for w in vanished)
        out["input_ids"].append([cls_id, *ids, sep_id])
        out["word_ids"].append([-1, *word_ids, -1])
        out["token_labels"].append(None if rationale is None else [IGNORE, *(int(rationale[w]) for w in word_ids),
                                                                   IGNORE])
        out["truncated"].append(was_truncated)
    counts.n_examples += len(word_lists)
    counts.n_truncated += sum(out["truncated"])
    return out


def has_rationale_token(projected: pd.DataFrame) -> pd.Series:
    """Per projected example (`token_labels`: 1 rationale, 0 not, -100 special or cut off): whether at least one
    subword is a rationale token, after truncation (SPEC §1: an example without one is not scored)."""
    return projected["token_labels"].map(lambda labels: labels is not None and bool((np.asarray(labels) == 1).any()))


def project_to_subwords(examples: pd.DataFrame, tokenizer, max_length: int) -> pd.DataFrame:
    """`examples` (with `words` and `word_rationale`) plus the columns of `project_batch`."""
    _check(max_length)
    counts = ProjectionCounts()
    columns = project_batch(list(examples["words"]), list(examples["word_rationale"]), tokenizer, max_length, counts)
    counts.log(max_length)
    return examples.assign(**columns)


def project_dataset(examples, tokenizer, max_length: int, batch_size: int = 1000):
    """`project_batch` over a `datasets.Dataset` (columns `words`, `word_rationale`) with
    `Dataset.map(batched=True)`; returns the Dataset with the new columns (Arrow-backed, not copied into
    Python objects between batches)."""
    _check(max_length)
    counts = ProjectionCounts()

    def map_batch(batch: dict[str, list]) -> dict[str, list]:
        return project_batch(batch["words"], batch["word_rationale"], tokenizer, max_length, counts)

    import datasets  # Hugging Face datasets takes seconds to import: only for a whole table

    # Declared, not inferred per batch: a batch of examples without rationales has only null token labels.
    ids = datasets.List(datasets.Value("int64"))
    features = datasets.Features({**examples.features, "input_ids": ids, "word_ids": ids, "token_labels": ids,
                                  "truncated": datasets.Value("bool")})
    # A fixed fingerprint: hashing the tokenizer for datasets' cache is slow and the result is never reused.
    projected = examples.map(map_batch, batched=True, batch_size=batch_size, load_from_cache_file=False,
                             features=features, new_fingerprint=f"projection-{max_length}",
                             desc="word-to-subword projection")
    counts.log(max_length)
    return projected
