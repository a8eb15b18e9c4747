"""The architecture adapter (core/models/architectures.py) on a tiny random classifier of every family in its table:
the blocks, the hidden states a block hook sees, the shape of the ExpNet+ signals, word-to-subword projection,
AFN's tokenisation and hidden states, and the errors for a family it does not know. What every signal and every
registered method computes on each family is checked against known answers in tests/models/
test_signals_every_family.py and tests/explainers/test_every_family.py."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from learned_attribution.core.models.projection import project_to_subwords
from learned_attribution.core.explainers import METHODS
from learned_attribution.core.explainers.apply import tokenizer_batch
from learned_attribution.core.explainers.base import attention_methods, needs_attentions
from learned_attribution.core.models.architectures import (ARCHITECTURES, SUPPORTED_MODEL_TYPES,
                                                           UnsupportedArchitectureError, architecture, mask_token_id,
                                                           no_attentions_message, prepare_tokenizer,
                                                           reserved_positions, token_convention)
from learned_attribution.core.models.loading import max_positions
from learned_attribution.core.models.signals import KNOWN_SETS, model_columns, token_signals, token_vocabulary

LAYERS, HEADS = 3, 2  # not the factory's default depth, so nothing passes by assuming 2 layers
WORDS = [["The", "unbelievable", "film", ",", "and", "it", "was", "good", "."], ["a", "bad", "movie"],
         ["it", "was", "not", "good", "!"]]
TARGETS = [0, 2, 1]


@pytest.fixture(scope="module", params=SUPPORTED_MODEL_TYPES)
def family(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def classifier(family, tiny_classifier):
    """(model, tokenizer) of `family`, weights large enough that attentions and gradients are far from uniform."""
    return tiny_classifier(family, n_layers=LAYERS, n_heads=HEADS, num_labels=3, seed=1, initializer_range=0.2)


@pytest.fixture(scope="module")
def projected(classifier) -> pd.DataFrame:
    _, tokenizer = classifier
    frame = pd.DataFrame({"words": WORDS, "word_rationale": [None] * len(WORDS)})
    return project_to_subwords(frame, tokenizer, 64)


@pytest.fixture(scope="module")
def batch(classifier, projected):
    _, tokenizer = classifier
    return tokenizer_batch(list(projected["input_ids"]), TARGETS, tokenizer)


def test_the_table_names_every_family_once_and_the_tokenizer_agrees_with_it(family, classifier):
    model, tokenizer = classifier
    entry = architecture(model)
    assert entry is ARCHITECTURES[family] and entry.model_type == model.config.model_type == family
    assert architecture(model.config) is entry and architecture(family) is entry
    # The convention read from the tokenizer itself is the one the table documents for the family.
    assert token_convention(tokenizer) == entry.convention
    assert mask_token_id(tokenizer) == tokenizer.mask_token_id is not None


def test_the_blocks_are_found_and_a_pre_hook_sees_each_blocks_input_hidden_states(classifier, batch):
    model, _ = classifier
    entry = architecture(model)
    blocks = entry.blocks(model)
    assert isinstance(blocks, torch.nn.ModuleList) and len(blocks) == LAYERS == model.config.num_hidden_layers
    seen: dict[int, torch.Tensor] = {}

    def keep(index):
        def hook(module, args, kwargs):
            seen[index] = entry.block_hidden_states(args, kwargs).detach()
        return hook

    hooks = [block.register_forward_pre_hook(keep(i), with_kwargs=True) for i, block in enumerate(blocks)]
    try:
        with torch.inference_mode():
            output = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_hidden_states=True)
    finally:
        for hook in hooks:
            hook.remove()
    assert sorted(seen) == list(range(LAYERS))
    for index in range(LAYERS):  # block l reads hidden_states[l]: the embedding output, then block l-1's output
        assert seen[index].shape == (*batch.input_ids.shape, model.config.hidden_size)
        torch.testing.assert_close(seen[index], output.hidden_states[index])


def test_replace_block_hidden_states_works_positionally_and_by_keyword(classifier):
    entry = architecture(classifier[0])
    hidden, other = torch.zeros(1, 2, 3), torch.ones(1, 2, 3)
    assert entry.replace_block_hidden_states((hidden, "mask"), {}, other)[0][0] is other
    args, kwargs = entry.replace_block_hidden_states((), {"hidden_states": hidden, "x": 1}, other)
    assert args == () and kwargs["hidden_states"] is other and kwargs["x"] == 1
    assert entry.block_hidden_states((), {"hidden_states": hidden}) is hidden


def test_signals_of_every_feature_set_have_the_columns_of_the_classifiers_shape(classifier, batch):
    model, tokenizer = classifier
    target = batch.target
    signals = token_signals(model, batch.input_ids, batch.attention_mask, target, KNOWN_SETS,
                            vocabulary=token_vocabulary(tokenizer))
    assert signals.shape == (*batch.input_ids.shape, len(model_columns(KNOWN_SETS, model.config)))
    assert all(p.requires_grad for p in model.parameters())  # the frozen pass restores the weights' flags
    assert all(p.grad is None for p in model.parameters())  # and leaves their gradients alone


def test_projection_gives_every_word_its_pieces_with_the_tokenizers_word_boundaries(classifier, projected):
    model, tokenizer = classifier
    convention = token_convention(tokenizer)
    for words, ids, word_ids in zip(WORDS, projected["input_ids"], projected["word_ids"]):
        assert ids[0] == tokenizer.cls_token_id and ids[-1] == tokenizer.sep_token_id
        assert word_ids[0] == word_ids[-1] == -1
        assert sorted(set(word_ids[1:-1])) == list(range(len(words)))  # every word has a piece, in order
        tokens = tokenizer.convert_ids_to_tokens(ids)
        for position in range(1, len(ids) - 1):
            piece = convention.read(tokens[position])
            same_word = word_ids[position] == word_ids[position - 1]
            # The vocabulary's own mark says whether a piece continues a word, and word_ids agree: in particular
            # a byte-level BPE word list gets its `Ġ` on every word (add_prefix_space), not only after spaces.
            assert piece.continues == same_word, (tokens, position)


def test_only_byte_level_bpe_needs_a_prefix_space_copy_and_the_copy_is_made_once(family, classifier):
    _, tokenizer = classifier
    prepared = prepare_tokenizer(tokenizer)
    assert (prepared is not tokenizer) == ARCHITECTURES[family].prefix_space
    assert prepare_tokenizer(tokenizer) is prepared  # cached
    if prepared is not tokenizer:
        assert tokenizer.convert_ids_to_tokens(tokenizer(["film"], is_split_into_words=True,
                                                         add_special_tokens=False)["input_ids"]) != ["Ġfilm"]
        assert prepared.convert_ids_to_tokens(prepared(["film"], is_split_into_words=True,
                                                       add_special_tokens=False)["input_ids"]) == ["Ġfilm"]


def test_afn_tokenises_word_lists_and_reads_every_layers_hidden_states(classifier):
    from learned_attribution.services.afn.strength import iter_hidden_states, tokenize_words  # AFN's service

    model, tokenizer = classifier
    text = tokenize_words(tokenizer, WORDS[0], 64)
    assert text.word_ids[0] is None and text.word_ids[-1] is None
    assert sorted({w for w in text.word_ids if w is not None}) == list(range(len(WORDS[0])))
    [(index, hidden)] = list(iter_hidden_states(model, [text], 2, tokenizer.pad_token_id))
    assert index == 0 and hidden.shape == (LAYERS + 1, len(text.input_ids), model.config.hidden_size)
    ids = torch.tensor([text.input_ids])
    with torch.inference_mode():  # the model's own hidden states: the embedding output, then every block's
        expected = model(input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=True).hidden_states
    np.testing.assert_allclose(hidden, torch.stack(expected)[:, 0].numpy(), rtol=1e-4, atol=1e-5)


def test_the_longest_input_the_api_accepts_runs(family, classifier):
    model, tokenizer = classifier
    longest = max_positions(model, tokenizer)
    assert longest == 64 - reserved_positions(model)
    assert reserved_positions(model) == (2 if ARCHITECTURES[family].position_padding_idx is not None else 0)
    word = tokenizer.convert_tokens_to_ids(tokenizer.tokenize("film"))[-1]

    def run(length: int):
        ids = torch.tensor([[tokenizer.cls_token_id, *[word] * (length - 2), tokenizer.sep_token_id]])
        with torch.inference_mode():
            return model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits

    assert run(longest).shape == (1, 3)
    if family != "deberta-v2":  # absolute positions: one token more is past the 64-row position table (DeBERTa-v3's
        with pytest.raises((IndexError, RuntimeError), match="64|index out of range"):  # are relative: any length)
            run(longest + 1)


def test_an_unsupported_family_is_named_with_the_supported_ones():
    from transformers import GPT2Config, GPT2ForSequenceClassification

    config = GPT2Config(vocab_size=50, n_positions=16, n_embd=16, n_layer=1, n_head=2, pad_token_id=0)
    with pytest.raises(UnsupportedArchitectureError, match="'gpt2'") as raised:
        architecture(config)
    assert isinstance(raised.value, ValueError) and raised.value.model_type == "gpt2"
    assert all(name in str(raised.value) for name in SUPPORTED_MODEL_TYPES)
    model = GPT2ForSequenceClassification(config).eval()
    ids = torch.tensor([[1, 5, 6, 2]])
    with pytest.raises(UnsupportedArchitectureError, match="gpt2"):
        token_signals(model, ids, torch.ones_like(ids), torch.tensor([0]), ["attention"])
    assert reserved_positions(model) == 0  # nothing known, nothing assumed
    with pytest.raises(UnsupportedArchitectureError, match="None"):
        architecture(object())


def test_the_methods_that_need_attentions_are_named_when_a_model_returns_none(tiny_classifier):
    assert {"raw_attention", "attention_rollout", "gae", "attcat", "attention_x_gradient", "expnet_paper",
            "expnet_plus", "student"} == set(attention_methods())
    assert needs_attentions("gae") and not needs_attentions("saliency") and not needs_attentions("no_such_method")
    model, tokenizer = tiny_classifier("bert", attn_implementation="sdpa")
    batch = tokenizer_batch([[tokenizer.cls_token_id, 7, 8, tokenizer.sep_token_id]], [0], tokenizer)
    with pytest.raises(ValueError, match="attn_implementation='eager'") as raised:
        METHODS["raw_attention"]().explain(model, batch)
    assert "attention_rollout" in str(raised.value) and "saliency" not in str(raised.value)
    assert "'sdpa'" in no_attentions_message(model, ["saliency", "gae"])
    assert "gae" in no_attentions_message(model, ["saliency", "gae"])
