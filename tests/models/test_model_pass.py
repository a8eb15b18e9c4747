"""The one pass engine (`core/models/model_pass.py`) and its two readers: the ExpNet+ signals
(`core/models/signals.py`) and the pass baselines (`core/explainers/passes.py`). Where a signal column and a baseline
compute the same quantity, they agree exactly (the same engine, the same arithmetic), on a tiny classifier of every
family; a gradient at one block's input starts the graph there and equals the full graph's."""
from __future__ import annotations

import pytest
import torch

from learned_attribution.core.explainers import build_method
from learned_attribution.core.explainers.apply import tokenizer_batch
from learned_attribution.core.models.architectures import SUPPORTED_MODEL_TYPES, architecture
from learned_attribution.core.models.model_pass import (ATTENTION_GRADIENTS, ATTENTIONS, BLOCK_ATTENTION_GRADIENTS,
                                                        BLOCK_INPUT_GRADIENTS, EMBEDDING_GRADIENTS, HIDDEN_GRADIENTS,
                                                        HIDDEN_STATES, PassInputs, run_pass)
from learned_attribution.core.models.signals import KNOWN_SETS, model_columns, signals_and_logits

TEXTS = ["The unbelievable film , and it was good .", "a bad movie"]
TARGETS = [2, 0]


@pytest.fixture(scope="module", params=SUPPORTED_MODEL_TYPES)
def classifier(request, known_answer_classifier):
    return known_answer_classifier(request.param, n_layers=3, n_heads=2)


@pytest.fixture(scope="module")
def batch(classifier):
    _, tokenizer = classifier
    return tokenizer_batch([tokenizer(text)["input_ids"] for text in TEXTS], TARGETS, tokenizer)


def test_signal_columns_are_the_baselines_scores_of_the_same_pass(classifier, batch):
    """The saliency and input x gradient baselines are the `saliency` set's two columns, the AFN norm at layer k is
    `afn_norm_l{k}`, raw attention is the last `raw_attention_l`: bit for bit, at every real token."""
    model, _ = classifier
    sets = ["saliency", "afn_norm", "raw_attention_layers"]
    signals, logits = signals_and_logits(model, batch.input_ids, batch.attention_mask, batch.target, sets)
    column = dict(zip(model_columns(sets, model.config), signals.unbind(-1)))
    real = batch.attention_mask.bool()

    def baseline(name: str, **settings) -> torch.Tensor:
        return build_method(name, **settings).explain(model, batch).scores[real]

    assert torch.equal(column["embedding_grad_norm"][real], baseline("saliency"))
    assert torch.equal(column["embedding_grad_x_input"][real], baseline("input_x_gradient"))
    for layer in range(4):
        assert torch.equal(column[f"afn_norm_l{layer}"][real], baseline("afn_norm", layer=layer))
    assert torch.equal(column["raw_attention_l2"][real], baseline("raw_attention"))
    assert torch.equal(logits, build_method("saliency").explain(model, batch).logits.float())


def test_every_signal_set_is_one_pass_of_the_classifier(classifier, batch):
    model, _ = classifier
    calls = []
    handle = model.register_forward_hook(lambda module, inputs, output: calls.append(1))
    try:
        signals_and_logits(model, batch.input_ids, batch.attention_mask, None, KNOWN_SETS)
    finally:
        handle.remove()
    assert len(calls) == 1


def _requires_grad_below(model, batch, block: int, needs) -> bool:
    """Whether the hidden states entering the block below `block` required a gradient in a pass with `needs`."""
    seen = []
    below = architecture(model).blocks(model)[block - 1]
    handle = below.register_forward_pre_hook(
        lambda module, args, kwargs: seen.append(architecture(model).block_hidden_states(args, kwargs).requires_grad),
        with_kwargs=True)
    try:
        run_pass(model, batch, needs, block=block)
    finally:
        handle.remove()
    return seen == [True]


