"""Corpus phrases from SST trees, user files, SST minimal pairs, prompt pairs and the pair table."""
import pandas as pd
import pytest

from learned_attribution.core.data.schema import RawText
from learned_attribution.core.data.sst import TreeParseError
from learned_attribution.services.afn.alignment import WordLink
from learned_attribution.services.afn.corpus import (Phrase, read_user_pairs, read_user_sentences, sample_phrases,
                                                     sst_phrases)
from learned_attribution.services.afn.pairs import (context_pair, pairs_from_frame, pairs_to_frame, prompt_pair,
                                                    sst_minimal_pairs)

TREES = RawText("trees.txt", "\n".join([
    # "a truly great film ." root 4; "truly great film" 3 words, label 4; "great film" 2 words
    "(4 (3 (2 a) (4 (2 truly) (4 (4 great) (2 film)))) (2 .))",
    # neutral phrases only: nothing qualifies
    "(2 (2 (2 it) (2 (2 is) (2 (2 a) (2 film)))) (2 .))",
]))


def test_sst_phrases_keep_non_neutral_spans_in_range():
    grouped = sst_phrases(TREES, "dev", min_words=3, max_words=4)
    assert len(grouped) == 1
    assert sorted(p.words for p in grouped[0]) == [("a", "truly", "great", "film"), ("truly", "great", "film")]
    assert {p.label for p in grouped[0]} == {3, 4}
    assert all(p.split == "dev" and p.line == 1 for p in grouped[0])


def test_bad_tree_names_file_and_line():
    with pytest.raises(TreeParseError, match="bad.txt, line 2"):
        sst_phrases(RawText("bad.txt", "(3 (3 good) (2 film))\n(3 (3 good"), "dev", 1, 4)
    with pytest.raises(ValueError, match="min_words"):
        sst_phrases(TREES, "dev", 5, 4)


def test_sample_phrases_is_seeded_one_per_sentence_and_distinct():
    grouped = [[Phrase(("p", str(i), str(j)), 3, "train", i, j) for j in range(3)] for i in range(10)]
    grouped.append([Phrase(("p", "0", "0"), 3, "train", 99, 0)])  # same text as a phrase of sentence 0
    first, again = sample_phrases(grouped, 8, seed=1), sample_phrases(grouped, 8, seed=1)
    assert first == again
    assert len({p.line for p in first}) == 8
    assert len({p.words for p in first}) == 8
    with pytest.raises(ValueError, match="afn.corpus.n_phrases=20"):
        sample_phrases(grouped, 20, seed=1)


def phrase(text, label=3, line=1):
    return Phrase(tuple(text.split()), label, "train", line, 0)


def test_minimal_pairs_swap_one_content_word():
    phrases = [phrase("a terrific effort"), phrase("a worthwhile effort", 4), phrase("the terrific effort"),
               phrase("a terrific look"), phrase("lacks in depth"), phrase("lacks in substance", 1)]
    pairs = sst_minimal_pairs(phrases, 2, seed=0)
    assert len(pairs) == 2
    for a, b in pairs:
        differing = [i for i, (x, y) in enumerate(zip(a.words, b.words)) if x != y]
        assert len(a.words) == len(b.words) and len(differing) == 1
        assert a.words[differing[0]] not in ("a", "the")  # "a" vs "the" is a function-word swap
    used = [p.words for pair in pairs for p in pair]
    assert len(used) == len(set(used))  # no phrase twice
    assert ("lacks", "in", "depth") in used
    assert sst_minimal_pairs(phrases, 2, seed=0) == pairs
    with pytest.raises(ValueError, match="n_context_pairs=3"):
        sst_minimal_pairs(phrases, 3, seed=0)


def test_case_only_difference_is_not_a_pair():
    with pytest.raises(ValueError, match="only 0"):
        sst_minimal_pairs([phrase("Good film ."), phrase("good film .")], 1, seed=0)


def test_prompt_pair_layout():
    pair = prompt_pair("p0", ["a", "day"], "summarize:", "translate into French:")
    assert pair.words_a == ("summarize", ":", "a", "day")
    assert pair.words_b == ("translate", "into", "French", ":", "a", "day")
    assert pair.links == (WordLink(2, 4, False), WordLink(3, 5, False))
    with pytest.raises(ValueError, match="prompt_prefixes"):
        prompt_pair("p1", ["a"], "summarize:", "summarize :")


def test_pair_table_round_trip_through_parquet(tmp_path):
    pairs = [context_pair("c0", "example", "a day at the park".split(), "a walk at the beach".split(), 3, None),
             prompt_pair("p0", ["a", "day"], "summarize:", "translate:", label=1)]
    path = tmp_path / "pairs.parquet"
    pairs_to_frame(pairs).to_parquet(path)
    assert pairs_from_frame(pd.read_parquet(path)) == pairs


def test_user_sentences_count_empty_lines():
    raw = RawText("data/sentences.txt", "A day at the park.\n\n   \nIt isn't good\n")
    sentences, skips = read_user_sentences(raw)
    assert sentences == [(1, ["A", "day", "at", "the", "park", "."]), (4, ["It", "is", "n't", "good"])]
    assert [(s.item, s.reason) for s in skips] == [("data/sentences.txt:2", "empty sentence"),
                                                   ("data/sentences.txt:3", "empty sentence")]


def test_user_pairs():
    pairs, skips = read_user_pairs(RawText("pairs.tsv", "a day at the park\ta walk at the park\n\n \tgood\n"))
    assert pairs == [(1, "a day at the park", "a walk at the park")]
    assert [(s.item, s.reason) for s in skips] == [("pairs.tsv:3", "empty sentence in pair")]
    with pytest.raises(ValueError, match="pairs.tsv, line 2: expected 2 tab-separated columns"):
        read_user_pairs(RawText("pairs.tsv", "a day\ta walk\nno tab here\n"))
