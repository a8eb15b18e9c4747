"""Shift pairs: context perturbations and prompt conditions (SPEC §10).

Context perturbations built from the shipped data are *SST minimal pairs*: two phrases that both occur
as labelled, non-neutral nodes of the SST trees and differ in exactly one word at the same position, that
word being a content word on both sides ("a terrific effort" / "a worthwhile effort", "lacks in depth" /
"lacks in substance"). Both sides are attested text, the swap keeps the syntactic frame (the paper's
"a day at the park" / "a walk at the park"), and no hand-made word list decides what is swapped. At most
one pair is drawn per frame (the phrase minus the swapped slot) and a phrase is used at most once, seeded.
Example pairs from the parameters (the paper's own case) and a user TSV add to them.

Prompt conditions put the same sentence behind two task prefixes ("summarize:" vs "translate:").
"""
from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pandas as pd

from .alignment import WordLink, align_words, prompt_word_links
from .corpus import Phrase
from learned_attribution.core.data.words import CONTENT, treebank_words, word_class

CONTEXT, PROMPT = "context", "prompt"
PAIR_COLUMNS = ["pair_id", "kind", "source", "text_a", "text_b", "words_a", "words_b", "link_a", "link_b",
                "link_changed", "prefix_a", "prefix_b", "label_a", "label_b"]


@dataclass(frozen=True)
class ShiftPair:
    """Two inputs A and B and the word alignment between them."""

    pair_id: str
    kind: str  # CONTEXT or PROMPT
    source: str  # sst_minimal_pair, example, user_file, corpus (prompt pairs)
    words_a: tuple[str, ...]
    words_b: tuple[str, ...]
    links: tuple[WordLink, ...]
    prefix_a: str = ""
    prefix_b: str = ""
    label_a: int | None = None  # SST 0-4 label of a tree phrase
    label_b: int | None = None


def context_pair(pair_id: str, source: str, words_a: Sequence[str], words_b: Sequence[str],
                 label_a: int | None = None, label_b: int | None = None) -> ShiftPair:
    """A context perturbation; raises AlignmentError when the two texts do not align (see `align_words`)."""
    links = align_words(words_a, words_b)
    return ShiftPair(pair_id, CONTEXT, source, tuple(words_a), tuple(words_b), tuple(links),
                     label_a=label_a, label_b=label_b)


def prompt_pair(pair_id: str, sentence: Sequence[str], prefix_a: str, prefix_b: str,
                label: int | None = None) -> ShiftPair:
    """One sentence behind two task prefixes; the prefixes are split into words like any user text."""
    words_a, words_b = treebank_words(prefix_a), treebank_words(prefix_b)
    if words_a == words_b:
        raise ValueError(f"parameter afn.pairs.prompt_prefixes: the prefixes {prefix_a!r} and {prefix_b!r} "
                         "are the same words")
    links = prompt_word_links(len(words_a), len(words_b), len(sentence))
    return ShiftPair(pair_id, PROMPT, "corpus", tuple(words_a) + tuple(sentence), tuple(words_b) + tuple(sentence),
                     tuple(links), prefix_a, prefix_b, label, label)


def sst_minimal_pairs(phrases: Iterable[Phrase], n_pairs: int, seed: int) -> list[tuple[Phrase, Phrase]]:
    """A seeded draw of `n_pairs` phrase pairs differing in exactly one content word (module docstring).
    Raises when the phrases hold fewer such pairs than asked for."""
    if isinstance(n_pairs, bool) or not isinstance(n_pairs, int) or n_pairs < 0:
        raise ValueError(f"parameter afn.pairs.n_context_pairs={n_pairs!r}: must be a non-negative integer")
    if n_pairs == 0:
        return []
    by_words: dict[tuple[str, ...], Phrase] = {}
    for phrase in phrases:
        by_words.setdefault(phrase.words, phrase)
    frames: dict[tuple, list[Phrase]] = {}
    for words, phrase in by_words.items():
        for slot, word in enumerate(words):
            if word_class(word) == CONTENT:
                frames.setdefault((words[:slot], words[slot + 1:]), []).append(phrase)
    rng = random.Random(seed)
    keys = sorted(key for key, members in frames.items()
                  if len({m.words[len(key[0])].lower() for m in members}) > 1)
    rng.shuffle(keys)
    pairs, used = [], set()
    for key in keys:
        slot = len(key[0])
        members = [m for m in frames[key] if m.words not in used]
        rng.shuffle(members)
        for k, first in enumerate(members):
            partner = next((m for m in members[k + 1:] if m.words[slot].lower() != first.words[slot].lower()), None)
            if partner is not None:
                pairs.append((first, partner))
                used.update({first.words, partner.words})
                break
        if len(pairs) == n_pairs:
            return pairs
    raise ValueError(f"parameter afn.pairs.n_context_pairs={n_pairs}: the SST trees hold only {len(pairs)} "
                     "minimal pairs in the configured word range")


def pairs_to_frame(pairs: Sequence[ShiftPair]) -> pd.DataFrame:
    """The pair table (one row per pair; the word alignment as three parallel list columns)."""
    rows = [{
        "pair_id": p.pair_id, "kind": p.kind, "source": p.source,
        "text_a": " ".join(p.words_a), "text_b": " ".join(p.words_b),
        "words_a": list(p.words_a), "words_b": list(p.words_b),
        "link_a": [link.a for link in p.links], "link_b": [link.b for link in p.links],
        "link_changed": [link.changed for link in p.links],
        "prefix_a": p.prefix_a, "prefix_b": p.prefix_b, "label_a": p.label_a, "label_b": p.label_b,
    } for p in pairs]
    frame = pd.DataFrame(rows, columns=PAIR_COLUMNS)
    for column in ("label_a", "label_b"):
        frame[column] = frame[column].astype("Int64")
    return frame


def pairs_from_frame(frame: pd.DataFrame) -> list[ShiftPair]:
    """Inverse of `pairs_to_frame` (after a Parquet round trip list columns come back as arrays)."""
    missing = set(PAIR_COLUMNS) - set(frame.columns)
    if missing:
        raise ValueError(f"the AFN pair table lacks the columns {sorted(missing)}")

    def label(value) -> int | None:
        return None if pd.isna(value) else int(value)

    return [ShiftPair(
        row.pair_id, row.kind, row.source, tuple(str(w) for w in row.words_a), tuple(str(w) for w in row.words_b),
        tuple(WordLink(int(a), int(b), bool(c)) for a, b, c in zip(row.link_a, row.link_b, row.link_changed)),
        row.prefix_a, row.prefix_b, label(row.label_a), label(row.label_b),
    ) for row in frame.itertuples(index=False)]