def test_a_gradient_at_a_block_starts_the_graph_there_and_equals_the_full_graphs(classifier, batch):
    """With only the block's gradients asked for, nothing below the block records a graph (the weights are frozen,
    the block's input is the leaf); the gradients equal those of a pass whose graph starts at the word embeddings,
    and the model's weights keep their requires_grad and get no .grad."""
    model, _ = classifier
    block = 2
    cheap = run_pass(model, batch, {BLOCK_INPUT_GRADIENTS, BLOCK_ATTENTION_GRADIENTS}, block=block)
    full = run_pass(model, batch, {HIDDEN_STATES, HIDDEN_GRADIENTS, ATTENTIONS, ATTENTION_GRADIENTS,
                                   EMBEDDING_GRADIENTS})
    assert torch.equal(cheap.block_input, full.hidden_states[block])  # the input of block 2: the output of block 1
    assert torch.equal(cheap.block_input_gradients, full.hidden_gradients[block - 1])
    assert torch.equal(cheap.block_attention_gradients, full.attention_gradients[block])
    assert cheap.block == block and full.block is None and cheap.attentions is None
    assert not _requires_grad_below(model, batch, block, {BLOCK_INPUT_GRADIENTS})
    assert _requires_grad_below(model, batch, block, {BLOCK_INPUT_GRADIENTS, EMBEDDING_GRADIENTS})
    assert all(parameter.requires_grad for parameter in model.parameters())
    assert all(parameter.grad is None for parameter in model.parameters())


def test_block_needs_name_a_block_in_range(tiny_bert_classifier):
    model = tiny_bert_classifier()
    ids = torch.tensor([[2, 7, 8, 3]])
    inputs = PassInputs(ids, torch.ones_like(ids), torch.tensor([1]))
    with pytest.raises(ValueError, match="block"):
        run_pass(model, inputs, {BLOCK_INPUT_GRADIENTS})
    with pytest.raises(ValueError, match="block=2 is out of range"):
        run_pass(model, inputs, {BLOCK_ATTENTION_GRADIENTS}, block=2)
    with pytest.raises(ValueError, match="unknown pass needs"):
        run_pass(model, inputs, {"magic"})


def test_with_a_contrast_every_gradient_is_of_the_margin(classifier, batch):
    """With a contrast class, each gradient of a pass is the target's minus the contrast's (the gradient of
    logit[target] - logit[contrast]); the forward tensors are those of the pass without it."""
    model, _ = classifier
    needs = {ATTENTIONS, ATTENTION_GRADIENTS, HIDDEN_STATES, HIDDEN_GRADIENTS, EMBEDDING_GRADIENTS,
             BLOCK_INPUT_GRADIENTS, BLOCK_ATTENTION_GRADIENTS}
    contrast = torch.tensor([1, 2])
    margin = run_pass(model, PassInputs(batch.input_ids, batch.attention_mask, batch.target, contrast), needs, block=1)
    target = run_pass(model, batch, needs, block=1)
    foil = run_pass(model, PassInputs(batch.input_ids, batch.attention_mask, contrast), needs, block=1)
    assert torch.equal(margin.contrast, contrast) and target.contrast is None
    assert torch.equal(margin.logits, target.logits) and torch.equal(margin.target, target.target)
    for field in ("attention_gradients", "hidden_gradients"):
        for ours, plain, other in zip(getattr(margin, field), getattr(target, field), getattr(foil, field)):
            torch.testing.assert_close(ours, plain - other, rtol=1e-4, atol=1e-6)
    for field in ("embedding_gradients", "block_input_gradients", "block_attention_gradients"):
        torch.testing.assert_close(getattr(margin, field), getattr(target, field) - getattr(foil, field),
                                   rtol=1e-4, atol=1e-6)
    assert not torch.allclose(margin.embedding_gradients, target.embedding_gradients)
    assert all(torch.equal(a, b) for a, b in zip(margin.attentions, target.attentions))


def test_a_contrast_the_pass_cannot_explain_is_refused(classifier, batch):
    model, _ = classifier
    ids, mask = batch.input_ids, batch.attention_mask
    with pytest.raises(ValueError, match="batch.contrast needs batch.target"):
        run_pass(model, PassInputs(ids, mask, None, torch.tensor([1, 2])), {EMBEDDING_GRADIENTS})
    with pytest.raises(ValueError, match=r"batch.contrast equals batch.target in rows \[0\]"):
        run_pass(model, PassInputs(ids, mask, torch.tensor([2, 0]), torch.tensor([2, 1])), {EMBEDDING_GRADIENTS})
    with pytest.raises(ValueError, match=r"batch.contrast holds \[1, 3\], outside 0..2 for a 3-class model"):
        run_pass(model, PassInputs(ids, mask, torch.tensor([2, 0]), torch.tensor([1, 3])), {ATTENTIONS})
    with pytest.raises(ValueError, match=r"batch.contrast must be \[B\] = \[2\]"):
        run_pass(model, PassInputs(ids, mask, torch.tensor([2, 0]), torch.tensor([1])), {ATTENTIONS})
