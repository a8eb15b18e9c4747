"""Gradient-family explainers against manual autograd, hand-set linear models and IG's completeness."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from transformers import BertForSequenceClassification

from learned_attribution.core.explainers import Batch, build_method
from learned_attribution.core.explainers.base import padded_batch
from learned_attribution.core.explainers import gradient as grad

PAD, CLS, SEP, MASK = 0, 1, 2, 3
ROWS = [[CLS, 7, 12, 30, 5, 9, SEP], [CLS, 22, 8, SEP], [CLS, 17, 33, 11, 26, SEP]]
TARGETS = [0, 2, 1]


@pytest.fixture(scope="module")
def make_model(tiny_bert_classifier):
    """Factory: a 2-layer BERT (the shared tiny factory) with weights large enough that logits and gradients are far
    from zero."""

    def build(seed: int = 0) -> BertForSequenceClassification:
        return tiny_bert_classifier(num_labels=3, seed=seed, max_position_embeddings=16, initializer_range=0.5)

    return build


def make_batch(rows: list[list[int]], targets: list[int]) -> Batch:
    """Right-padded batch; [CLS], [SEP] and padding are special."""
    return padded_batch(rows, targets, pad_token_id=PAD, mask_token_id=MASK, frame_token_ids=(CLS, SEP, PAD))


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
def model(make_model) -> BertForSequenceClassification:
    return make_model()


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
    saliency = build_method("saliency").explain(model, batch)
    input_x_gradient = build_method("input_x_gradient").explain(model, batch)
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
    torch.testing.assert_close(build_method("saliency").explain(model, batch).scores[0],
                               w.norm().expand(5), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(build_method("input_x_gradient").explain(model, batch).scores[0],
                               expected_ixg, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(build_method("integrated_gradients", n_steps=3).explain(model, batch).scores[0],
                               expected_ig, rtol=1e-5, atol=1e-6)


def test_pad_baseline_replaces_only_real_non_special_tokens(batch):
    baseline = grad.pad_baseline_ids(batch)
    assert baseline[1].tolist() == [CLS, PAD, PAD, SEP, PAD, PAD, PAD]
    assert baseline[0].tolist() == [CLS, PAD, PAD, PAD, PAD, PAD, SEP]


def test_integrated_gradients_completeness(model, batch):
    explainer = build_method("integrated_gradients", n_steps=50, internal_batch_size=37)
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
    attribution = build_method("integrated_gradients", n_steps=7, internal_batch_size=5).explain(model, batch)
    # n_steps path steps and one forward pass at each end (input, baseline) per example.
    assert attribution.model_calls == model.rows / 2 == 7 + 2


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
    scores = build_method("grad_cam").explain(model, batch).scores
    assert (expected > 0).any() and (expected == 0).any()  # ReLU active on some tokens, not all
    torch.testing.assert_close(scores, expected, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", ["saliency", "input_x_gradient", "integrated_gradients", "grad_cam"])
def test_padding_does_not_change_real_token_scores(model, batch, name):
    batched = build_method(name).explain(model, batch).scores
    for row, tokens in enumerate(ROWS):
        single = build_method(name).explain(model, make_batch([tokens], [TARGETS[row]])).scores[0]
        # float error of a padded against an unpadded pass: about 2e-6 on scores of about 1e-2 (a dot product)
        torch.testing.assert_close(batched[row, :len(tokens)], single, rtol=1e-4, atol=1e-5)
        assert (batched[row, len(tokens):] == 0).all()


def test_dropout_is_off_and_training_mode_restored(batch, make_model):
    model = make_model()
    model.config.hidden_dropout_prob = 0.5
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.5
    expected = build_method("saliency").explain(model, batch).scores
    model.train()
    again = build_method("saliency").explain(model, batch).scores
    assert model.training
    torch.testing.assert_close(again, expected)


@pytest.mark.parametrize("name, cls", [("saliency", grad.Saliency), ("input_x_gradient", grad.InputXGradient),
                                       ("integrated_gradients", grad.IntegratedGradients),
                                       ("grad_cam", grad.GradCam)])
def test_registry_builds_each_gradient_method(name, cls):
    explainer = build_method(name)
    assert isinstance(explainer, cls) and explainer.name == name and explainer.family == "gradient"


def test_integrated_gradients_settings_and_bad_values():
    explainer = build_method("integrated_gradients", n_steps=5, internal_batch_size=None)
    assert explainer.n_steps == 5 and explainer.internal_batch_size is None
    assert build_method("integrated_gradients").n_steps == 20
    with pytest.raises(ValueError, match="n_steps"):
        build_method("integrated_gradients", n_steps=0)
    with pytest.raises(ValueError, match="internal_batch_size"):
        build_method("integrated_gradients", internal_batch_size=-1)


# ----------------------------------------------------------------------------------------------------
# Same numbers as captum, one text at a time or batched, with or without a target
# ----------------------------------------------------------------------------------------------------

# Lengths 9, 4, 6, 4, 12, 2 + 2: two texts of equal length, the rest all different.
MIXED_ROWS = [[CLS, 7, 12, 30, 5, 9, 14, 21, SEP], [CLS, 22, 8, SEP], [CLS, 17, 33, 11, 26, SEP],
              [CLS, 5, 5, SEP], [CLS, 31, 4, 18, 9, 9, 27, 6, 13, 38, 10, SEP], [CLS, SEP]]
MIXED_TARGETS = [0, 2, 1, 1, 0, 2]


@pytest.fixture(scope="module")
def captum_reference():
    """captum's own calls on the word-embedding layer: what gradient.py computed through captum before."""
    from captum.attr import LayerGradientXActivation, LayerIntegratedGradients

    def attributions(model, batch, name, **settings):
        layer, forward = model.get_input_embeddings(), grad.logits_function(model)
        with torch.enable_grad():
            if name == "integrated_gradients":
                values, delta = LayerIntegratedGradients(forward, layer).attribute(
                    batch.input_ids, baselines=grad.pad_baseline_ids(batch), target=batch.target,
                    additional_forward_args=(batch.attention_mask,), return_convergence_delta=True, **settings)
                return grad.zero_padding(values.sum(-1), batch.attention_mask), delta
            values = LayerGradientXActivation(forward, layer, multiply_by_inputs=name == "input_x_gradient").attribute(
                batch.input_ids, target=batch.target, additional_forward_args=(batch.attention_mask,))
        scores = values.norm(dim=-1) if name == "saliency" else values.sum(-1)
        return grad.zero_padding(scores, batch.attention_mask), None

    return attributions


