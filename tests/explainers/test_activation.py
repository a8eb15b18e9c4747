"""AFN norm: the hidden-state norm at the right layer, and the two-thirds default layer rule."""
from __future__ import annotations

import pytest
import torch

from transformers import BertForSequenceClassification

from learned_attribution.core.explainers import Batch, build_method
from learned_attribution.core.explainers.base import padded_batch
from learned_attribution.core.explainers import activation as act

PAD, CLS, SEP, MASK = 0, 1, 2, 3
ROWS = [[CLS, 7, 12, 30, 5, SEP], [CLS, 22, 8, SEP]]


@pytest.fixture(scope="module")
def make_model(tiny_bert_classifier):
    """Factory: a tiny BERT (the shared tiny factory) whose LayerNorm gains are random, so token norms differ (with
    unit gains and zero bias every LayerNorm output would have norm exactly sqrt(hidden))."""

    def build(num_layers: int) -> BertForSequenceClassification:
        model = tiny_bert_classifier(seed=0, num_hidden_layers=num_layers, hidden_size=8, intermediate_size=16,
                                     max_position_embeddings=16, initializer_range=0.5)
        with torch.no_grad():
            for module in model.modules():
                if isinstance(module, torch.nn.LayerNorm):
                    module.weight.uniform_(0.2, 2.0)
                    module.bias.normal_(0.0, 0.5)
        return model

    return build


def make_batch(rows: list[list[int]]) -> Batch:
    """Right-padded batch; [CLS], [SEP] and padding are special."""
    return padded_batch(rows, [0] * len(rows), pad_token_id=PAD, mask_token_id=MASK, frame_token_ids=(CLS, SEP, PAD))


@pytest.fixture(scope="module")
def six_layer_model(make_model) -> BertForSequenceClassification:
    return make_model(6)


def hidden_states(model, batch) -> tuple[torch.Tensor, ...]:
    with torch.no_grad():
        return model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                     output_hidden_states=True).hidden_states


@pytest.mark.parametrize("num_layers, layer", [(6, 4), (12, 8), (24, 16), (3, 2), (1, 1)])
def test_default_layer_is_two_thirds_of_the_depth(num_layers, layer):
    assert act.default_afn_layer(num_layers) == layer


def test_default_layer_rejects_a_bad_depth():
    with pytest.raises(ValueError, match="num_layers"):
        act.default_afn_layer(0)


def test_default_afn_norm_reads_layer_4_of_6(six_layer_model):
    batch = make_batch(ROWS)
    states = hidden_states(six_layer_model, batch)
    attribution = build_method("afn_norm").explain(six_layer_model, batch)
    real = batch.attention_mask.bool()
    expected = states[4].norm(dim=-1)
    torch.testing.assert_close(attribution.scores[real], expected[real])
    assert (attribution.scores[~real] == 0).all()
    # the layer matters: neighbouring layers give other norms
    for other in (3, 5):
        assert not torch.allclose(attribution.scores[real], states[other].norm(dim=-1)[real], atol=1e-3)
    assert attribution.model_calls == 1


@pytest.mark.parametrize("layer", [0, 2, 6])
def test_layer_setting_overrides_the_default(six_layer_model, layer):
    batch = make_batch(ROWS)
    real = batch.attention_mask.bool()
    expected = hidden_states(six_layer_model, batch)[layer].norm(dim=-1)
    scores = build_method("afn_norm", layer=layer).explain(six_layer_model, batch).scores
    torch.testing.assert_close(scores[real], expected[real])


def test_default_layer_follows_the_model_depth(make_model):
    model = make_model(12)
    batch = make_batch(ROWS[:1])
    assert build_method("afn_norm").layer_for(model) == 8
    torch.testing.assert_close(build_method("afn_norm").explain(model, batch).scores,
                               hidden_states(model, batch)[8].norm(dim=-1))


def test_padding_does_not_change_the_norms(six_layer_model):
    batched = build_method("afn_norm").explain(six_layer_model, make_batch(ROWS)).scores
    for row, tokens in enumerate(ROWS):
        single = build_method("afn_norm").explain(six_layer_model, make_batch([tokens])).scores[0]
        torch.testing.assert_close(batched[row, :len(tokens)], single, rtol=1e-5, atol=1e-6)


def test_bad_layer_is_named(six_layer_model):
    with pytest.raises(ValueError, match="layer=7"):
        build_method("afn_norm", layer=7).explain(six_layer_model, make_batch(ROWS))
    with pytest.raises(ValueError, match="layer"):
        build_method("afn_norm", layer=-1)


def test_registry_builds_afn_norm():
    explainer = build_method("afn_norm", layer=3)
    assert isinstance(explainer, act.AfnNorm) and explainer.name == "afn_norm"
    assert explainer.family == "activation" and explainer.layer == 3
