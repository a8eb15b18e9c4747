"""The texts a student learns from and is judged on: a task's unlabeled training texts or a user's file, tokenized
and predicted by the classifier, the too-short ones skipped (listed), split into training and held-out texts."""
from __future__ import annotations

import logging
from typing import Sequence

import numpy as np
import pandas as pd

from learned_attribution.core.models.projection import project_to_subwords
from learned_attribution.core.data.words import tokenizer_words
from learned_attribution.core.models.loading import max_positions
from learned_attribution.core.models.runner import predict_proba

from ..config import AmortizeSettings

logger = logging.getLogger(__name__)

MIN_TOKENS = 2  # real (non-special) tokens a text needs for a ranking of its tokens to mean anything


def split_short(tokenized: pd.DataFrame, min_tokens: int = MIN_TOKENS) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(rows with at least `min_tokens` real subword tokens, the others as skipped: example_id, reason)."""
    n_real = tokenized["input_ids"].map(len) - 2 if len(tokenized) else pd.Series(dtype=int)
    short = n_real < min_tokens
    skipped = pd.DataFrame({"example_id": tokenized.loc[short, "example_id"],
                            "reason": [f"{n} real token(s), fewer than {min_tokens}" for n in n_real[short]]})
    return tokenized[~short].reset_index(drop=True), skipped.reset_index(drop=True)


def unlabeled_examples(classifier, texts: Sequence[str | Sequence[str]], ids: Sequence[str] | None = None, *,
                       max_length: int = 128, batch_size: int = 32,
                       min_tokens: int = MIN_TOKENS) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Texts (strings, split into words by the classifier tokenizer's pre-tokenizer as `explain` does, or lists of
    words) -> (examples: example_id, words, input_ids, predicted, probability; skipped: example_id, reason). A text
    with fewer than `min_tokens` real subword tokens is skipped (logged with the count)."""
    tokenizer = classifier.tokenizer
    ids = [str(i) for i in (range(len(texts)) if ids is None else ids)]
    if len(ids) != len(texts):
        raise ValueError(f"{len(ids)} ids for {len(texts)} texts")
    if len(set(ids)) != len(ids):
        raise ValueError("text ids must be unique")
    words = [tokenizer_words(tokenizer, t)[0] if isinstance(t, str) else [str(w) for w in t] for t in texts]
    frame = pd.DataFrame({"example_id": ids, "words": words})
    empty = frame["words"].map(lambda w: not any(x.strip() for x in w))
    tokenized = project_to_subwords(frame[~empty].assign(word_rationale=None).reset_index(drop=True), tokenizer,
                                    max_length) if (~empty).any() else frame.iloc[:0].assign(input_ids=[])
    usable, short = split_short(tokenized, min_tokens)
    skipped = pd.concat([pd.DataFrame({"example_id": frame.loc[empty, "example_id"], "reason": "empty"}), short],
                        ignore_index=True)
    if len(skipped):
        logger.warning("%d of %d texts skipped (empty, or fewer than %d real tokens: nothing to rank)",
                       len(skipped), len(texts), min_tokens)
    examples = usable[["example_id", "words", "input_ids"]]
    if not len(examples):
        raise ValueError(f"none of the {len(texts)} texts has {min_tokens} or more real tokens to attribute")
    return predicted_examples(classifier, examples, batch_size), skipped


def predicted_examples(classifier, examples: pd.DataFrame, batch_size: int = 32) -> pd.DataFrame:
    """`examples` (with `input_ids`) with the classifier's `predicted` class and its `probability`."""
    probabilities = predict_proba(classifier.model, list(examples["input_ids"]), batch_size,
                                  classifier.tokenizer.pad_token_id)
    return examples.assign(predicted=probabilities.argmax(1), probability=probabilities.max(1))


def held_out_split(n_texts: int, settings: AmortizeSettings) -> tuple[np.ndarray, np.ndarray]:
    """(training rows, held-out rows) of `n_texts` texts, a seeded split: `held_out_texts` held out (when there are
    fewer texts than that, a fifth of them, one at least), then at most `max_texts` of the rest. The held-out rows do
    not depend on `max_texts`, so students taught on more or fewer texts are judged on the same held-out texts and
    share their reference teacher's cached parts."""
    order = np.random.default_rng(settings.seed).permutation(n_texts)
    n_held = min(settings.held_out_texts, max(1, n_texts // 5))
    if n_texts - n_held < 2:
        raise ValueError(f"{n_texts} usable texts: a student needs at least 3 (2 to train and stop on, 1 held out)")
    held, train = np.sort(order[:n_held]), np.sort(order[n_held:])
    if settings.max_texts is not None and len(train) > settings.max_texts:
        train = train[np.sort(np.random.default_rng(settings.seed + 1).permutation(len(train))[:settings.max_texts])]
    return train, held


def split_held_out(examples: pd.DataFrame, settings: AmortizeSettings) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(training texts, held-out texts) of `examples`, split as `held_out_split`."""
    train, held = held_out_split(len(examples), settings)
    return examples.iloc[train].reset_index(drop=True), examples.iloc[held].reset_index(drop=True)


def task_examples(classifier, tokenized: pd.DataFrame, settings: AmortizeSettings, role: str = "classifier_train",
                  batch_size: int = 64) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """A task's unlabeled texts for its classifier's student: the `role` rows of its tokenized table (its training
    texts: never a rationale set), those with fewer than `MIN_TOKENS` real tokens skipped (listed), split as
    `held_out_split`, the chosen ones predicted by the classifier. Returns (training texts, held-out texts,
    skipped)."""
    rows = tokenized[tokenized["role"] == role].reset_index(drop=True)
    if not len(rows):
        raise ValueError(f"the tokenized table has no {role!r} rows to train a student on")
    usable, skipped = split_short(rows)
    if len(skipped):
        logger.warning("%d of %d %s texts skipped (fewer than %d real tokens: nothing to rank)", len(skipped),
                       len(rows), role, MIN_TOKENS)
    train, held = held_out_split(len(usable), settings)  # split first: only the texts used are predicted
    chosen = usable[["example_id", "input_ids"]].reset_index(drop=True)
    predicted = predicted_examples(classifier, chosen.iloc[np.r_[train, held]].reset_index(drop=True), batch_size)
    return predicted.iloc[:len(train)].reset_index(drop=True), predicted.iloc[len(train):].reset_index(drop=True), \
        skipped


def classifier_max_length(classifier, settings: AmortizeSettings) -> int:
    """`max_length`, capped at the classifier's own position limit."""
    return min(settings.max_length, max_positions(classifier.model, classifier.tokenizer) or settings.max_length)


def text_examples(classifier, texts: Sequence[str | Sequence[str]], ids: Sequence[str] | None,
                  settings: AmortizeSettings) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """A user's unlabeled texts (strings or word lists) for a student of `classifier`: tokenized, predicted, too
    short ones skipped (listed), split as `split_held_out`. Returns (training texts, held-out texts, skipped)."""
    examples, skipped = unlabeled_examples(classifier, texts, ids, max_length=classifier_max_length(classifier, settings),
                                           batch_size=2 * settings.batch_size)
    train, held_out = split_held_out(examples, settings)
    return train, held_out, skipped
