"""Continuation, punctuation and closed-class flags (the `position` and `token_kind` signal sets) by each tokenizer's
own word boundaries: known answers for a WordPiece, a byte-level BPE and two SentencePiece (Unigram) tokenizers
built from the small vocabularies of the test fixtures (tests/conftest.py)."""
from __future__ import annotations

import pandas as pd
import pytest
import torch

from learned_attribution.core.models.projection import project_to_subwords
from learned_attribution.core.models.architectures import (BYTE_LEVEL_BPE, SENTENCEPIECE, WORDPIECE, TokenConvention,
                                                      token_convention)
from learned_attribution.core.models.signals import (TokenVocabulary, continuation_signals, position_signals,
                                               token_kind_signals, token_vocabulary)

WORDS = ["The", "unbelievable", "film", ",", "and", "it"]
# Per token, [CLS]/[SEP] included: continuation, punctuation, closed-class, content.
WORDPIECE_ANSWER = {
    "tokens": ["[CLS]", "the", "un", "##believ", "##able", "film", ",", "and", "it", "[SEP]"],
    "continuation": [0, 0, 0, 1, 1, 0, 0, 0, 0, 0],
    "punctuation": [0, 0, 0, 0, 0, 0, 1, 0, 0, 0],
    "closed_class": [0, 1, 0, 0, 0, 0, 0, 1, 1, 0],
    "content": [0, 0, 1, 1, 1, 1, 0, 0, 0, 0],
}
BYTE_LEVEL_ANSWER = {**WORDPIECE_ANSWER,
                     "tokens": ["<s>", "ĠThe", "Ġun", "believ", "able", "Ġfilm", "Ġ,", "Ġand", "Ġit", "</s>"]}
# SentencePiece has no "▁,": the comma is a lone "▁" (a boundary piece, counted as punctuation) then ",", which
# starts the word the "▁" announced.
SENTENCEPIECE_ANSWER = {
    "tokens": ["▁The", "▁un", "believ", "able", "▁film", "▁", ",", "▁and", "▁it"],
    "continuation": [0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0],
    "punctuation": [0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0],
    "closed_class": [0, 1, 0, 0, 0, 0, 0, 0, 1, 1, 0],
    "content": [0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0],
}
CASES = {  # family -> (convention, answer); the SentencePiece frames differ: <s> ... </s> and [CLS] ... [SEP]
    "bert": (WORDPIECE, WORDPIECE_ANSWER),
    "roberta": (BYTE_LEVEL_BPE, BYTE_LEVEL_ANSWER),
    "xlm-roberta": (SENTENCEPIECE, {**SENTENCEPIECE_ANSWER,
                                    "tokens": ["<s>", *SENTENCEPIECE_ANSWER["tokens"], "</s>"]}),
    "deberta-v2": (SENTENCEPIECE, {**SENTENCEPIECE_ANSWER,
                                   "tokens": ["[CLS]", *SENTENCEPIECE_ANSWER["tokens"], "[SEP]"]}),
}


def _flags(tokenizer, input_ids: list[int]) -> dict[str, list[int]]:
    ids = torch.tensor([input_ids])
    mask = torch.ones_like(ids)
    vocabulary = token_vocabulary(tokenizer)
    position = position_signals(ids, mask, vocabulary)[0]
    kinds = token_kind_signals(ids, mask, vocabulary)[0]
    return {"continuation": position[:, 2].int().tolist(), "punctuation": kinds[:, 0].int().tolist(),
            "closed_class": kinds[:, 1].int().tolist(), "content": kinds[:, 2].int().tolist()}


@pytest.mark.parametrize("family", sorted(CASES))
def test_known_answers_for_each_tokenizer_kind(tiny_tokenizer, family):
    convention, answer = CASES[family]
    tokenizer = tiny_tokenizer(family)
    assert token_convention(tokenizer) == convention
    frame = pd.DataFrame({"words": [WORDS], "word_rationale": [None]})
    input_ids = project_to_subwords(frame, tokenizer, 64)["input_ids"].iloc[0]
    assert tokenizer.convert_ids_to_tokens(input_ids) == answer["tokens"]
    assert _flags(tokenizer, input_ids) == {key: answer[key] for key in ("continuation", "punctuation",
                                                                          "closed_class", "content")}


