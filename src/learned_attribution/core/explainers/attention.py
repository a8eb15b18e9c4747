"""The attention family of baseline explainers (SPEC §8): raw attention, rollout, GAE, AttCAT, attention x gradient.

Each method is a small pure function on attention (and gradient / hidden-state) tensors, testable on
hand-made matrices, plus a thin `AttributionMethod` class that runs the classifier and calls it.

Conventions shared by every function here:
- an attention tensor is `[..., H, T, T]` (heads on axis -3), rows are queries, columns are keys, each
  row sums to 1; the model gives `[B, H, T, T]` per layer;
- [CLS] sits at position 0 (`CLS_POSITION`), as in every family of `core/models/architectures.py`;
- gradients are of the target-class logit (not its probability), as in Chefer et al. and Qiang et al.; with
  `batch.contrast`, of its margin over the contrast class (`objective.py`);
- raw attention and rollout read no gradient: they cannot depend on the class (`class_agnostic`).

Padding never leaks into real tokens: the attention mask gives padding keys probability 0, so the
[CLS] row of every method below is exactly 0 at padded positions and does not depend on how much
padding a batch adds (tested). Scores at special and padding positions are returned; callers mask them.

`Attribution.model_calls`, per example: 1 for every method here (one forward pass; GAE, AttCAT and
attention x gradient also run its backward pass, which base.Attribution does not count separately).
Every method here is a `passes.PassMethod`: explained together, they (and the gradient baselines that read one
pass) share one forward and one backward pass per batch.
"""
from __future__ import annotations

from typing import Sequence

import torch

from learned_attribution.core.models.model_pass import (ATTENTION_GRADIENTS, ATTENTIONS, HIDDEN_GRADIENTS, HIDDEN_STATES,
                                                    ModelPass)

from .base import Batch, register
from .passes import PassMethod

CLS_POSITION = 0
FAMILY = "attention"
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
# Explainers (each reads one pass of the classifier: `passes.PassMethod`)
# ----------------------------------------------------------------------------------------------------

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


class _AttentionMethod(PassMethod):
    """What every method of the family shares: it reads attention probabilities (needs eager attention)."""

    family = FAMILY
    needs_attentions = True
    needs = frozenset({ATTENTIONS})


class _LayerAttentionMethod(_AttentionMethod):
    """A method that reads one layer (or the layers up to it); `layer` -1 is the last."""

    def __init__(self, layer: int = -1):
        self.layer = _check_layer_setting(layer)


@register("raw_attention")
class RawAttention(_LayerAttentionMethod):
    """Attention from [CLS] to each token in one layer (default last), mean over heads. Forward only.
    Class-agnostic: the same map for every target and contrast."""

    class_agnostic = True

    def scores_from(self, run: ModelPass, batch: Batch) -> torch.Tensor:
        return raw_attention_scores(run.attentions[resolve_layer(self.layer, len(run.attentions))])


@register("attention_rollout")
class AttentionRollout(_LayerAttentionMethod):
    """[CLS] row of the attention rollout through layers 0..`layer` (default: all layers). Forward only.
    Class-agnostic: the same map for every target and contrast."""

    class_agnostic = True

    def scores_from(self, run: ModelPass, batch: Batch) -> torch.Tensor:
        last = resolve_layer(self.layer, len(run.attentions))
        return rollout_scores(run.attentions[:last + 1])


@register("gae")
class GenericAttentionExplainability(_AttentionMethod):
    """Chefer et al. 2021 relevance over all layers, [CLS] row. One forward and one backward pass."""

    needs = frozenset({ATTENTIONS, ATTENTION_GRADIENTS})

    def __init__(self, positive_part: str = "per_head"):
        if positive_part not in GAE_POSITIVE_PART_RULES:
            raise ValueError(f"parameter positive_part={positive_part!r}: choose one of {GAE_POSITIVE_PART_RULES}")
        self.positive_part = positive_part

    def scores_from(self, run: ModelPass, batch: Batch) -> torch.Tensor:
        return gae_scores(run.attentions, run.attention_gradients, self.positive_part)


@register("attcat")
class AttCAT(_AttentionMethod):
    """Qiang et al. 2022 attentive class activation tokens, summed over all layers. Forward + backward."""

    signed = True
    needs = frozenset({ATTENTIONS, HIDDEN_STATES, HIDDEN_GRADIENTS})

    def scores_from(self, run: ModelPass, batch: Batch) -> torch.Tensor:
        outputs = run.layer_outputs()
        if len(outputs) != len(run.attentions):
            raise ValueError(f"the model returned {len(outputs)} layer outputs but "
                             f"{len(run.attentions)} attention layers; AttCAT needs one of each per layer")
        return attcat_scores(outputs, run.hidden_gradients, run.attentions)


@register("attention_x_gradient")
class AttentionTimesGradient(_LayerAttentionMethod):
    """[CLS] attention times its gradient in one layer (default last), positive part, mean over heads."""

    needs = frozenset({ATTENTIONS, ATTENTION_GRADIENTS})

    def scores_from(self, run: ModelPass, batch: Batch) -> torch.Tensor:
        layer = resolve_layer(self.layer, len(run.attentions))
        return attention_x_gradient_scores(run.attentions[layer], run.attention_gradients[layer])
