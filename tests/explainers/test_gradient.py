"""Gradient-family explainers against manual autograd, hand-set linear models and IG's completeness."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from transformers import BertConfig, BertForSequenceClassification

from learned_attribution.explainers import Batch, build_explainer
from learned_attribution.explainers.base import make_batch as base_make_batch
from learned_attribution.explainers import gradient as grad

PAD, CLS, SEP, MASK = 0, 1, 2, 3
ROWS = [[CLS, 7, 12, 30, 5, 9, SEP], [CLS, 22, 8, SEP], [CLS, 17, 33, 11, 26, SEP]]
TARGETS = [0, 2, 1]


def tiny_classifier(seed: int = 0) -> BertForSequenceClassification:
    """2-layer BERT with weights large enough that logits and gradients are far from zero."""
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16, num_labels=3, initializer_range=0.5,
                        attn_implementation="eager")
    return BertForSequenceClassification(config).eval()


def make_batch(rows: list[list[int]], targets: list[int]) -> Batch:
    """Right-padded batch; [CLS], [SEP] and padding are special."""
    return base_make_batch(rows, targets, pad_token_id=PAD, mask_token_id=MASK, frame_token_ids=(CLS, SEP, PAD))


class BagOfEmbeddings(torch.nn.Module):
    """logits = sum over real tokens of E[token] @ W: linear in the word embeddings, so every gradient
    method has a closed form. Counts the rows it is run on."""

    def __init__(self, embeddings: torch.Tensor, weights: torch.Tensor) -> None:
        super().__init__()
        self.embeddings = torch.nn.Embedding.from_pretrained(embeddings, freeze=False)
        self.weights = torch.nn.Parameter(weights)
        self.rows = 0

    def get_input_embeddings(self) -> torch.nn.Embedding:
        return self.embeddings

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, **_) -> SimpleNamespace:
        self.rows += input_ids.shape[0]
        summed = (self.embeddings(input_ids) * attention_mask[..., None]).sum(dim=1)
        return SimpleNamespace(logits=summed @ self.weights)


@pytest.fixture(scope="module")
def model() -> BertForSequenceClassification:
    return tiny_classifier()


@pytest.fixture(scope="module")
def batch() -> Batch:
    return make_batch(ROWS, TARGETS)


def manual_embedding_gradient(model, batch) -> tuple[torch.Tensor, torch.Tensor]:
    """(gradient of the target logit w.r.t. the word-embedding output, that output), via inputs_embeds."""
    embeddings = model.get_input_embeddings()(batch.input_ids).detach().requires_grad_(True)
    logits = model(inputs_embeds=embeddings, attention_mask=batch.attention_mask).logits
    target_logits = logits[torch.arange(len(batch.target)), batch.target]
    (gradient,) = torch.autograd.grad(target_logits.sum(), embeddings)
    return gradient, embeddings.detach()


def test_saliency_and_input_x_gradient_equal_manual_autograd(model, batch):
    gradient, embeddings = manual_embedding_gradient(model, batch)
    real = batch.attention_mask.bool()
    saliency = build_explainer("saliency").explain(model, batch)
    input_x_gradient = build_explainer("input_x_gradient").explain(model, batch)
    assert saliency.scores.shape == batch.input_ids.shape
    assert saliency.scores[real].abs().min() > 0  # a real signal, not all zeros
    torch.testing.assert_close(saliency.scores[real], gradient.norm(dim=-1)[real], rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(input_x_gradient.scores[real], (gradient * embeddings).sum(-1)[real],
                               rtol=1e-5, atol=1e-7)
    assert (saliency.scores[~real] == 0).all() and (input_x_gradient.scores[~real] == 0).all()
    assert saliency.model_calls == 1 and input_x_gradient.model_calls == 1


def test_closed_forms_on_a_model_linear_in_the_embeddings():
    torch.manual_seed(1)
    embeddings, weights = torch.randn(10, 4), torch.randn(4, 2)
    model = BagOfEmbeddings(embeddings, weights)
    batch = make_batch([[CLS, 5, 6, 7, SEP]], [1])
    w = weights[:, 1]
    tokens = batch.input_ids[0]
    expected_ixg = embeddings[tokens] @ w
    # IG is exact on a linear model whatever the step count; specials keep their ids in the baseline.
    expected_ig = (embeddings[tokens] - embeddings[PAD]) @ w * (~batch.special_mask[0])
    torch.testing.assert_close(build_explainer("saliency").explain(model, batch).scores[0],
                               w.norm().expand(5), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(build_explainer("input_x_gradient").explain(model, batch).scores[0],
                               expected_ixg, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(build_explainer("integrated_gradients", n_steps=3).explain(model, batch).scores[0],
                               expected_ig, rtol=1e-5, atol=1e-6)


def test_pad_baseline_replaces_only_real_non_special_tokens(batch):
    baseline = grad.pad_baseline_ids(batch)
    assert baseline[1].tolist() == [CLS, PAD, PAD, SEP, PAD, PAD, PAD]
    assert baseline[0].tolist() == [CLS, PAD, PAD, PAD, PAD, PAD, SEP]


def test_integrated_gradients_completeness(model, batch):
    explainer = build_explainer("integrated_gradients", n_steps=50, internal_batch_size=37)
    attribution = explainer.explain(model, batch)
    rows = torch.arange(len(batch.target))
    with torch.no_grad():
        at_input = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits[rows, batch.target]
        at_baseline = model(input_ids=grad.pad_baseline_ids(batch),
                            attention_mask=batch.attention_mask).logits[rows, batch.target]
    difference = at_input - at_baseline
    assert difference.abs().max() > 0.3  # the identity is tested on a real output change
    torch.testing.assert_close(attribution.scores.sum(dim=1), difference, rtol=1e-3, atol=1e-3)
    assert explainer.last_convergence_delta.abs().max() < 1e-3
    assert (attribution.scores[batch.special_mask] == 0).all()


def test_integrated_gradients_counts_its_model_calls():
    torch.manual_seed(2)
    model = BagOfEmbeddings(torch.randn(10, 4), torch.randn(4, 2))
    batch = make_batch([[CLS, 5, 6, SEP], [CLS, 7, SEP]], [0, 1])
    attribution = build_explainer("integrated_gradients", n_steps=7, internal_batch_size=5).explain(model, batch)
    assert attribution.model_calls == model.rows / 2 == 7 + 4


def manual_grad_cam(model, batch) -> torch.Tensor:
    """Grad-CAM from a forward hook on the last encoder block (independent of output_hidden_states)."""
    captured = {}

    def keep_output(_module, _inputs, output):
        hidden = output[0] if isinstance(output, tuple) else output
        hidden.retain_grad()
        captured["hidden"] = hidden

    handle = model.bert.encoder.layer[-1].register_forward_hook(keep_output)
    try:
        logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
        logits[torch.arange(len(batch.target)), batch.target].sum().backward()
    finally:
        handle.remove()
        model.zero_grad(set_to_none=True)
    hidden, gradient = captured["hidden"].detach(), captured["hidden"].grad
    expected = torch.zeros(batch.input_ids.shape)
    for row in range(len(batch.target)):
        n = int(batch.attention_mask[row].sum())
        weights = gradient[row, :n].mean(dim=0)  # per feature, over the example's real tokens
        expected[row, :n] = torch.relu(hidden[row, :n] @ weights)
    return expected


def test_grad_cam_equals_manual_computation(model, batch):
    expected = manual_grad_cam(model, batch)
    scores = build_explainer("grad_cam").explain(model, batch).scores
    assert (expected > 0).any() and (expected == 0).any()  # ReLU active on some tokens, not all
    torch.testing.assert_close(scores, expected, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", ["saliency", "input_x_gradient", "integrated_gradients", "grad_cam"])
def test_padding_does_not_change_real_token_scores(model, batch, name):
    batched = build_explainer(name).explain(model, batch).scores
    for row, tokens in enumerate(ROWS):
        single = build_explainer(name).explain(model, make_batch([tokens], [TARGETS[row]])).scores[0]
        torch.testing.assert_close(batched[row, :len(tokens)], single, rtol=1e-4, atol=1e-6)
        assert (batched[row, len(tokens):] == 0).all()


def test_dropout_is_off_and_training_mode_restored(batch):
    model = tiny_classifier()
    model.config.hidden_dropout_prob = 0.5
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.5
    expected = build_explainer("saliency").explain(model, batch).scores
    model.train()
    again = build_explainer("saliency").explain(model, batch).scores
    assert model.training
    torch.testing.assert_close(again, expected)


@pytest.mark.parametrize("name, cls", [("saliency", grad.Saliency), ("input_x_gradient", grad.InputXGradient),
                                       ("integrated_gradients", grad.IntegratedGradients),
                                       ("grad_cam", grad.GradCam)])
def test_registry_builds_each_gradient_method(name, cls):
    explainer = build_explainer(name)
    assert isinstance(explainer, cls) and explainer.name == name and explainer.family == "gradient"


def test_integrated_gradients_settings_and_bad_values():
    explainer = build_explainer("integrated_gradients", n_steps=5, internal_batch_size=None)
    assert explainer.n_steps == 5 and explainer.internal_batch_size is None
    assert build_explainer("integrated_gradients").n_steps == 20
    with pytest.raises(ValueError, match="n_steps"):
        build_explainer("integrated_gradients", n_steps=0)
    with pytest.raises(ValueError, match="internal_batch_size"):
        build_explainer("integrated_gradients", internal_batch_size=-1)
