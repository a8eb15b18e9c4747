"""Word-to-subword label projection (SPEC §3)."""
from __future__ import annotations

import logging

import pandas as pd

logger = logging.getLogger(__name__)

IGNORE = -100  # label of special tokens: excluded from every loss and metric


def project_to_subwords(examples: pd.DataFrame, tokenizer, max_length: int) -> pd.DataFrame:
    """Tokenise each example's words and give every subword its word's rationale label.

    Adds `input_ids`, `word_ids` (word index per token, -1 for special tokens), `token_labels`
    (0/1 per token, -100 for special tokens; null when the example has no rationale) and
    `truncated`. Truncation keeps the first `max_length - 2` subwords, so every kept subword keeps
    its own word's label.
    """
    if max_length < 3:
        raise ValueError(f"parameter max_length must be at least 3, got {max_length}")
    word_lists = list(examples["words"].map(list))
    encoded = tokenizer(word_lists, is_split_into_words=True, add_special_tokens=False)
    cls_id, sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id
    input_ids, word_ids, token_labels, truncated = [], [], [], []
    n_vanished = n_vanished_positive = 0
    for index, rationale in enumerate(examples["word_rationale"]):
        ids = encoded["input_ids"][index]
        words = encoded.word_ids(index)
        keep = max_length - 2
        was_truncated = len(ids) > keep
        truncated.append(was_truncated)
        ids, words = ids[:keep], words[:keep]
        # Words the tokenizer turns into no token at all (e.g. a lone zero-width joiner) lose their label.
        n_kept_words = words[-1] + 1 if was_truncated else len(word_lists[index])
        vanished = set(range(n_kept_words)) - set(words)
        n_vanished += len(vanished)
        if rationale is not None:
            n_vanished_positive += sum(int(rationale[w]) for w in vanished)
        input_ids.append([cls_id, *ids, sep_id])
        word_ids.append([-1, *words, -1])
        if rationale is None:
            token_labels.append(None)
        else:
            token_labels.append([IGNORE, *(int(rationale[w]) for w in words), IGNORE])
    projected = examples.copy()
    projected["input_ids"] = input_ids
    projected["word_ids"] = word_ids
    projected["token_labels"] = token_labels
    projected["truncated"] = truncated
    if n_vanished:
        logger.info("%d words (%d of them rationale words) have no subword token and no label", n_vanished,
                    n_vanished_positive)
    n_truncated = int(sum(truncated))
    if n_truncated:
        logger.info("%d of %d examples truncated to max_length=%d", n_truncated, len(examples), max_length)
    return projected
