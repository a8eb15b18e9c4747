"""The afn nodes on a tiny saved BERT: counted skips for empty texts, texts over max_length and pairs that
do not align; tables with the promised shape."""
import pandas as pd
import pytest

from learned_attribution.services.afn.alignment import WordLink
from learned_attribution.services.afn.pairs import ShiftPair, pairs_to_frame
from learned_attribution.core.data.schema import RawText
from learned_attribution.pipelines.afn import nodes

AFN = {"layer": None, "percentile": 75, "batch_size": 2, "num_threads": 1}


@pytest.fixture(scope="module")
def encoder(tiny_bert, tiny_tokenizer, tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny_encoder")
    tiny_bert.save_pretrained(folder)
    tiny_tokenizer.save_pretrained(folder)
    return {"name_or_path": str(folder)}


def test_build_corpus_adds_user_sentences_and_counts_empty_lines(tmp_path):
    trees = RawText("trees.txt", "(4 (3 (2 a) (4 (2 truly) (4 (4 great) (2 film)))) (2 .))")
    user = tmp_path / "sentences.txt"
    user.write_text("a day at the park .\n\n", encoding="utf-8")
    params = {"n_phrases": 1, "min_words": 3, "max_words": 5, "splits": ["dev"], "user_sentences_file": str(user)}
    corpus, skipped = nodes.build_corpus(RawText("t", ""), trees, RawText("t", ""), params, seed=0)
    assert corpus["source"].tolist() == ["sst", "user"]
    assert corpus["words"].iloc[1] == ["a", "day", "at", "the", "park", "."]
    assert skipped[["stage", "reason"]].values.tolist() == [["corpus", "empty sentence"]]
    with pytest.raises(ValueError, match="afn.corpus.splits"):
        nodes.build_corpus(trees, trees, trees, {**params, "splits": ["validation"]}, seed=0)


def test_measure_strengths_skips_long_and_empty_texts(encoder):
    corpus = pd.DataFrame({"sentence_id": ["s0", "s1", "s2"], "source": "sst",
                           "words": [["a", "day", "at", "the", "park"], ["a"] * 20, []]})
    table, skipped = nodes.measure_strengths(corpus, encoder, max_length=12, afn=AFN)
    assert set(table["sentence_id"]) == {"s0"}
    assert sorted(table["layer"].unique()) == [0, 1, 2]
    assert len(table) == 3 * 5  # five non-special tokens per layer
    assert table.loc[table["word"] == "the", "word_class"].iloc[0] == "function"
    assert sorted(skipped["reason"]) == ["empty text", "over max_length"]
    assert skipped.loc[skipped["reason"] == "over max_length", "detail"].iloc[0] == "22 tokens, over max_length=12"


def test_measure_shifts_counts_pairs_that_fail(encoder):
    ok = ShiftPair("ok", "context", "example", ("a", "day", "at", "the", "park"), ("a", "walk", "at", "the", "park"),
                   tuple(WordLink(i, i, i == 1) for i in range(5)))
    vanishing = ShiftPair("vanish", "context", "example", ("a", "day"), ("a", "\u200b"),  # a word with no tokens
                          (WordLink(0, 0, False), WordLink(1, 1, True)))
    long = ShiftPair("long", "context", "example", ("a",) * 20, ("the",) * 20, (WordLink(0, 0, True),))
    token_shifts, pair_shifts, skipped = nodes.measure_shifts(pairs_to_frame([ok, vanishing, long]), encoder,
                                                              max_length=12, afn=AFN)
    assert set(pair_shifts["pair_id"]) == {"ok"} and len(pair_shifts) == 3
    assert sorted(zip(skipped["item"], skipped["reason"])) == [("long (A)", "over max_length"),
                                                                ("vanish", "alignment failed")]
    layer0 = token_shifts[token_shifts["layer"] == 0]
    # at the embedding output an unchanged token in the same position has exactly the same state
    assert (layer0.loc[layer0["aligned"] & ~layer0["changed"], "delta"] == 0).all()
    assert (layer0.loc[layer0["changed"], "delta"] > 0).all()
    assert pair_shifts["r_h"].between(0, 1).all()


def test_build_pairs_counts_user_pairs_that_do_not_align(tmp_path):
    trees = RawText("trees.txt", "\n".join([
        "(3 (2 a) (3 (3 terrific) (2 effort)))", "(4 (2 a) (4 (4 worthwhile) (2 effort)))"]))
    user = tmp_path / "pairs.tsv"
    user.write_text("the film is good\tthe film is bad\nsame words\tsame words\n", encoding="utf-8")
    corpus = pd.DataFrame({"sentence_id": ["s0", "s1"], "words": [["a", "day"], ["good"]], "label": [3, None]})
    params = {"n_context_pairs": 1, "min_words": 3, "max_words": 5, "splits": ["train"],
              "example_pairs": [["a day at the park", "a walk at the beach"]], "user_pairs_file": str(user),
              "prompt_prefixes": [["summarize:", "translate:"]], "n_prompt_sentences": 1}
    pairs, skipped = nodes.build_pairs(trees, trees, trees, corpus, params, seed=0)
    assert pairs["source"].tolist() == ["sst_minimal_pair", "example", "user_file", "corpus"]
    assert pairs["text_b"].iloc[3] == "translate : a day"
    assert skipped[["item", "reason"]].values.tolist() == [[f"{user}:2", "alignment failed"]]
    no_pairs, _ = nodes.build_pairs(trees, trees, trees, corpus, {**params, "n_context_pairs": 0,
                                                                 "user_pairs_file": None}, seed=0)
    assert no_pairs["source"].tolist() == ["example", "corpus"]
    with pytest.raises(ValueError, match=r"afn.pairs.example_pairs\[0\]"):
        nodes.build_pairs(trees, trees, trees, corpus, {**params, "example_pairs": [["a day", "a day"]]}, seed=0)