def test_a_byte_level_text_without_a_prefix_space_starts_with_a_word(tiny_tokenizer):
    """RoBERTa's plain-text tokenisation gives the first word no `Ġ` ("The", not "ĠThe"): it still starts a word,
    and "the" is still a closed-class word there; a bare piece later in the text continues its word."""
    tokenizer = tiny_tokenizer("roberta")
    input_ids = tokenizer("The film")["input_ids"]
    assert tokenizer.convert_ids_to_tokens(input_ids) == ["<s>", "The", "Ġfilm", "</s>"]
    flags = _flags(tokenizer, input_ids)
    assert flags["continuation"] == [0, 0, 0, 0] and flags["closed_class"] == [0, 1, 0, 0]
    the, film = tokenizer.convert_tokens_to_ids(["The", "Ġfilm"])
    later = _flags(tokenizer, [tokenizer.cls_token_id, film, the, tokenizer.sep_token_id])  # "filmThe"
    assert later["continuation"] == [0, 0, 1, 0] and later["closed_class"] == [0, 0, 0, 0]
    assert later["content"] == [0, 1, 1, 0]


def test_the_vocabulary_sets_of_each_kind(tiny_tokenizer):
    bert, roberta, xlmr = (tiny_tokenizer(f) for f in ("bert", "roberta", "xlm-roberta"))

    def members(tokenizer, ids: torch.Tensor) -> set[str]:
        return set(tokenizer.convert_ids_to_tokens(ids.tolist()))

    wordpiece = token_vocabulary(bert)
    assert not wordpiece.marks_word_starts and wordpiece.boundary.numel() == 0
    assert members(bert, wordpiece.continuation) == {"##believ", "##able", "##s"}
    assert {"the", "and", "it", "a", "not"} <= members(bert, wordpiece.closed_class)
    assert members(bert, wordpiece.punctuation) == {",", ".", "!", "?"}  # special tokens are never punctuation

    byte_level = token_vocabulary(roberta)
    assert byte_level.marks_word_starts
    continuation = members(roberta, byte_level.continuation)
    assert {"believ", "able", "The"} <= continuation and not any(t.startswith("Ġ") for t in continuation)
    assert {"ĠThe", "Ġthe", "The", "Ġand", "Ġit"} <= members(roberta, byte_level.closed_class)  # marker stripped
    assert {"Ġ,", "Ġ.", ",", "."} <= members(roberta, byte_level.punctuation)
    assert "Ġ" in members(roberta, byte_level.boundary)  # the byte-level space alone

    sentencepiece = token_vocabulary(xlmr)
    assert sentencepiece.marks_word_starts
    assert members(xlmr, sentencepiece.boundary) == {"▁"}
    assert {"believ", "able", "s"} <= members(xlmr, sentencepiece.continuation)
    assert {"▁The", "▁the", "▁and", "▁it"} <= members(xlmr, sentencepiece.closed_class)
    assert {"▁", ",", ".", "!", "?"} == members(xlmr, sentencepiece.punctuation)


def test_conventions_read_pieces():
    assert WORDPIECE.read("##able").continues and not WORDPIECE.read("able").continues
    assert WORDPIECE.read("##,").text == "##,"  # WordPiece strings are read raw, as before the adapter
    piece = BYTE_LEVEL_BPE.read("Ġthe")
    assert (piece.text, piece.continues, piece.boundary) == ("the", False, False)
    assert BYTE_LEVEL_BPE.read("the").continues
    assert BYTE_LEVEL_BPE.read("Ġ").boundary and not BYTE_LEVEL_BPE.read("Ġ").continues
    assert BYTE_LEVEL_BPE.read("âĢĻ").text == "\u2019"  # bytes decoded: a right single quote
    assert BYTE_LEVEL_BPE.read("âĢ").partial  # two of its three bytes: no readable character
    piece = SENTENCEPIECE.read("▁and")
    assert (piece.text, piece.continues) == ("and", False)
    assert SENTENCEPIECE.read("▁").boundary and SENTENCEPIECE.read("able").continues
    assert TokenConvention("custom", word_start_marker="@").read("@x").text == "x"


def test_wordpiece_vocabularies_keep_their_continuation_flags_anywhere():
    """Hand-made WordPiece vocabularies (the default) mark continuations themselves: no first-token rule."""
    ids = torch.tensor([[1, 7, 8, 2]])
    vocabulary = TokenVocabulary(continuation=torch.tensor([7]))
    assert continuation_signals(ids, vocabulary)[0].tolist() == [0, 1, 0, 0]
    marked = TokenVocabulary(continuation=torch.tensor([7, 8]), boundary=torch.tensor([5]), marks_word_starts=True)
    assert continuation_signals(ids, marked)[0].tolist() == [0, 0, 1, 0]
    after_boundary = torch.tensor([[1, 9, 5, 8, 2]])
    assert continuation_signals(after_boundary, marked)[0].tolist() == [0, 0, 0, 0, 0]
