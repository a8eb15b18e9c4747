"""Word classes and splitting user text like the SST trees."""
import pytest

from learned_attribution.core.data.words import FUNCTION_WORDS, treebank_words, word_class


@pytest.mark.parametrize("word, expected", [
    ("film", "content"), ("Canada", "content"), ("beautiful", "content"), ("1999", "content"),
    ("the", "function"), ("The", "function"), ("at", "function"), ("n't", "function"), ("'s", "function"),
    ("would", "function"), ("and", "function"), ("they", "function"),
    (".", "punctuation"), ("--", "punctuation"), ("...", "punctuation"), ("``", "punctuation"), ("(", "punctuation"),
])
def test_word_class(word, expected):
    assert word_class(word) == expected


def test_function_words_are_lower_case():
    assert all(word == word.lower() for word in FUNCTION_WORDS)


@pytest.mark.parametrize("text, words", [
    ("A day at the park.", ["A", "day", "at", "the", "park", "."]),
    ("It isn't a well-made film, it's 3.5 stars...", ["It", "is", "n't", "a", "well-made", "film", ",", "it", "'s",
                                                      "3.5", "stars", "..."]),
    ("summarize: good", ["summarize", ":", "good"]),
    ("   ", []),
])
def test_treebank_words(text, words):
    assert treebank_words(text) == words
