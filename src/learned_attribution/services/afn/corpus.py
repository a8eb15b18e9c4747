"""The AFN corpus: sentiment-bearing SST phrases, drawn seeded from the labelled tree nodes, plus user files.

A phrase is the word span of one SST tree node whose label is not neutral (label != 2) and that covers
`min_words`..`max_words` words. Nested nodes of one sentence overlap heavily ("is still charming",
"still charming ."), so the corpus takes at most one phrase per tree sentence: a seeded sample of
sentences, then a seeded phrase of each.
"""
from __future__ import annotations

import logging
import random
from dataclasses import dataclass

import pandas as pd

from learned_attribution.core.data.schema import RawText
from learned_attribution.core.data.sst import TreeParseError, parse_tree
from learned_attribution.core.data.words import treebank_words

from ..config import check_word_range

logger = logging.getLogger(__name__)

NEUTRAL_LABEL = 2


@dataclass(frozen=True)
class Phrase:
    """One labelled SST phrase: its words, its 0-4 label and where it comes from."""

    words: tuple[str, ...]
    label: int
    split: str
    line: int  # 1-based line of the tree in its file
    start: int  # index of the phrase's first word in the tree sentence


@dataclass(frozen=True)
class Skip:
    """An input left out, with the reason (collected into the run's skip table and counted in the report)."""

    stage: str  # corpus, pairs, strength or shift
    item: str  # file:line, sentence id or pair id
    reason: str  # a short category, counted in the report
    detail: str = ""

    def as_row(self) -> dict:
        return {"stage": self.stage, "item": self.item, "reason": self.reason, "detail": self.detail}


AFN_SKIP_COLUMNS = ["stage", "item", "reason", "detail"]


def sst_phrases(trees: RawText, split: str, min_words: int, max_words: int) -> list[list[Phrase]]:
    """All non-neutral phrases of `min_words`..`max_words` words, grouped per tree sentence (one list per
    line; sentences without such a phrase are left out). A tree that does not parse raises with its line."""
    check_word_range(min_words, max_words, "afn")
    grouped = []
    for line_no, line in enumerate(trees.lines(), start=1):
        if not line.strip():
            continue
        try:
            words, nodes = parse_tree(line)
        except TreeParseError as error:
            raise TreeParseError(f"{trees.path}, line {line_no}: {error}") from error
        phrases, seen = [], set()
        for node in nodes:
            span = tuple(words[node.start:node.end])
            if node.label != NEUTRAL_LABEL and min_words <= len(span) <= max_words and span not in seen:
                seen.add(span)
                phrases.append(Phrase(span, node.label, split, line_no, node.start))
        if phrases:
            grouped.append(phrases)
    return grouped


def sample_phrases(grouped: list[list[Phrase]], n_phrases: int, seed: int) -> list[Phrase]:
    """A seeded sample of `n_phrases` phrases, at most one per tree sentence and no repeated text
    (case-insensitive). Raises when the data hold fewer candidate sentences than asked for."""
    if n_phrases < 1:
        raise ValueError(f"parameter afn.corpus.n_phrases={n_phrases!r}: must be at least 1")
    rng = random.Random(seed)
    order = list(range(len(grouped)))
    rng.shuffle(order)
    chosen, texts = [], set()
    for index in order:
        phrase = rng.choice(grouped[index])
        text = " ".join(phrase.words).lower()
        if text in texts:
            continue
        texts.add(text)
        chosen.append(phrase)
        if len(chosen) == n_phrases:
            return chosen
    raise ValueError(f"parameter afn.corpus.n_phrases={n_phrases}: the SST trees hold only {len(chosen)} "
                     "sentences with a distinct phrase in the configured word range")


def read_user_sentences(raw: RawText) -> tuple[list[tuple[int, list[str]]], list[Skip]]:
    """A user file of sentences, one per line (UTF-8; catalog entry `afn.user_sentences`): (line number, words)
    per sentence. Words are split off like the SST trees' (`words.treebank_words`). Empty lines are skipped and
    counted, each naming the file and line."""
    sentences, skips = [], []
    for line_no, line in enumerate(raw.lines(), start=1):
        words = treebank_words(line)
        if not words:
            skips.append(Skip("corpus", f"{raw.path}:{line_no}", "empty sentence"))
            continue
        sentences.append((line_no, words))
    return sentences, skips


def read_user_pairs(raw: RawText) -> tuple[list[tuple[int, str, str]], list[Skip]]:
    """A user TSV of sentence pairs (catalog entry `afn.user_pairs`), `sentence_a<TAB>sentence_b`, no header:
    (line number, a, b) per pair. Blank lines are ignored; a line without exactly two tab-separated columns raises
    with the file and line; a pair with an empty side is skipped and counted."""
    pairs, skips = [], []
    for line_no, line in enumerate(raw.lines(), start=1):
        if not line.strip():
            continue
        columns = line.split("\t")
        if len(columns) != 2:
            raise ValueError(f"{raw.path}, line {line_no}: expected 2 tab-separated columns "
                             f"(sentence_a<TAB>sentence_b), found {len(columns)}")
        a, b = (column.strip() for column in columns)
        if not a or not b:
            skips.append(Skip("pairs", f"{raw.path}:{line_no}", "empty sentence in pair"))
            continue
        pairs.append((line_no, a, b))
    return pairs, skips


def skips_frame(skips: list[Skip]) -> pd.DataFrame:
    """One stage's skips as a table (stage, item, reason, detail), each logged as a warning."""
    for skip in skips:
        logger.warning("AFN skipped %s %s: %s %s", skip.stage, skip.item, skip.reason, skip.detail)
    return pd.DataFrame([skip.as_row() for skip in skips], columns=AFN_SKIP_COLUMNS)


def collect_skips(*skip_tables: pd.DataFrame) -> pd.DataFrame:
    """All skipped inputs of the run in one table (stage, item, reason, detail)."""
    tables = [t for t in skip_tables if not t.empty]
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=AFN_SKIP_COLUMNS)
