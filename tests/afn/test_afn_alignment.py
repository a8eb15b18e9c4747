"""Word and token alignment of two inputs: swapped words, prefix offsets, different subword counts."""
import pytest

from learned_attribution.services.afn.alignment import (AlignmentError, TokenUnit, WordLink, align_tokens, align_words,
                                               prompt_word_links)
from learned_attribution.services.afn.strength import tokenize_words


def test_equal_length_aligns_by_position():
    links = align_words("a day at the park".split(), "a walk at the beach".split())
    assert links == [WordLink(0, 0, False), WordLink(1, 1, True), WordLink(2, 2, False), WordLink(3, 3, False),
                     WordLink(4, 4, True)]


def test_different_lengths_align_matching_blocks():
    links = align_words("the film is good".split(), "the film is very good".split())
    assert links == [WordLink(0, 0, False), WordLink(1, 1, False), WordLink(2, 2, False), WordLink(3, 4, False)]
    # a replacement of equal size inside a longer pair aligns as changed
    links = align_words("a day at the park".split(), "a walk at the sunny park".split())
    assert WordLink(1, 1, True) in links and WordLink(4, 5, False) in links
    assert all(link.a != 3 or link.b == 3 for link in links)


@pytest.mark.parametrize("a, b, message", [
    ("a day", "a day", "identical"),
    ("good film", "bad movie", "no unchanged word"),
    ("", "a day", "no words"),
])
def test_unalignable_pairs_raise(a, b, message):
    with pytest.raises(AlignmentError, match=message):
        align_words(a.split(), b.split())


def test_prefix_offsets(tiny_tokenizer):
    sentence = ["a", "day", "at", "the", "park"]
    a = tokenize_words(tiny_tokenizer, ["summarize", ":"] + sentence, 32)  # prefix: 2 words, 2 tokens
    b = tokenize_words(tiny_tokenizer, ["translate"] + sentence, 32)  # prefix: 1 word, 1 token
    links = prompt_word_links(2, 1, len(sentence))
    assert links[0] == WordLink(2, 1, False) and links[-1] == WordLink(6, 5, False)
    units = align_tokens(a.word_ids, b.word_ids, links)
    specials = [u for u in units if u.special]
    assert [(u.tokens_a, u.tokens_b) for u in specials] == [((0,), (0,)), ((8,), (7,))]  # [CLS], [SEP]
    words = [u for u in units if not u.special]
    # sentence token k sits at 1 + 2 + k in A and 1 + 1 + k in B; the prefix tokens stay unaligned
    assert [(u.tokens_a, u.tokens_b) for u in words] == [((3 + k,), (2 + k,)) for k in range(5)]
    assert [a.tokens[u.tokens_a[0]] for u in words] == sentence
    assert not any(u.changed for u in units)


def test_swapped_word_with_more_subwords_forms_one_unit(tiny_tokenizer):
    a = tokenize_words(tiny_tokenizer, ["a", "unbelievable", "day"], 32)  # [CLS] a un ##believ ##able day [SEP]
    b = tokenize_words(tiny_tokenizer, ["a", "good", "day"], 32)  # [CLS] a good day [SEP]
    units = align_tokens(a.word_ids, b.word_ids, align_words(["a", "unbelievable", "day"], ["a", "good", "day"]))
    assert [u for u in units if not u.special] == [
        TokenUnit((1,), (1,), 0, 0, False),
        TokenUnit((2, 3, 4), (2,), 1, 1, True),  # mean of three subword states vs one
        TokenUnit((5,), (3,), 2, 2, False),  # the words after it realign
    ]
    assert [(u.tokens_a, u.tokens_b) for u in units if u.special] == [((0,), (0,)), ((6,), (4,))]


def test_swapped_word_with_same_subword_count_aligns_one_to_one(tiny_tokenizer):
    a = tokenize_words(tiny_tokenizer, ["a", "day", "at", "the", "park"], 32)
    b = tokenize_words(tiny_tokenizer, ["a", "walk", "at", "the", "beach"], 32)
    units = align_tokens(a.word_ids, b.word_ids, align_words(["a", "day", "at", "the", "park"],
                                                             ["a", "walk", "at", "the", "beach"]))
    assert all(len(u.tokens_a) == len(u.tokens_b) == 1 for u in units)
    assert [u.changed for u in units if not u.special] == [False, True, False, False, True]


def test_a_word_without_tokens_fails_alignment():
    with pytest.raises(AlignmentError, match="word 1 of input B has no tokens"):
        align_tokens([None, 0, 1, None], [None, 0, None], [WordLink(0, 0, False), WordLink(1, 1, True)])
