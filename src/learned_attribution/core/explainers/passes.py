"""One pass of the classifier that several explainers read: the forward pass (with the attentions and hidden states
they need) and one backward pass from the explained logit to everything they differentiate.

Nine baselines are functions of a single forward and backward pass: raw attention, rollout, GAE, AttCAT, attention
x gradient, saliency, input x gradient, Grad-CAM and the AFN norm. Each is a `PassMethod`: it names what it reads
(`needs`) and computes its scores from a `ModelPass` (`scores_from`). Its `explain` runs a pass of its own, so a
method alone costs what it always did; `explain_together` runs one pass with the union of the needs of several, so
explaining a batch with all nine costs one forward and one backward pass instead of nine (the backward pass runs
once, down to the earliest tensor any of them differentiates). The scores are the same either way: the same
forward computation, and each gradient the same chain of the same backward pass (tested to float rounding).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar, Iterable, Mapping

import torch

from learned_attribution.core.models.architectures import no_attentions_message
from learned_attribution.core.models.runner import eval_mode

from .base import Attribution, AttributionMethod, Batch, attention_methods

# What a pass can provide (`PassMethod.needs`):
ATTENTIONS = "attentions"  # per layer [B, H, T, T] attention probabilities
ATTENTION_GRADIENTS = "attention_gradients"  # per layer d logit / d attentions
HIDDEN_STATES = "hidden_states"  # [embedding output, layer 1 output, ...] [B, T, D] (HF's `hidden_states`)
HIDDEN_GRADIENTS = "hidden_gradients"  # per layer output (not the embedding output) d logit / d h
EMBEDDING_GRADIENTS = "embedding_gradients"  # d logit / d word-embedding output (before positions and LayerNorm)
NEEDS = frozenset({ATTENTIONS, ATTENTION_GRADIENTS, HIDDEN_STATES, HIDDEN_GRADIENTS, EMBEDDING_GRADIENTS})
_GRADIENTS = frozenset({ATTENTION_GRADIENTS, HIDDEN_GRADIENTS, EMBEDDING_GRADIENTS})


@dataclass
class ModelPass:
    """One forward (and, when a need asks for it, backward) pass of a classifier on a batch; float32, detached.
    Fields a pass was not asked for are None."""

    logits: torch.Tensor  # [B, C]
    target: torch.Tensor  # [B] the explained class: `batch.target`, or the predicted class when it is None
    attentions: list[torch.Tensor] | None = None
    attention_gradients: list[torch.Tensor] | None = None
    hidden_states: list[torch.Tensor] | None = None
    hidden_gradients: list[torch.Tensor] | None = None
    word_embeddings: torch.Tensor | None = None  # [B, T, H] the word-embedding layer's output
    embedding_gradients: torch.Tensor | None = None

    def layer_outputs(self) -> list[torch.Tensor]:
        """The hidden states at each layer's output (the embedding output excluded)."""
        return self.hidden_states[1:]


class WordEmbeddingLeaf:
    """A forward hook on the word-embedding layer that makes its output a leaf of the autograd graph (`leaf`),
    optionally replaced by given values (`replacement`). The backward pass then stops there (nothing below the
    layer is needed), and the gradient exists even when the embedding weights are frozen."""

    def __init__(self, model: torch.nn.Module, replacement: torch.Tensor | None = None) -> None:
        self.layer = model.get_input_embeddings()
        self.replacement = replacement
        self.leaf: torch.Tensor | None = None

    def _hook(self, _module: torch.nn.Module, _inputs: tuple, output: torch.Tensor) -> torch.Tensor:
        if self.leaf is not None:
            raise RuntimeError("the word-embedding layer ran twice in one forward pass; expected once")
        values = output if self.replacement is None else self.replacement
        if values.shape != output.shape:
            raise ValueError(f"replacement embeddings {tuple(values.shape)} for an output of {tuple(output.shape)}")
        self.leaf = values.detach().requires_grad_(True)
        return self.leaf

    def __enter__(self) -> "WordEmbeddingLeaf":
        self._handle = self.layer.register_forward_hook(self._hook)
        return self

    def __exit__(self, *exc) -> None:
        self._handle.remove()


def check_batch(batch: Batch) -> None:
    """A clear error for a batch whose tensors disagree in shape."""
    if batch.input_ids.ndim != 2:
        raise ValueError(f"batch.input_ids must be [B, T]; got shape {tuple(batch.input_ids.shape)}")
    if batch.attention_mask.shape != batch.input_ids.shape:
        raise ValueError(f"batch.attention_mask shape {tuple(batch.attention_mask.shape)} differs from "
                         f"batch.input_ids shape {tuple(batch.input_ids.shape)}")
    if batch.target is not None and batch.target.shape != (batch.input_ids.shape[0],):
        raise ValueError(f"batch.target must be [B] = [{batch.input_ids.shape[0]}]; got shape "
                         f"{tuple(batch.target.shape)}")


