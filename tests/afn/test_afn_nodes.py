"""The AFN corpus, pairs and measurements from the parsed settings (`services/afn/build.py`, `measure.py`) and the
nodes that call them, on a tiny BERT: counted skips for empty texts, texts over max_length and pairs that do not
align; tables with the promised shape."""
import pandas as pd
import pytest

from learned_attribution.core.data.schema import RawText
from learned_attribution.pipelines.afn import nodes
from learned_attribution.services.afn.alignment import WordLink
from learned_attribution.services.afn.build import build_corpus, build_pairs
from learned_attribution.services.afn.measure import measure_shifts, measure_strengths
from learned_attribution.services.afn.pairs import ShiftPair, pairs_to_frame
from learned_attribution.services.config import ComputeSettings

EMPTY = RawText("t", "")
TREES = RawText("trees.txt", "\n".join([
    "(3 (2 a) (3 (3 terrific) (2 effort)))", "(4 (2 a) (4 (4 worthwhile) (2 effort)))"]))


@pytest.fixture
def tiny(make_settings):
    return make_settings(batch_size=2, num_threads=1, max_length=12)


def test_build_corpus_adds_user_sentences_and_counts_empty_lines(make_settings):
    trees = RawText("trees.txt", "(4 (3 (2 a) (4 (2 truly) (4 (4 great) (2 film)))) (2 .))")
    user = RawText("sentences.txt", "a day at the park .\n\n")
    settings = make_settings(corpus={"n_phrases": 1, "min_words": 3, "max_words": 5, "splits": ["dev"]}, seed=0)
    corpus, skipped = build_corpus({"train": EMPTY, "dev": trees, "test": EMPTY}, user, settings)
    assert corpus["source"].tolist() == ["sst", "user"]
    assert corpus["sentence_id"].tolist()[1] == "user:1"
    assert corpus["words"].iloc[1] == ["a", "day", "at", "the", "park", "."]
    assert skipped[["stage", "item", "reason"]].values.tolist() == [["corpus", "sentences.txt:2", "empty sentence"]]
    # a path in the parameters that the catalog did not open stops the run
    named = make_settings(corpus={"n_phrases": 1, "min_words": 3, "max_words": 5, "splits": ["dev"],
                                  "user_sentences_file": "other.txt"}, seed=0)
    with pytest.raises(ValueError, match="afn.corpus.user_sentences_file='other.txt' is not the file"):
        build_corpus({"train": EMPTY, "dev": trees, "test": EMPTY}, user, named)


def test_build_pairs_counts_user_pairs_that_do_not_align(make_settings):
    user = RawText("pairs.tsv", "the film is good\tthe film is bad\nsame words\tsame words\n")
    corpus = pd.DataFrame({"sentence_id": ["s0", "s1"], "words": [["a", "day"], ["good"]], "label": [3, None]})
    pairs = {"n_context_pairs": 1, "min_words": 3, "max_words": 5, "splits": ["train"],
             "example_pairs": [["a day at the park", "a walk at the beach"]],
             "prompt_prefixes": [["summarize:", "translate:"]], "n_prompt_sentences": 1}
    trees = {"train": TREES, "dev": TREES, "test": TREES}
    table, skipped = build_pairs(trees, corpus, user, make_settings(pairs=pairs, seed=0))
    assert table["source"].tolist() == ["sst_minimal_pair", "example", "user_file", "corpus"]
    assert table["pair_id"].tolist()[2:] == ["user0001", "prompt0:s0"]
    assert table["text_b"].iloc[3] == "translate : a day"
    assert skipped[["item", "reason"]].values.tolist() == [["pairs.tsv:2", "alignment failed"]]
    no_pairs, _ = build_pairs(trees, corpus, None, make_settings(pairs={**pairs, "n_context_pairs": 0}, seed=0))
    assert no_pairs["source"].tolist() == ["example", "corpus"]
    with pytest.raises(ValueError, match=r"afn.pairs.example_pairs\[0\]"):
        build_pairs(trees, corpus, None, make_settings(pairs={**pairs, "example_pairs": [["a day", "a day"]]}))


