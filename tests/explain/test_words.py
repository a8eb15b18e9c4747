"""Words of an explanation: the tokenizer's pre-tokenizer splits punctuation apart, each word is
a slice of the text as typed (capitals and accents kept) with its character offsets, `words="whitespace"` keeps the
old split, a list of words wins; the label is the classifier's id2label name in record(), JSONL and HTML; the HTML
page shows the text as typed."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from learned_attribution.adapters.cli import main
from learned_attribution.core.data.words import tokenizer_words, whitespace_words
from learned_attribution.core.errors import InputError
from learned_attribution.services.explain import FoldExplainer
from learned_attribution.services.reporting.pages import explanation_page

TYPED = "Maria  shrugged. Café!"


@pytest.fixture
def fold(tiny_models_dir):
    return FoldExplainer.from_fold("heldout_sst2", models_dir=tiny_models_dir, device="cpu")


def test_the_pre_tokenizer_splits_punctuation_and_keeps_the_text_as_typed(fold):
    [result] = fold.explain([TYPED], methods=["saliency"])
    assert result.words == ["Maria", "shrugged", ".", "Café", "!"]  # not lowercased, accent kept
    assert result.offsets == [(0, 5), (7, 15), (15, 16), (17, 21), (21, 22)]
    assert [TYPED[s:e] for s, e in result.offsets] == result.words
    assert result.text == TYPED
    record = result.record()
    assert record["offsets"] == [[0, 5], [7, 15], [15, 16], [17, 21], [21, 22]]  # lists: JSON-serialisable
    json.dumps(record)
    # "shrugged" and "." are scored apart: the punctuation's score no longer rides on the word
    assert len(record["scores"]["saliency"]) == 5


def test_whitespace_words_keep_the_old_split_with_offsets(fold):
    [result] = fold.explain([TYPED], methods=["saliency"], words="whitespace")
    assert result.words == ["Maria", "shrugged.", "Café!"]
    assert result.offsets == [(0, 5), (7, 16), (17, 22)]
    assert whitespace_words(" a\tb ") == (["a", "b"], [(1, 2), (3, 4)])


def test_a_list_of_words_wins_and_has_no_offsets(fold):
    [result] = fold.explain([["Maria", "shrugged."]], methods=["saliency"])
    assert result.words == ["Maria", "shrugged."] and result.offsets is None
    assert result.record()["offsets"] is None


def test_a_bad_words_option_is_named(fold):
    with pytest.raises(InputError, match=r"words='spaces': must be 'tokenizer' or 'whitespace'"):
        fold.explain(["fine"], words="spaces")


def test_a_tokenizer_without_a_pre_tokenizer_falls_back_to_whitespace():
    class Plain:  # a fast tokenizer whose backend has no pre-tokenizer
        class backend_tokenizer:  # noqa: N801 - mimics the attribute
            pre_tokenizer = None

    assert tokenizer_words(Plain(), "a b.") == (["a", "b."], [(0, 1), (2, 4)])


def test_byte_level_pieces_are_trimmed_to_the_typed_word():
    from tokenizers import pre_tokenizers

    class ByteLevel:
        class backend_tokenizer:  # noqa: N801
            pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)

    text = "Hello  world! Ça"
    words, offsets = tokenizer_words(ByteLevel(), text)
    assert words == ["Hello", "world", "!", "Ça"] and [text[s:e] for s, e in offsets] == words


def test_the_label_is_the_classifiers_name_in_record_jsonl_and_html(tiny_models_dir, tmp_path, classifier_writer):
    out, page = tmp_path / "out.jsonl", tmp_path / "out.html"
    assert main(["explain", "--fold", "heldout_sst2", "--models-dir", str(tiny_models_dir), "--device", "cpu",
                 "the movie is great .", "--output", str(out), "--html", str(page)]) == 0
    [row] = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["label"] in ("negative", "positive") and f"predicted {row['label']} (p = " in page.read_text()
    default = classifier_writer(tmp_path / "unnamed", id2label={0: "LABEL_0", 1: "LABEL_1"},
                                label2id={"LABEL_0": 0, "LABEL_1": 1})
    fold = FoldExplainer.from_fold("heldout_sst2", classifier=default, models_dir=tiny_models_dir, device="cpu")
    [result] = fold.explain("the movie")
    assert result.label == f"LABEL_{result.predicted}" == result.record()["label"]


def test_the_html_page_shows_the_text_as_typed_with_each_word_highlighted(fold):
    text = "Maria  shrugged. <b>Café</b>"
    [result] = fold.explain([text], methods=["saliency"])
    page = explanation_page("t", [result], ["saliency"])
    assert "Maria</span>  <span" in page  # the two typed spaces stay, between the highlighted words
    assert "shrugged</span><span" in page  # no space invented between a word and its full stop
    assert "&lt;" in page and "<b>" not in page  # escaped
    assert "white-space:pre-wrap" in page
    [words] = fold.explain([["Maria", "shrugged."]], methods=["saliency"])
    assert "Maria</span> <span" in explanation_page("t", [words], ["saliency"])  # a word list: words joined


def test_the_cli_words_option(tiny_models_dir, tmp_path):
    out = tmp_path / "out.jsonl"
    assert main(["explain", "--fold", "heldout_sst2", "--models-dir", str(tiny_models_dir), "--device", "cpu",
                 "--words", "whitespace", TYPED, "--output", str(out)]) == 0
    [row] = [json.loads(line) for line in Path(out).read_text().splitlines()]
    assert row["words"] == ["Maria", "shrugged.", "Café!"] and row["offsets"] == [[0, 5], [7, 16], [17, 22]]
