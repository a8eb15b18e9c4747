"""Which token of input A corresponds to which token of input B (SPEC §10, activation shift).

Alignment is defined on words first, then carried to subword tokens:

* Words. Two texts of the same length align position by position; a position whose words differ
  (exactly, case included) is *changed*. Texts of different lengths align through difflib's longest
  matching blocks: equal blocks are unchanged, replaced blocks of equal size align position by position
  as changed, inserted / deleted words and unequal replacements stay unaligned (they have no
  counterpart). For a prompt pair (one sentence behind two prefixes) sentence word k is word
  n_prefix_a + k of A and n_prefix_b + k of B, unchanged; the prefix words are not aligned.
* Tokens. For each aligned word pair: when both words have the same number of subword tokens (always the
  case for an unchanged word), the subwords align one to one; otherwise (a swapped word split into a
  different number of pieces) the word forms one unit whose state on each side is the mean of its
  subword states, and each of A's subwords carries that unit's shift. Special tokens align by order
  ([CLS] to [CLS], [SEP] to [SEP]); their shifts are reported but kept out of R_H.
"""
from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass


class AlignmentError(ValueError):
    """Two inputs that cannot be aligned as a shift pair."""


@dataclass(frozen=True)
class WordLink:
    """Word `a` of input A corresponds to word `b` of input B."""

    a: int
    b: int
    changed: bool


@dataclass(frozen=True)
class TokenUnit:
    """Tokens of A and B whose (mean) hidden states are compared; one token each unless a changed word
    has a different number of subwords on the two sides."""

    tokens_a: tuple[int, ...]
    tokens_b: tuple[int, ...]
    word_a: int | None  # None for a special token
    word_b: int | None
    changed: bool

    @property
    def special(self) -> bool:
        return self.word_a is None


def align_words(words_a: Sequence[str], words_b: Sequence[str]) -> list[WordLink]:
    """Word alignment of a context pair (rules in the module docstring).

    Raises AlignmentError for an empty side, identical texts (nothing perturbed), or texts that share no
    unchanged word (nothing stays in place, so this is not a context perturbation)."""
    if not words_a or not words_b:
        raise AlignmentError("a side of the pair has no words")
    if list(words_a) == list(words_b):
        raise AlignmentError("the two texts are identical: nothing is perturbed")
    if len(words_a) == len(words_b):
        links = [WordLink(i, i, a != b) for i, (a, b) in enumerate(zip(words_a, words_b))]
    else:
        links = []
        matcher = difflib.SequenceMatcher(a=list(words_a), b=list(words_b), autojunk=False)
        for tag, a0, a1, b0, b1 in matcher.get_opcodes():
            if tag == "equal":
                links += [WordLink(a0 + k, b0 + k, False) for k in range(a1 - a0)]
            elif tag == "replace" and a1 - a0 == b1 - b0:
                links += [WordLink(a0 + k, b0 + k, True) for k in range(a1 - a0)]
    if not any(not link.changed for link in links):
        raise AlignmentError("the two texts share no unchanged word to anchor the alignment")
    return links


def prompt_word_links(n_prefix_a: int, n_prefix_b: int, n_words: int) -> list[WordLink]:
    """Word alignment of one sentence of `n_words` words behind prefixes of `n_prefix_a` / `n_prefix_b` words."""
    if n_words < 1:
        raise AlignmentError("the sentence has no words")
    return [WordLink(n_prefix_a + k, n_prefix_b + k, False) for k in range(n_words)]


def _positions_by_word(word_ids: Sequence[int | None]) -> dict[int, list[int]]:
    positions: dict[int, list[int]] = {}
    for position, word in enumerate(word_ids):
        if word is not None:
            positions.setdefault(word, []).append(position)
    return positions


def align_tokens(word_ids_a: Sequence[int | None], word_ids_b: Sequence[int | None],
                 links: Sequence[WordLink]) -> list[TokenUnit]:
    """Token units for the word links (rules in the module docstring), special tokens first.

    Raises AlignmentError when a linked word has no token on one side (e.g. the tokenizer dropped it)."""
    specials_a = [i for i, word in enumerate(word_ids_a) if word is None]
    specials_b = [i for i, word in enumerate(word_ids_b) if word is None]
    units = []
    if len(specials_a) == len(specials_b):
        units += [TokenUnit((a,), (b,), None, None, False) for a, b in zip(specials_a, specials_b)]
    positions_a, positions_b = _positions_by_word(word_ids_a), _positions_by_word(word_ids_b)
    for link in links:
        tokens_a, tokens_b = positions_a.get(link.a, []), positions_b.get(link.b, [])
        if not tokens_a or not tokens_b:
            side = "A" if not tokens_a else "B"
            raise AlignmentError(f"word {link.a if side == 'A' else link.b} of input {side} has no tokens")
        if len(tokens_a) == len(tokens_b):
            units += [TokenUnit((a,), (b,), link.a, link.b, link.changed) for a, b in zip(tokens_a, tokens_b)]
        else:
            units.append(TokenUnit(tuple(tokens_a), tuple(tokens_b), link.a, link.b, link.changed))
    return units