def run_pass(model: torch.nn.Module, batch: Batch, needs: Iterable[str]) -> ModelPass:
    """One pass of `model` on `batch` providing `needs` (a subset of `NEEDS`), the gradients of each row's explained
    logit (`batch.target`, or the predicted class). Attentions need an eager-attention model (a clear error
    otherwise)."""
    needs = frozenset(needs)
    unknown = needs - NEEDS
    if unknown:
        raise ValueError(f"unknown pass needs {sorted(unknown)}; known: {sorted(NEEDS)}")
    check_batch(batch)
    device = next(model.parameters()).device
    input_ids, attention_mask = batch.input_ids.to(device), batch.attention_mask.to(device)
    attentions_needed = bool(needs & {ATTENTIONS, ATTENTION_GRADIENTS})
    hidden_needed = bool(needs & {HIDDEN_STATES, HIDDEN_GRADIENTS})
    differentiate = bool(needs & _GRADIENTS)
    with eval_mode(model), torch.set_grad_enabled(differentiate), WordEmbeddingLeaf(model) as tap:
        output = model(input_ids=input_ids, attention_mask=attention_mask, output_attentions=attentions_needed,
                       output_hidden_states=hidden_needed)
        attentions = list(output.attentions or ()) if attentions_needed else None
        if attentions is not None and (not attentions or any(a is None for a in attentions)):
            raise ValueError(no_attentions_message(model, attention_methods()))
        logits = output.logits
        num_labels = logits.shape[-1]
        if batch.target is not None and ((batch.target < 0) | (batch.target >= num_labels)).any():
            raise ValueError(f"batch.target holds {batch.target.tolist()}, outside 0..{num_labels - 1} "
                             f"for a {num_labels}-class model")
        target = logits.detach().argmax(dim=-1) if batch.target is None else batch.target.to(device)
        hidden = list(output.hidden_states) if hidden_needed else None
        wrt: dict[str, list[torch.Tensor]] = {}
        if ATTENTION_GRADIENTS in needs:
            wrt[ATTENTION_GRADIENTS] = attentions
        if HIDDEN_GRADIENTS in needs:
            wrt[HIDDEN_GRADIENTS] = hidden[1:]
        if EMBEDDING_GRADIENTS in needs:
            wrt[EMBEDDING_GRADIENTS] = [tap.leaf]
        gradients: dict[str, list[torch.Tensor]] = {}
        if wrt:
            # One backward pass for every tensor asked for. autograd.grad, not backward(): the model's parameter
            # .grad stay untouched, and a tensor that is not on the path to the logits fails loudly. The sum over
            # rows of each row's target logit gives every row its own gradient (rows never interact).
            flat = [tensor for tensors in wrt.values() for tensor in tensors]
            grads = iter(torch.autograd.grad(logits.gather(1, target[:, None]).sum(), flat))
            gradients = {key: [next(grads).detach().float() for _ in tensors] for key, tensors in wrt.items()}
    return ModelPass(
        logits=logits.detach(), target=target,
        attentions=[a.detach().float() for a in attentions] if ATTENTIONS in needs else None,
        attention_gradients=gradients.get(ATTENTION_GRADIENTS),
        hidden_states=[h.detach().float() for h in hidden] if HIDDEN_STATES in needs else None,
        hidden_gradients=gradients.get(HIDDEN_GRADIENTS),
        word_embeddings=tap.leaf.detach().float() if EMBEDDING_GRADIENTS in needs else None,
        embedding_gradients=gradients[EMBEDDING_GRADIENTS][0] if EMBEDDING_GRADIENTS in needs else None)


def zero_padding(scores: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Scores with every padding position set to 0 (float32, detached)."""
    return (scores.detach().float() * attention_mask.to(scores.device).bool()).float()


class PassMethod(AttributionMethod):
    """A method whose scores are a function of one pass of the classifier (`needs`: what it reads of it). With
    `batch.target` None it explains the class the pass predicts and returns the pass's logits."""

    needs: ClassVar[frozenset[str]] = frozenset()
    classifies = True

    def scores_from(self, run: ModelPass, batch: Batch) -> torch.Tensor:
        """[B, T] scores from a pass that provides at least `needs`."""
        raise NotImplementedError

    def attribution(self, run: ModelPass, batch: Batch) -> Attribution:
        """The method's attribution from a pass (padding 0; one model call per example: a backward pass rides on
        its forward pass, the convention of `base.Attribution`)."""
        return Attribution(scores=zero_padding(self.scores_from(run, batch), batch.attention_mask), model_calls=1,
                           logits=run.logits)

    def explain(self, model: torch.nn.Module, batch: Batch) -> Attribution:
        return self.attribution(run_pass(model, batch, self.needs), batch)


def explain_together(model: torch.nn.Module, batch: Batch,
                     methods: Mapping[str, AttributionMethod]) -> dict[str, Attribution]:
    """Every method's attribution of `batch` (name -> attribution, in the order of `methods`): the `PassMethod`s from
    one shared pass, the others each by its own `explain`. With `batch.target` None, the first pass explains the class
    it predicts and every later method explains that class: the first method run (the shared pass, else the first of
    `methods`) must classify (`AttributionMethod.classifies`)."""
    shared = {name: method for name, method in methods.items() if isinstance(method, PassMethod)}
    out: dict[str, Attribution] = {}
    if len(shared) > 1:
        run = run_pass(model, batch, frozenset().union(*(method.needs for method in shared.values())))
        out.update({name: method.attribution(run, batch) for name, method in shared.items()})
        batch = replace(batch, target=run.target)
    for name, method in methods.items():
        if name in out:
            continue
        if batch.target is None and not method.classifies:
            raise ValueError(f"explainer {name!r} needs the class to explain: without a target, a method that "
                             "classifies must run first")
        out[name] = method.explain(model, batch)
        if batch.target is None:
            batch = replace(batch, target=out[name].logits.detach().argmax(dim=-1))
    return {name: out[name] for name in methods}
