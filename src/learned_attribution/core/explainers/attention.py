"""The attention family of baseline explainers (SPEC §8): raw attention, rollout, GAE, AttCAT, attention x gradient.

Each method is a small pure function on attention (and gradient / hidden-state) tensors, testable on
hand-made matrices, plus a thin `AttributionMethod` class that runs the classifier and calls it.

Conventions shared by every function here:
- an attention tensor is `[..., H, T, T]` (heads on axis -3), rows are queries, columns are keys, each
  row sums to 1; the model gives `[B, H, T, T]` per layer;
- [CLS] sits at position 0 (`CLS_POSITION`), as in every family of `core/models/architectures.py`;
- gradients are of the target-class logit (not its probability), as in Chefer et al. and Qiang et al.

Padding never leaks into real tokens: the attention mask gives padding keys probability 0, so the
[CLS] row of every method below is exactly 0 at padded positions and does not depend on how much
padding a batch adds (tested). Scores at special and padding positions are returned; callers mask them.

`Attribution.model_calls`, per example: 1 for every method here (one forward pass; GAE, AttCAT and
attention x gradient also run its backward pass, which base.Attribution does not count separately).
A batch costs one forward (and one backward) pass for all its rows: the backward pass differentiates the
sum over rows of each row's target logit, which gives every row its own gradient because rows never
interact.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from learned_attribution.core.models.architectures import no_attentions_message
from learned_attribution.core.models.runner import eval_mode

from .base import Attribution, AttributionMethod, Batch, attention_methods, register

CLS_POSITION = 0
FAMILY = "attention"
FORWARD_ONLY_CALLS = 1
FORWARD_BACKWARD_CALLS = 1  # one forward pass (plus its backward pass), the convention of base.Attribution
GAE_POSITIVE_PART_RULES = ("per_head", "after_head_mean")


# ----------------------------------------------------------------------------------------------------
# Pure functions on tensors
# ----------------------------------------------------------------------------------------------------

def _check_attention_shape(attention: torch.Tensor, what: str = "attention") -> None:
    if attention.ndim < 3 or attention.shape[-1] != attention.shape[-2]:
        raise ValueError(f"{what} must have shape [..., heads, T, T]; got {tuple(attention.shape)}")


def mean_over_heads(attention: torch.Tensor) -> torch.Tensor:
    """`[..., H, T, T]` -> `[..., T, T]`: attention averaged over heads."""
    _check_attention_shape(attention)
    return attention.mean(dim=-3)


def cls_row(matrix: torch.Tensor) -> torch.Tensor:
    """`[..., T, T]` -> `[..., T]`: the row of the [CLS] query (how much [CLS] draws from each token)."""
    return matrix[..., CLS_POSITION, :]


def raw_attention_scores(attention: torch.Tensor) -> torch.Tensor:
    """Attention from [CLS] to each token in one layer, mean over heads: `[..., H, T, T]` -> `[..., T]`."""
    return cls_row(mean_over_heads(attention))


def rollout(attentions: Sequence[torch.Tensor]) -> torch.Tensor:
    """Attention rollout (Abnar & Zuidema 2020) of layers given first to last.

    Per layer the residual connection is modelled as A' = 0.5 * mean_heads(A) + 0.5 * I with rows
    renormalised to sum to 1; the rollout is A'_L @ ... @ A'_1. Returns `[..., T, T]`; row i says how
    much of token i's final representation flows from each input token.
    """
    if len(attentions) == 0:
        raise ValueError("rollout needs at least one layer of attention; got an empty list")
    result = None
    for index, attention in enumerate(attentions):
        _check_attention_shape(attention, f"attentions[{index}]")
        mixed = mean_over_heads(attention)
        identity = torch.eye(mixed.shape[-1], dtype=mixed.dtype, device=mixed.device)
        with_residual = 0.5 * mixed + 0.5 * identity
        with_residual = with_residual / with_residual.sum(dim=-1, keepdim=True)
        # Later layers multiply from the left: A'_l @ (A'_{l-1} @ ... @ A'_1).
        result = with_residual if result is None else with_residual @ result
    return result


def rollout_scores(attentions: Sequence[torch.Tensor]) -> torch.Tensor:
    """The [CLS] row of the attention rollout: `[..., T]`."""
    return cls_row(rollout(attentions))


def gradient_weighted_attention(attention: torch.Tensor, gradient: torch.Tensor,
                                positive_part: str = "per_head") -> torch.Tensor:
    """Chefer et al.'s Abar = E_h[(grad(A) * A)^+]: `[..., H, T, T]` -> `[..., T, T]`.

    `positive_part="per_head"` clamps each head before the mean (the paper's eq. 5 and its code);
    `"after_head_mean"` clamps the head mean instead.
    """
    _check_attention_shape(attention)
    if gradient.shape != attention.shape:
        raise ValueError(f"gradient shape {tuple(gradient.shape)} differs from attention shape "
                         f"{tuple(attention.shape)}")
    weighted = gradient * attention
    if positive_part == "per_head":
        return weighted.clamp(min=0).mean(dim=-3)
    if positive_part == "after_head_mean":
        return weighted.mean(dim=-3).clamp(min=0)
    raise ValueError(f"parameter positive_part={positive_part!r}: choose one of {GAE_POSITIVE_PART_RULES}")


def gae_relevance(attentions: Sequence[torch.Tensor], gradients: Sequence[torch.Tensor],
                  positive_part: str = "per_head") -> torch.Tensor:
    """Relevance matrix of Chefer et al. 2021 (generic attention explainability), encoder-only rule.

    R = I; for each layer first to last: R = R + Abar_l @ R, with Abar_l from
    `gradient_weighted_attention`. Returns `[..., T, T]`.
    """
    if len(attentions) == 0 or len(attentions) != len(gradients):
        raise ValueError(f"gae_relevance needs one gradient per attention layer and at least one layer; got "
                         f"{len(attentions)} attentions and {len(gradients)} gradients")
    relevance = None
    for attention, gradient in zip(attentions, gradients):
        weighted = gradient_weighted_attention(attention, gradient, positive_part)
        if relevance is None:
            identity = torch.eye(weighted.shape[-1], dtype=weighted.dtype, device=weighted.device)
            relevance = identity.expand_as(weighted)
        relevance = relevance + weighted @ relevance
    return relevance


def gae_scores(attentions: Sequence[torch.Tensor], gradients: Sequence[torch.Tensor],
               positive_part: str = "per_head") -> torch.Tensor:
    """The [CLS] row of the GAE relevance matrix: `[..., T]`."""
    return cls_row(gae_relevance(attentions, gradients, positive_part))


def attcat_scores(hidden_states: Sequence[torch.Tensor], hidden_gradients: Sequence[torch.Tensor],
                  attentions: Sequence[torch.Tensor]) -> torch.Tensor:
    """AttCAT (Qiang et al. 2022): sum over layers l of (sum_features grad_l * h_l) * mean-head A_l[CLS -> token].

    `hidden_states[l]` is layer l's output `[..., T, D]`, `hidden_gradients[l]` the target logit's gradient
    w.r.t. it, `attentions[l]` that layer's attention `[..., H, T, T]`. Returns `[..., T]`; signed.
    """
    if not (len(hidden_states) == len(hidden_gradients) == len(attentions)) or len(attentions) == 0:
        raise ValueError(f"attcat_scores needs the same number (>= 1) of hidden states, gradients and attentions; "
                         f"got {len(hidden_states)}, {len(hidden_gradients)}, {len(attentions)}")
    total = None
    for layer, (hidden, gradient, attention) in enumerate(zip(hidden_states, hidden_gradients, attentions)):
        if hidden.shape != gradient.shape:
            raise ValueError(f"layer {layer}: hidden state shape {tuple(hidden.shape)} differs from its gradient's "
                             f"{tuple(gradient.shape)}")
        class_activation = (gradient * hidden).sum(dim=-1)
        term = class_activation * raw_attention_scores(attention)
        total = term if total is None else total + term
    return total


def attention_x_gradient_scores(attention: torch.Tensor, gradient: torch.Tensor) -> torch.Tensor:
    """[CLS] row of (A * grad(A))^+ averaged over heads, for one layer: `[..., H, T, T]` -> `[..., T]`."""
    _check_attention_shape(attention)
    if gradient.shape != attention.shape:
        raise ValueError(f"gradient shape {tuple(gradient.shape)} differs from attention shape "
                         f"{tuple(attention.shape)}")
    cls_product = attention[..., CLS_POSITION, :] * gradient[..., CLS_POSITION, :]  # [..., H, T]
    return cls_product.clamp(min=0).mean(dim=-2)


# ----------------------------------------------------------------------------------------------------
# Running the classifier
# ----------------------------------------------------------------------------------------------------

@dataclass
class AttentionPass:
    """One forward (and optionally backward) pass of a classifier on a batch, tensors in float32."""

    attentions: list[torch.Tensor]  # per layer [B, H, T, T]
    attention_gradients: list[torch.Tensor] | None  # per layer [B, H, T, T], d(target logit)/dA
    hidden_states: list[torch.Tensor] | None  # per layer output [B, T, D] (embeddings excluded)
    hidden_gradients: list[torch.Tensor] | None  # per layer [B, T, D], d(target logit)/dh


def resolve_layer(layer: int, num_layers: int) -> int:
    """A (possibly negative) `layer` setting as an index in 0..num_layers-1, or a clear error."""
    if not -num_layers <= layer < num_layers:
        raise ValueError(f"parameter layer={layer} is out of range for a model with {num_layers} layers "
                         f"(use {-num_layers}..{num_layers - 1}; -1 is the last layer)")
    return layer % num_layers


def _check_layer_setting(layer: int) -> int:
    if isinstance(layer, bool) or not isinstance(layer, int):
        raise TypeError(f"parameter layer must be an int (-1 = last layer); got {layer!r}")
    return layer


def _check_batch(batch: Batch) -> None:
    if batch.input_ids.ndim != 2:
        raise ValueError(f"batch.input_ids must be [B, T]; got shape {tuple(batch.input_ids.shape)}")
    if batch.attention_mask.shape != batch.input_ids.shape:
        raise ValueError(f"batch.attention_mask shape {tuple(batch.attention_mask.shape)} differs from "
                         f"batch.input_ids shape {tuple(batch.input_ids.shape)}")
    if batch.target.shape != (batch.input_ids.shape[0],):
        raise ValueError(f"batch.target must be [B] = [{batch.input_ids.shape[0]}]; got shape "
                         f"{tuple(batch.target.shape)}")


def _make_embeddings_require_grad(module: torch.nn.Module, inputs, output: torch.Tensor) -> torch.Tensor:
    # With frozen weights nothing downstream of the embeddings would require grad; this keeps the graph.
    return output if output.requires_grad else output.requires_grad_(True)


def run_with_attentions(model: torch.nn.Module, batch: Batch, gradients: bool = False,
                        hidden_states: bool = False) -> AttentionPass:
    """Run the classifier once on the batch, returning its attentions (and, if asked, hidden states and the
    gradients of each row's `batch.target` logit w.r.t. both). Needs an eager-attention model."""
    _check_batch(batch)
    device = next(model.parameters()).device
    input_ids = batch.input_ids.to(device)
    attention_mask = batch.attention_mask.to(device)
    target = batch.target.to(device)
    with eval_mode(model), torch.set_grad_enabled(gradients):
        hook = model.get_input_embeddings().register_forward_hook(_make_embeddings_require_grad) if gradients else None
        try:
            output = model(input_ids=input_ids, attention_mask=attention_mask, output_attentions=True,
                           output_hidden_states=hidden_states)
        finally:
            if hook is not None:
                hook.remove()
        attentions = list(output.attentions or ())
        if not attentions or any(a is None for a in attentions):
            raise ValueError(no_attentions_message(model, attention_methods()))
        num_labels = output.logits.shape[-1]
        if ((target < 0) | (target >= num_labels)).any():
            raise ValueError(f"batch.target holds {target.tolist()}, outside 0..{num_labels - 1} "
                             f"for a {num_labels}-class model")
        # Per-layer outputs only; hidden_states[0] is the embedding output.
        layer_outputs = list(output.hidden_states[1:]) if hidden_states else None
        attention_gradients = hidden_gradients = None
        if gradients:
            target_logit_sum = output.logits.gather(1, target[:, None]).sum()
            wrt = attentions + (layer_outputs or [])
            # autograd.grad, not backward(): the model's parameter .grad stay untouched. It also fails loudly
            # if a returned attention were not on the path to the logits (e.g. a copy).
            grads = torch.autograd.grad(target_logit_sum, wrt)
            attention_gradients = [g.detach().float() for g in grads[:len(attentions)]]
            if hidden_states:
                hidden_gradients = [g.detach().float() for g in grads[len(attentions):]]
    return AttentionPass(
        attentions=[a.detach().float() for a in attentions],
        attention_gradients=attention_gradients,
        hidden_states=[h.detach().float() for h in layer_outputs] if layer_outputs is not None else None,
        hidden_gradients=hidden_gradients,
    )


def _attribution(scores: torch.Tensor, batch: Batch, model_calls: int) -> Attribution:
    return Attribution(scores=scores.to(batch.input_ids.device), model_calls=model_calls)


# ----------------------------------------------------------------------------------------------------
# Explainers
# ----------------------------------------------------------------------------------------------------

class _AttentionMethod(AttributionMethod):
    """What every method of the family shares: it reads attention probabilities (needs eager attention)."""

    family = FAMILY
    needs_attentions = True


class _LayerAttentionMethod(_AttentionMethod):
    """A method that reads one layer (or the layers up to it); `layer` -1 is the last."""

    def __init__(self, layer: int = -1):
        self.layer = _check_layer_setting(layer)


@register("raw_attention")
class RawAttention(_LayerAttentionMethod):
    """Attention from [CLS] to each token in one layer (default last), mean over heads. Forward only."""

    def explain(self, model: torch.nn.Module, batch: Batch) -> Attribution:
        run = run_with_attentions(model, batch)
        layer = resolve_layer(self.layer, len(run.attentions))
        return _attribution(raw_attention_scores(run.attentions[layer]), batch, FORWARD_ONLY_CALLS)


@register("attention_rollout")
class AttentionRollout(_LayerAttentionMethod):
    """[CLS] row of the attention rollout through layers 0..`layer` (default: all layers). Forward only."""

    def explain(self, model: torch.nn.Module, batch: Batch) -> Attribution:
        run = run_with_attentions(model, batch)
        last = resolve_layer(self.layer, len(run.attentions))
        return _attribution(rollout_scores(run.attentions[:last + 1]), batch, FORWARD_ONLY_CALLS)


@register("gae")
class GenericAttentionExplainability(_AttentionMethod):
    """Chefer et al. 2021 relevance over all layers, [CLS] row. One forward and one backward pass."""

    def __init__(self, positive_part: str = "per_head"):
        if positive_part not in GAE_POSITIVE_PART_RULES:
            raise ValueError(f"parameter positive_part={positive_part!r}: choose one of {GAE_POSITIVE_PART_RULES}")
        self.positive_part = positive_part

    def explain(self, model: torch.nn.Module, batch: Batch) -> Attribution:
        run = run_with_attentions(model, batch, gradients=True)
        scores = gae_scores(run.attentions, run.attention_gradients, self.positive_part)
        return _attribution(scores, batch, FORWARD_BACKWARD_CALLS)


@register("attcat")
class AttCAT(_AttentionMethod):
    """Qiang et al. 2022 attentive class activation tokens, summed over all layers. Forward + backward."""

    signed = True

    def explain(self, model: torch.nn.Module, batch: Batch) -> Attribution:
        run = run_with_attentions(model, batch, gradients=True, hidden_states=True)
        if len(run.hidden_states) != len(run.attentions):
            raise ValueError(f"the model returned {len(run.hidden_states)} layer outputs but "
                             f"{len(run.attentions)} attention layers; AttCAT needs one of each per layer")
        scores = attcat_scores(run.hidden_states, run.hidden_gradients, run.attentions)
        return _attribution(scores, batch, FORWARD_BACKWARD_CALLS)


@register("attention_x_gradient")
class AttentionTimesGradient(_LayerAttentionMethod):
    """[CLS] attention times its gradient in one layer (default last), positive part, mean over heads."""

    def explain(self, model: torch.nn.Module, batch: Batch) -> Attribution:
        run = run_with_attentions(model, batch, gradients=True)
        layer = resolve_layer(self.layer, len(run.attentions))
        scores = attention_x_gradient_scores(run.attentions[layer], run.attention_gradients[layer])
        return _attribution(scores, batch, FORWARD_BACKWARD_CALLS)
