"""Word-to-subword label projection with the packaged WordPiece tokenizer (all-MiniLM-L6-v2, uncased).

Expected ids are the packaged vocabulary's: [CLS] 101, [SEP] 102, the 1996, cat 4937, good 2204,
unbelievably = un ##bel ##ie ##va ##bly (4895 8671 2666 3567 6321).
"""
from __future__ import annotations

import logging

import pandas as pd
import pytest

from learned_attribution.core.models.projection import IGNORE, has_rationale_token, project_to_subwords

CLS, SEP = 101, 102
THE, CAT, GOOD = 1996, 4937, 2204
UNBELIEVABLY = [4895, 8671, 2666, 3567, 6321]
WORDS = ["The", "unbelievably", "good", "cat"]  # upper case: the tokenizer lower-cases


def _examples(rows: list[tuple[list[str], list[int] | None]], tmp_path=None) -> pd.DataFrame:
    frame = pd.DataFrame({"example_id": [f"e{i}" for i in range(len(rows))],
                          "words": [words for words, _ in rows], "word_rationale": [r for _, r in rows]})
    if tmp_path is None:
        return frame
    # Through Parquet, as the catalog hands it over: lists come back as numpy arrays, nulls as None.
    frame.to_parquet(tmp_path / "examples.parquet")
    return pd.read_parquet(tmp_path / "examples.parquet")


def test_a_word_split_into_several_subwords_gives_its_label_to_every_piece(packaged_tokenizer, tmp_path):
    projected = project_to_subwords(_examples([(WORDS, [0, 1, 0, 1])], tmp_path), packaged_tokenizer, 128)
    row = projected.iloc[0]
    assert row["input_ids"] == [CLS, THE, *UNBELIEVABLY, GOOD, CAT, SEP]
    assert row["word_ids"] == [-1, 0, 1, 1, 1, 1, 1, 2, 3, -1]
    assert row["token_labels"] == [IGNORE, 0, 1, 1, 1, 1, 1, 0, 1, IGNORE]
    assert not row["truncated"]
    assert list(projected.columns) == ["example_id", "words", "word_rationale", "input_ids", "word_ids",
                                       "token_labels", "truncated"]


def test_special_tokens_carry_no_label_and_no_word(packaged_tokenizer):
    projected = project_to_subwords(_examples([(["cat"], [1]), (["the", "cat"], None)]), packaged_tokenizer, 16)
    first, second = projected.iloc[0], projected.iloc[1]
    assert first["input_ids"] == [CLS, CAT, SEP] and first["word_ids"] == [-1, 0, -1]
    assert first["token_labels"] == [IGNORE, 1, IGNORE]
    # No rationale known: no token labels at all, but ids and word map as usual.
    assert second["token_labels"] is None
    assert second["input_ids"] == [CLS, THE, CAT, SEP] and second["word_ids"] == [-1, 0, 1, -1]


def test_truncation_inside_a_word_keeps_labels_aligned_and_is_flagged(packaged_tokenizer, caplog):
    examples = _examples([(WORDS, [0, 1, 0, 1]), (["cat"], [1])])
    with caplog.at_level(logging.INFO, logger="learned_attribution.core.models.projection"):
        projected = project_to_subwords(examples, packaged_tokenizer, max_length=6)
    row = projected.iloc[0]
    assert row["input_ids"] == [CLS, THE, *UNBELIEVABLY[:3], SEP]
    assert row["word_ids"] == [-1, 0, 1, 1, 1, -1]
    assert row["token_labels"] == [IGNORE, 0, 1, 1, 1, IGNORE]
    assert projected["truncated"].tolist() == [True, False]
    assert "1 of 2 examples truncated to max_length=6" in caplog.text


def test_an_example_has_a_rationale_token_only_where_one_survives_truncation(packaged_tokenizer, tmp_path):
    # "cat" is the 4th word: cut off at max_length=6; the second keeps its rationale, the third has none, the
    # fourth no rationale at all
    rows = [(WORDS, [0, 0, 0, 1]), (WORDS, [0, 1, 0, 0]), (WORDS, [0, 0, 0, 0]), (WORDS, None)]
    projected = project_to_subwords(_examples(rows, tmp_path), packaged_tokenizer, max_length=6)
    assert has_rationale_token(projected).tolist() == [False, True, False, False]


@pytest.mark.parametrize(("max_length", "truncated"), [(10, False), (9, True)])
def test_truncation_boundary(packaged_tokenizer, max_length, truncated):
    # 8 subwords + [CLS] + [SEP] = 10 tokens.
    projected = project_to_subwords(_examples([(WORDS, [1, 0, 0, 0])]), packaged_tokenizer, max_length)
    assert bool(projected["truncated"].iloc[0]) is truncated
    assert len(projected["input_ids"].iloc[0]) == min(10, max_length)


def test_words_with_spaces_punctuation_or_no_subword(packaged_tokenizer, caplog):
    # "8 1/2" is one SST leaf; "don't" splits at the apostrophe; a lone zero-width space has no token.
    examples = _examples([(["don't", "\u200b", "8 1/2"], [1, 1, 0])])
    with caplog.at_level(logging.INFO, logger="learned_attribution.core.models.projection"):
        row = project_to_subwords(examples, packaged_tokenizer, 32).iloc[0]
    assert row["input_ids"] == [CLS, 2123, 1005, 1056, 1022, 1015, 1013, 1016, SEP]
    assert row["word_ids"] == [-1, 0, 0, 0, 2, 2, 2, 2, -1]
    assert row["token_labels"] == [IGNORE, 1, 1, 1, 0, 0, 0, 0, IGNORE]
    assert "1 words (1 of them rationale words) have no subword token" in caplog.text


def test_max_length_below_three_is_rejected(packaged_tokenizer):
    with pytest.raises(ValueError, match="max_length must be at least 3"):
        project_to_subwords(_examples([(["cat"], [1])]), packaged_tokenizer, 2)


def test_the_datasets_map_driver_equals_the_pandas_one(packaged_tokenizer, tmp_path):
    """The data pipeline projects through `Dataset.map(batched=True)`; batches of 2 give what one call gives."""
    import datasets

    from learned_attribution.core.models.projection import project_dataset

    # The first batch has no rationale at all (only null token labels), the others mix.
    rows = [(["the", "cat"], None), (["good"], None), (WORDS, [0, 1, 0, 1]), (["cat"], [1]), (["the", "cat"], None),
            (["good"] * 9, [1] * 9), (["\u200d"], [1])]
    examples = _examples(rows, tmp_path)
    expected = project_to_subwords(examples, packaged_tokenizer, max_length=6)
    mapped = project_dataset(datasets.Dataset.from_pandas(examples, preserve_index=False), packaged_tokenizer,
                             max_length=6, batch_size=2).to_pandas()
    assert list(mapped.columns) == list(expected.columns)
    for column in ("input_ids", "word_ids", "token_labels", "truncated"):
        got = [None if v is None else list(v) if hasattr(v, "__len__") else v for v in mapped[column]]
        want = [None if v is None else list(v) if hasattr(v, "__len__") else v for v in expected[column]]
        assert got == want, column