def test_measure_strengths_skips_long_and_empty_texts(tiny_bert, tiny_tokenizer, tiny):
    corpus = pd.DataFrame({"sentence_id": ["s0", "s1", "s2"], "source": "sst",
                           "words": [["a", "day", "at", "the", "park"], ["a"] * 20, []]})
    table, skipped = measure_strengths(corpus, tiny_tokenizer, tiny_bert, tiny)
    assert set(table["sentence_id"]) == {"s0"}
    assert sorted(table["layer"].unique()) == [0, 1, 2]
    assert len(table) == 3 * 5  # five non-special tokens per layer
    assert table.loc[table["word"] == "the", "word_class"].iloc[0] == "function"
    assert sorted(skipped["reason"]) == ["empty text", "over max_length"]
    assert skipped.loc[skipped["reason"] == "over max_length", "detail"].iloc[0] == "22 tokens, over max_length=12"


def test_measure_shifts_counts_pairs_that_fail(tiny_bert, tiny_tokenizer, tiny):
    ok = ShiftPair("ok", "context", "example", ("a", "day", "at", "the", "park"), ("a", "walk", "at", "the", "park"),
                   tuple(WordLink(i, i, i == 1) for i in range(5)))
    vanishing = ShiftPair("vanish", "context", "example", ("a", "day"), ("a", "\u200b"),  # a word with no tokens
                          (WordLink(0, 0, False), WordLink(1, 1, True)))
    long = ShiftPair("long", "context", "example", ("a",) * 20, ("the",) * 20, (WordLink(0, 0, True),))
    token_shifts, pair_shifts, skipped = measure_shifts(pairs_to_frame([ok, vanishing, long]), tiny_tokenizer,
                                                        tiny_bert, tiny)
    assert set(pair_shifts["pair_id"]) == {"ok"} and len(pair_shifts) == 3
    assert sorted(zip(skipped["item"], skipped["reason"])) == [("long (A)", "over max_length"),
                                                                ("vanish", "alignment failed")]
    layer0 = token_shifts[token_shifts["layer"] == 0]
    # at the embedding output an unchanged token in the same position has exactly the same state
    assert (layer0.loc[layer0["aligned"] & ~layer0["changed"], "delta"] == 0).all()
    assert (layer0.loc[layer0["changed"], "delta"] > 0).all()
    # Known answer per layer: R_H is the HIGH tokens' share of the summed shift over A's aligned tokens.
    for layer, tokens in token_shifts[token_shifts["aligned"]].groupby("layer"):
        expected = tokens.loc[tokens["high"], "delta"].sum() / tokens["delta"].sum()
        assert pair_shifts.set_index("layer").at[layer, "r_h"] == pytest.approx(expected)


def test_the_nodes_parse_the_settings_then_load_the_configured_encoder(tiny_bert, tiny_tokenizer, tmp_path,
                                                                         afn_params):
    tiny_bert.save_pretrained(tmp_path)
    tiny_tokenizer.save_pretrained(tmp_path)
    params = afn_params(batch_size=2, num_threads=1, max_length=12, encoder={"name_or_path": str(tmp_path)})
    compute = {**params["compute"], "device": "cpu"}
    settings, placed = nodes.parse_settings(params["afn"], params["encoder"], params["max_length"], params["seed"],
                                            compute)
    assert settings.encoder == str(tmp_path) and settings.batch_size == 2
    assert isinstance(placed, ComputeSettings) and placed.device.type == "cpu" and placed.dask is None
    corpus = pd.DataFrame({"sentence_id": ["s0"], "source": "sst", "words": [["a", "day", "at", "the", "park"]]})
    table, skipped = nodes.measure_strengths(corpus, settings, placed)
    assert len(table) == 3 * 5 and skipped.empty
