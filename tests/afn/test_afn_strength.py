"""Strength S_i = ||h_i||_2 against a direct computation on a tiny random BERT."""
import numpy as np
import pytest
import torch

from learned_attribution.services.afn.strength import (EmptyTextError, TextTooLongError, default_afn_layer,
                                              iter_hidden_states, resolve_afn_layer, token_strengths,
                                              tokenize_words)
from learned_attribution.core.models.runner import torch_threads


def test_token_strengths_of_a_hand_made_state():
    hidden = np.array([[[3.0, 4.0], [0.0, 0.0]], [[1.0, 0.0], [-6.0, 8.0]]])  # [layers, tokens, hidden]
    np.testing.assert_allclose(token_strengths(hidden), [[5.0, 0.0], [1.0, 10.0]])


def test_batched_strengths_equal_a_direct_norm(tiny_bert, tiny_tokenizer):
    sentences = [["a", "day", "at", "the", "park", "."], ["good", "film"], ["a", "unbelievable", "walk"]]
    texts = [tokenize_words(tiny_tokenizer, words, max_length=32) for words in sentences]
    batched = dict(iter_hidden_states(tiny_bert, texts, batch_size=2, pad_token_id=tiny_tokenizer.pad_token_id))
    assert sorted(batched) == [0, 1, 2]
    for index, text in enumerate(texts):
        with torch.no_grad():  # one unpadded forward pass per sentence
            states = tiny_bert(input_ids=torch.tensor([text.input_ids]), output_hidden_states=True).hidden_states
        assert batched[index].shape == (3, len(text.input_ids), 16)  # embeddings + 2 blocks
        for layer, state in enumerate(states):
            for position in range(len(text.input_ids)):
                direct = float(torch.sqrt((state[0, position] ** 2).sum()))
                assert token_strengths(batched[index])[layer, position] == pytest.approx(direct, rel=1e-4)


def test_tokenize_words_keeps_word_ids(tiny_tokenizer):
    text = tokenize_words(tiny_tokenizer, ["a", "unbelievable", "day"], max_length=8)
    assert text.tokens == ("[CLS]", "a", "un", "##believ", "##able", "day", "[SEP]")
    assert text.word_ids == (None, 0, 1, 1, 1, 2, None)
    assert text.content_positions == [1, 2, 3, 4, 5]


def test_tokenize_words_rejects_long_and_empty_texts(tiny_tokenizer):
    with pytest.raises(TextTooLongError, match="7 tokens, over max_length=6"):
        tokenize_words(tiny_tokenizer, ["a", "unbelievable", "day"], max_length=6)
    with pytest.raises(EmptyTextError):
        tokenize_words(tiny_tokenizer, [], max_length=6)
    with pytest.raises(EmptyTextError):
        tokenize_words(tiny_tokenizer, ["  "], max_length=6)


@pytest.mark.parametrize("layers, expected", [(6, 4), (12, 8), (2, 1), (3, 2)])
def test_default_layer_is_two_thirds(layers, expected):
    assert default_afn_layer(layers) == expected
    assert resolve_afn_layer(None, layers) == expected


def test_a_layer_deeper_than_the_encoder_names_the_parameter():
    assert resolve_afn_layer(6, 6) == 6
    with pytest.raises(ValueError, match=r"^parameter afn.layer=7: this encoder has blocks 1..6"):
        resolve_afn_layer(7, 6)


def test_batch_size_must_be_positive(tiny_bert, tiny_tokenizer):
    texts = [tokenize_words(tiny_tokenizer, ["a"], 8)]
    with pytest.raises(ValueError, match="afn.batch_size"):
        list(iter_hidden_states(tiny_bert, texts, 0, 0))


def test_torch_threads_restores_the_setting():
    before = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