@pytest.mark.parametrize("name", ["saliency", "input_x_gradient"])
def test_gradients_equal_captums_layer_gradient_x_activation(model, batch, captum_reference, name):
    expected, _ = captum_reference(model, batch, name)
    torch.testing.assert_close(build_method(name).explain(model, batch).scores, expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("settings", [{"n_steps": 20, "internal_batch_size": 64, "method": "gausslegendre"},
                                      {"n_steps": 9, "internal_batch_size": 4, "method": "riemann_trapezoid"}])
def test_integrated_gradients_equal_captums_layer_integrated_gradients(model, batch, captum_reference, settings):
    expected, expected_delta = captum_reference(model, batch, "integrated_gradients", **settings)
    explainer = build_method("integrated_gradients", **settings)
    torch.testing.assert_close(explainer.explain(model, batch).scores, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(explainer.last_convergence_delta, expected_delta.float(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mix_lengths", [False, True])
@pytest.mark.parametrize("internal_batch_size", [None, 7, 64])
def test_integrated_gradients_batched_equals_each_text_alone(tiny_bert_classifier, mix_lengths, internal_batch_size):
    model = tiny_bert_classifier(num_labels=3, seed=3, initializer_range=0.5)
    settings = {"n_steps": 12, "internal_batch_size": internal_batch_size, "mix_lengths": mix_lengths}
    explainer = build_method("integrated_gradients", **settings)
    batched = explainer.explain(model, make_batch(MIXED_ROWS, MIXED_TARGETS))
    deltas = explainer.last_convergence_delta
    assert batched.scores.abs().max() > 0.1  # a real signal
    for row, tokens in enumerate(MIXED_ROWS):
        alone = explainer.explain(model, make_batch([tokens], [MIXED_TARGETS[row]]))
        torch.testing.assert_close(batched.scores[row, :len(tokens)], alone.scores[0], rtol=0, atol=1e-5)
        torch.testing.assert_close(deltas[row], explainer.last_convergence_delta[0], rtol=0, atol=1e-5)
        torch.testing.assert_close(batched.logits[row], alone.logits[0], rtol=0, atol=1e-5)
        assert (batched.scores[row, len(tokens):] == 0).all()


class TokenCounter(BagOfEmbeddings):
    """`BagOfEmbeddings` that also counts the token positions (padding included) of every forward pass."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.tokens = 0

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, **_) -> SimpleNamespace:
        self.tokens += input_ids.numel()
        return super().forward(input_ids, attention_mask)


def test_integrated_gradients_computes_no_padding_on_the_cpu():
    """Each text's steps and ends run at its own length: the passes hold exactly the texts' own tokens,
    (n_steps + 2) x length per text, where padding every step to the longest text would cost far more."""
    torch.manual_seed(4)
    model = TokenCounter(torch.randn(40, 4), torch.randn(4, 3))
    batch = make_batch(MIXED_ROWS, MIXED_TARGETS)
    build_method("integrated_gradients", n_steps=5, internal_batch_size=8).explain(model, batch)
    assert model.tokens == sum(len(r) for r in MIXED_ROWS) * (5 + 2) < batch.input_ids.numel() * (5 + 2)


def test_pack_passes_covers_every_step_once_within_the_budget():
    lengths = [9, 4, 6, 4, 12, 4]
    for mix in (False, True):
        for max_rows in (None, 1, 5, 7, 100):
            passes = grad.pack_passes(lengths, 3, max_rows, mix)
            pairs = [pair for rows in passes for pair in rows]
            assert sorted(pairs) == [(row, step) for row in range(6) for step in range(3)]
            assert all(0 < len(rows) <= (max_rows or 18) for rows in passes)
            assert [lengths[row] for row, _ in pairs] == sorted(lengths[row] for row, _ in pairs)  # shortest first
            if not mix:
                assert all(len({lengths[row] for row, _ in rows}) == 1 for rows in passes)
    # Three texts of length 4 share passes; the others run alone.
    assert [len(rows) for rows in grad.pack_passes(lengths, 3, 5, False)] == [5, 4, 3, 3, 3]
    assert [len(rows) for rows in grad.pack_passes(lengths, 3, 5, True)] == [5, 5, 5, 3]


@pytest.mark.parametrize("name", ["saliency", "input_x_gradient", "integrated_gradients", "grad_cam"])
def test_without_a_target_the_predicted_class_is_explained_in_the_same_pass(model, batch, name):
    explainer = build_method(name)
    assert explainer.classifies
    with torch.no_grad():
        logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    predicted = make_batch(ROWS, logits.argmax(-1).tolist())
    assert predicted.target.tolist() != TARGETS  # the two differ: the class really is inferred
    untargeted = make_batch(ROWS, TARGETS)
    untargeted.target = None
    attribution = explainer.explain(model, untargeted)
    torch.testing.assert_close(attribution.logits, logits, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(attribution.scores, explainer.explain(model, predicted).scores, rtol=0, atol=0)


@pytest.mark.parametrize("name", ["saliency", "input_x_gradient", "integrated_gradients"])
def test_frozen_embedding_weights_give_the_same_scores(batch, name, make_model):
    model = make_model()
    expected = build_method(name).explain(model, batch).scores
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    torch.testing.assert_close(build_method(name).explain(model, batch).scores, expected, rtol=0, atol=0)


def test_integrated_gradients_rejects_bad_settings():
    with pytest.raises(ValueError, match="mix_lengths"):
        build_method("integrated_gradients", mix_lengths="yes")
    with pytest.raises(ValueError, match="approximation method"):
        build_method("integrated_gradients", method="simpson")


@pytest.mark.parametrize("family", ["bert", "roberta", "xlm-roberta", "mpnet", "deberta-v2"])
def test_integrated_gradients_completeness_on_every_position_scheme(family, tiny_classifier):
    """Completeness on families with absolute, id-derived (RoBERTa, XLM-R, MPNet) and relative (DeBERTa) positions:
    the baseline endpoint is the path's start, the [PAD] word embeddings at the text's own positions, whatever a
    family derives its position ids from."""
    from learned_attribution.core.explainers.apply import tokenizer_batch

    model, tokenizer = tiny_classifier(family, n_layers=2, n_heads=2)
    ids = [tokenizer("the film was not good , but fun")["input_ids"], tokenizer("a boring plot")["input_ids"]]
    batch = tokenizer_batch(ids, [1, 0], tokenizer)
    explainer = build_method("integrated_gradients", n_steps=64, internal_batch_size=None)
    attribution = explainer.explain(model, batch)
    rows = torch.arange(2)
    embedding = model.get_input_embeddings()
    with torch.no_grad(), grad.WordEmbeddingLeaf(model, embedding(grad.pad_baseline_ids(batch))):
        at_baseline = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits[rows, batch.target]
    with torch.no_grad():
        at_input = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits[rows, batch.target]
    torch.testing.assert_close(attribution.scores.sum(dim=1), at_input - at_baseline, rtol=2e-3, atol=2e-3)
    assert explainer.last_convergence_delta.abs().max() < 2e-3
