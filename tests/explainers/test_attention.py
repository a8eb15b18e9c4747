"""Attention-family explainers checked against hand-computed values and independent computations."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from transformers import BertForSequenceClassification
from transformers.masking_utils import AttentionMaskInterface, eager_mask
from transformers.modeling_utils import AttentionInterface

from learned_attribution.core.explainers import Batch, build_method
from learned_attribution.core.explainers.base import padded_batch
from learned_attribution.core.explainers import attention as att
from learned_attribution.core.models.model_pass import ATTENTION_GRADIENTS, ATTENTIONS, run_pass

METHODS = {
    "raw_attention": att.RawAttention,
    "attention_rollout": att.AttentionRollout,
    "gae": att.GenericAttentionExplainability,
    "attcat": att.AttCAT,
    "attention_x_gradient": att.AttentionTimesGradient,
}
NUM_LAYERS = 2
PAD = 0
MASK = 3


@pytest.fixture(scope="module")
def make_model(tiny_bert_classifier):
    """Factory: a 2-layer, 2-head BERT (the shared tiny factory) with weights large enough that attentions and
    gradients are far from uniform / zero."""

    def build(seed: int = 0, attn_implementation: str = "eager") -> BertForSequenceClassification:
        return tiny_bert_classifier(num_labels=3, seed=seed, num_hidden_layers=NUM_LAYERS, num_attention_heads=2,
                                    max_position_embeddings=16, initializer_range=0.5,
                                    attn_implementation=attn_implementation)

    return build


def make_batch(rows: list[list[int]], targets: list[int]) -> Batch:
    """Right-padded batch; [CLS], [SEP] and padding are special."""
    return padded_batch(rows, targets, pad_token_id=PAD, mask_token_id=MASK, frame_token_ids=(1, 2, PAD))


ROWS = [[1, 7, 12, 30, 5, 9, 2], [1, 22, 8, 2], [1, 17, 33, 11, 26, 2]]
TARGETS = [0, 2, 1]


@pytest.fixture(scope="module")
def model(make_model) -> BertForSequenceClassification:
    return make_model()


@pytest.fixture(scope="module")
def batch() -> Batch:
    return make_batch(ROWS, TARGETS)


@pytest.fixture
def probe_model(model, monkeypatch):
    """A copy of the model whose attention adds a zero tensor `delta` (requiring grad) to the softmax output
    before the product with the values: d(logit)/d(delta) is d(logit)/d(attention), computed independently of
    the tensors that `output_attentions` returns."""
    deltas: dict[int, torch.Tensor] = {}

    def probe_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        weights = torch.softmax(query @ key.transpose(2, 3) * scaling + attention_mask, dim=-1)
        delta = torch.zeros_like(weights, requires_grad=True)
        deltas[module.layer_idx] = delta
        weights = weights + delta
        return (weights @ value).transpose(1, 2).contiguous(), weights

    monkeypatch.setitem(AttentionInterface._global_mapping, "probe", probe_attention)
    monkeypatch.setitem(AttentionMaskInterface._global_mapping, "probe", eager_mask)
    probe = copy.deepcopy(model)
    probe.set_attn_implementation("probe")
    return probe, deltas


def probe_attentions_and_gradients(probe_model, batch):
    probe, deltas = probe_model
    output = probe(input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_attentions=True)
    logit_sum = output.logits.gather(1, batch.target[:, None]).sum()
    gradients = torch.autograd.grad(logit_sum, [deltas[i] for i in range(NUM_LAYERS)])
    return [a.detach() for a in output.attentions], list(gradients)


# ---------------------------------------------------------------- pure functions on hand-made tensors

def test_rollout_of_identity_attention_keeps_each_token_on_itself():
    identity = torch.eye(4).expand(2, 4, 4)  # 2 heads
    result = att.rollout([identity, identity, identity])
    torch.testing.assert_close(result, torch.eye(4))
    torch.testing.assert_close(att.rollout_scores([identity]), torch.tensor([1.0, 0, 0, 0]))


def test_rollout_two_layers_three_tokens_by_hand():
    layer1 = torch.tensor([[[0.0, 1, 0], [0, 1, 0], [0, 0, 1]]])  # one head
    # Two heads whose mean is [[.5, 0, .5], [1, 0, 0], [0, 1, 0]].
    layer2 = torch.tensor([[[1.0, 0, 0], [1, 0, 0], [0, 1, 0]],
                           [[0.0, 0, 1], [1, 0, 0], [0, 1, 0]]])
    # A1' = [[.5,.5,0],[0,1,0],[0,0,1]]; A2' = [[.75,0,.25],[.5,.5,0],[0,.5,.5]]; rollout = A2' @ A1'.
    expected = torch.tensor([[0.375, 0.375, 0.25], [0.25, 0.75, 0.0], [0.0, 0.5, 0.5]])
    torch.testing.assert_close(att.rollout([layer1, layer2]), expected)
    torch.testing.assert_close(att.rollout_scores([layer1, layer2]), expected[0])
    # Order matters: the first layer is applied first (rightmost factor).
    assert not torch.allclose(att.rollout([layer2, layer1]), expected)


def test_rollout_matches_numpy_and_renormalises_rows():
    generator = torch.Generator().manual_seed(1)
    layers = [torch.rand(2, 3, 5, 5, generator=generator) for _ in range(3)]  # rows NOT stochastic
    expected = []
    for b in range(2):
        product = np.eye(5)
        for layer in layers:
            mixed = 0.5 * layer[b].double().numpy().mean(axis=0) + 0.5 * np.eye(5)
            product = (mixed / mixed.sum(axis=1, keepdims=True)) @ product
        expected.append(product)
    result = att.rollout(layers)
    np.testing.assert_allclose(result.double().numpy(), np.stack(expected), rtol=1e-5)
    torch.testing.assert_close(result.sum(-1), torch.ones(2, 5))


def test_raw_attention_scores_by_hand():
    heads = torch.tensor([[[0.2, 0.8], [0.5, 0.5]], [[0.6, 0.4], [0.1, 0.9]]])
    torch.testing.assert_close(att.raw_attention_scores(heads), torch.tensor([0.4, 0.6]))


def test_gae_one_and_two_layers_by_hand():
    attention = torch.tensor([[[0.5, 0.5], [0.25, 0.75]], [[1.0, 0.0], [0.5, 0.5]]])
    gradient = torch.tensor([[[2.0, -1.0], [4.0, 0.0]], [[-1.0, 3.0], [1.0, 2.0]]])
    # grad*A per head: [[1, -.5], [1, 0]] and [[-1, 0], [.5, 1]]; positive part then head mean:
    abar = torch.tensor([[0.5, 0.0], [0.75, 0.5]])
    relevance_one = torch.eye(2) + abar
    torch.testing.assert_close(att.gae_relevance([attention], [gradient]), relevance_one)
    relevance_two = relevance_one + abar @ relevance_one  # [[2.25, 0], [3.375, 2.25]]
    torch.testing.assert_close(att.gae_relevance([attention, attention], [gradient, gradient]), relevance_two)
    torch.testing.assert_close(att.gae_scores([attention, attention], [gradient, gradient]),
                               torch.tensor([2.25, 0.0]))


def test_gae_positive_part_rule_changes_result_where_heads_disagree():
    attention = torch.ones(2, 1, 1)
    gradient = torch.tensor([[[0.4]], [[-0.2]]])
    per_head = att.gradient_weighted_attention(attention, gradient, "per_head")
    after_mean = att.gradient_weighted_attention(attention, gradient, "after_head_mean")
    torch.testing.assert_close(per_head, torch.tensor([[0.2]]))
    torch.testing.assert_close(after_mean, torch.tensor([[0.1]]))
    with pytest.raises(ValueError, match="positive_part"):
        att.gradient_weighted_attention(attention, gradient, "max")


def test_gae_with_zero_gradient_is_identity():
    attention = torch.softmax(torch.randn(3, 4, 4), -1)
    torch.testing.assert_close(att.gae_relevance([attention] * 2, [torch.zeros_like(attention)] * 2), torch.eye(4))


def test_attention_x_gradient_by_hand():
    attention = torch.tensor([[[0.5, 0.3, 0.2], [0, 0, 1], [0, 0, 1]],
                              [[0.1, 0.1, 0.8], [0, 0, 1], [0, 0, 1]]])
    gradient = torch.tensor([[[1.0, -2.0, 3.0], [9, 9, 9], [9, 9, 9]],
                             [[-4.0, 5.0, 0.5], [9, 9, 9], [9, 9, 9]]])
    # CLS-row products: [.5, -.6, .6] and [-.4, .5, .4] -> positive part -> mean: [.25, .25, .5]
    torch.testing.assert_close(att.attention_x_gradient_scores(attention, gradient), torch.tensor([0.25, 0.25, 0.5]))


def test_attcat_by_hand():
    hidden = [torch.tensor([[1.0, 2.0], [3.0, -1.0]]), torch.tensor([[0.5, 0.5], [2.0, 2.0]])]
    grads = [torch.tensor([[1.0, 1.0], [1.0, 2.0]]), torch.tensor([[2.0, 0.0], [-1.0, 0.5]])]
    attentions = [torch.tensor([[[0.6, 0.4], [0.5, 0.5]]]), torch.tensor([[[0.2, 0.8], [1.0, 0.0]]])]
    # layer 1: cat = [3, 1], cls attention [.6, .4] -> [1.8, .4]; layer 2: cat = [1, -1], [.2, .8] -> [.2, -.8]
    torch.testing.assert_close(att.attcat_scores(hidden, grads, attentions), torch.tensor([2.0, -0.4]))


def test_pure_functions_reject_bad_shapes():
    with pytest.raises(ValueError, match="shape"):
        att.rollout([torch.ones(2, 3)])
    with pytest.raises(ValueError, match="at least one layer"):
        att.rollout([])
    with pytest.raises(ValueError, match="gradient shape"):
        att.attention_x_gradient_scores(torch.ones(2, 3, 3), torch.ones(1, 3, 3))
    with pytest.raises(ValueError, match="one gradient per attention layer"):
        att.gae_relevance([torch.ones(1, 2, 2)], [])


# ---------------------------------------------------------------- on a tiny BERT

def test_raw_attention_is_head_mean_of_cls_row(model, batch):
    with torch.no_grad():
        attentions = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                           output_attentions=True).attentions
    for layer in (-1, 0):
        result = build_method("raw_attention", layer=layer).explain(model, batch)
        expected = attentions[layer][:, :, 0, :].mean(dim=1)
        torch.testing.assert_close(result.scores, expected)
        assert result.model_calls == 1
    # Sanity: this tiny model's attention is far from uniform, so the comparison has teeth.
    assert (expected.max(dim=1).values - expected.min(dim=1).values).min() > 0.05


def test_rollout_on_model_with_hand_set_uniform_attention(model, batch, monkeypatch):
    """Every head attends uniformly to the n real tokens (U); (0.5U + 0.5I)^2 = 0.25 I + 0.75 U."""

    def uniform_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        weights = torch.softmax(torch.zeros_like(query @ key.transpose(2, 3)) + attention_mask, dim=-1)
        return (weights @ value).transpose(1, 2).contiguous(), weights

    monkeypatch.setitem(AttentionInterface._global_mapping, "uniform", uniform_attention)
    monkeypatch.setitem(AttentionMaskInterface._global_mapping, "uniform", eager_mask)
    uniform = copy.deepcopy(model)
    uniform.set_attn_implementation("uniform")
    scores = build_method("attention_rollout").explain(uniform, batch).scores
    for i, row in enumerate(ROWS):
        n = len(row)
        expected = torch.full((batch.input_ids.shape[1],), 0.75 / n)
        expected[0] += 0.25
        expected[n:] = 0.0
        torch.testing.assert_close(scores[i], expected)
    raw = build_method("raw_attention").explain(uniform, batch).scores
    torch.testing.assert_close(raw[1, :4], torch.full((4,), 0.25))
    # Rollout through the first layer only: 0.5 I + 0.5 U.
    first = build_method("attention_rollout", layer=0).explain(uniform, batch).scores
    torch.testing.assert_close(first[1, :4], torch.tensor([0.5 + 0.125, 0.125, 0.125, 0.125]))


def test_returned_attentions_carry_the_gradient_of_the_attention_probabilities(model, batch, probe_model):
    """The attentions HF returns are the tensors multiplied with the values: their gradient equals the
    gradient w.r.t. an additive probe placed right before that product."""
    run = run_pass(model, batch, {ATTENTIONS, ATTENTION_GRADIENTS})
    probe_attentions, probe_gradients = probe_attentions_and_gradients(probe_model, batch)
    for layer in range(NUM_LAYERS):
        torch.testing.assert_close(run.attentions[layer], probe_attentions[layer])
        torch.testing.assert_close(run.attention_gradients[layer], probe_gradients[layer])
        assert probe_gradients[layer].abs().max() > 1e-3  # non-trivial gradients


def test_gae_and_attention_x_gradient_equal_manual_computation(model, batch, probe_model):
    attentions, gradients = probe_attentions_and_gradients(probe_model, batch)
    gae = build_method("gae").explain(model, batch)
    manual_relevance = torch.eye(attentions[0].shape[-1]).expand(len(ROWS), -1, -1)
    for a, g in zip(attentions, gradients):
        manual_relevance = manual_relevance + (a * g).clamp(min=0).mean(dim=1) @ manual_relevance
    torch.testing.assert_close(gae.scores, manual_relevance[:, 0, :])
    assert gae.model_calls == 1

    axg = build_method("attention_x_gradient").explain(model, batch)
    manual = (attentions[-1][:, :, 0, :] * gradients[-1][:, :, 0, :]).clamp(min=0).mean(dim=1)
    torch.testing.assert_close(axg.scores, manual)
    assert axg.model_calls == 1 and manual.max() > 0
    first = build_method("attention_x_gradient", layer=0).explain(model, batch).scores
    torch.testing.assert_close(first, (attentions[0][:, :, 0, :] * gradients[0][:, :, 0, :]).clamp(min=0).mean(1))


def test_attcat_equals_manual_computation_with_layer_hooks(model, batch):
    """One example at a time, layer outputs caught by forward hooks, gradients by retain_grad + backward."""
    explained = build_method("attcat").explain(model, batch)
    assert explained.model_calls == 1
    manual_model = copy.deepcopy(model)
    for i, (row, target) in enumerate(zip(ROWS, TARGETS)):
        outputs: list[torch.Tensor] = []

        def keep_output(module, inputs, output):
            output.retain_grad()
            outputs.append(output)

        hooks = [layer.register_forward_hook(keep_output) for layer in manual_model.bert.encoder.layer]
        ids = torch.tensor([row])
        result = manual_model(input_ids=ids, attention_mask=torch.ones_like(ids), output_attentions=True)
        result.logits[0, target].backward()
        for hook in hooks:
            hook.remove()
        expected = sum((h.grad * h).sum(-1)[0] * a[0, :, 0, :].mean(0)
                       for h, a in zip(outputs, result.attentions))
        torch.testing.assert_close(explained.scores[i, :len(row)], expected.detach())
        assert expected.abs().max() > 1e-3


@pytest.mark.parametrize("name", sorted(METHODS))
def test_padded_batch_equals_each_example_alone(model, batch, name):
    explainer = build_method(name)
    batched = explainer.explain(model, batch).scores
    for i, (row, target) in enumerate(zip(ROWS, TARGETS)):
        alone = explainer.explain(model, make_batch([row], [target])).scores[0]
        torch.testing.assert_close(batched[i, :len(row)], alone, rtol=1e-4, atol=1e-6)
        # Padding gets exactly zero: no method lets it leak into the [CLS] row.
        assert torch.all(batched[i, len(row):] == 0)


@pytest.mark.parametrize("name", sorted(METHODS))
def test_registry_builds_each_method_by_name(name):
    explainer = build_method(name)
    assert isinstance(explainer, METHODS[name])
    assert explainer.name == name and explainer.family == "attention"


def test_settings_are_checked_with_clear_errors(model, batch):
    with pytest.raises(ValueError, match="layer=2 is out of range for a model with 2 layers"):
        build_method("raw_attention", layer=2).explain(model, batch)
    with pytest.raises(TypeError, match="parameter layer must be an int"):
        build_method("attention_rollout", layer="last")
    with pytest.raises(ValueError, match="positive_part"):
        build_method("gae", positive_part="max")
    bad_target = make_batch([ROWS[0]], [3])
    with pytest.raises(ValueError, match="batch.target"):
        build_method("gae").explain(model, bad_target)


def test_non_eager_model_gives_a_clear_error(batch, make_model):
    sdpa_model = make_model(attn_implementation="sdpa")
    with pytest.raises(ValueError, match="attn_implementation='eager'"):
        build_method("raw_attention").explain(sdpa_model, batch)


def test_training_mode_frozen_weights_and_parameter_grads_are_respected(model, batch):
    """Dropout is off while explaining and the mode is restored; frozen weights still give gradients;
    the model's parameter .grad are left untouched."""
    expected = build_method("gae").explain(model, batch).scores
    other = copy.deepcopy(model)
    other.train()
    for parameter in other.parameters():
        parameter.requires_grad_(False)
    with torch.no_grad():  # callers may explain inside no_grad; gradients are still computed
        scores = build_method("gae").explain(other, batch).scores
    torch.testing.assert_close(scores, expected)
    assert other.training
    build_method("attcat").explain(model, batch)
    assert all(parameter.grad is None for parameter in model.parameters())
