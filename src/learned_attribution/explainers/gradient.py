"""Gradient-family baselines (SPEC §8): Saliency, Input x Gradient, Integrated Gradients, Grad-CAM.

Saliency, Input x Gradient and Integrated Gradients use captum's layer attributions on the classifier's
word-embedding layer (`model.get_input_embeddings()`), so the "input embedding" of a token is the output
of that layer, before position/segment embeddings and LayerNorm are added. All of them explain the
target-class *logit* (gradients of a softmax probability saturate). Grad-CAM on tokens has no captum
equivalent (captum's LayerGradCam averages gradients over the hidden dimension, i.e. per token, which is
not Grad-CAM's per-feature weighting), so it is written here.

Every score at a padding position is set to 0; padding never changes the scores of real tokens because
padded keys receive zero attention.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import torch
from captum.attr import LayerGradientXActivation, LayerIntegratedGradients

from learned_attribution.models.runner import eval_mode

from .base import Attribution, Batch, Explainer, register


def logits_function(model: torch.nn.Module) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """`(input_ids, attention_mask) -> logits [B, C]`: the forward function captum differentiates."""

    def forward(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return model(input_ids=input_ids, attention_mask=attention_mask).logits

    return forward


def zero_padding(scores: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Scores with every padding position set to 0 (float32, detached)."""
    return (scores.detach().float() * attention_mask.to(scores.device).bool()).float()


def pad_baseline_ids(batch: Batch) -> torch.Tensor:
    """Integrated Gradients' baseline: [PAD] at every real non-special token, [CLS]/[SEP]/padding kept."""
    return torch.where(batch.special_mask, batch.input_ids, torch.full_like(batch.input_ids, batch.pad_token_id))


def require_positive_int(value: object, parameter: str) -> None:
    """Raise a ValueError naming the explainer setting `parameter` unless `value` is an int >= 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"explainer setting {parameter}={value!r}: must be a positive integer")


def embedding_gradients(model: torch.nn.Module, batch: Batch, multiply_by_inputs: bool) -> torch.Tensor:
    """[B, T, H]: d logit[target] / d word-embedding output, times that output when `multiply_by_inputs`."""
    method = LayerGradientXActivation(logits_function(model), model.get_input_embeddings(),
                                      multiply_by_inputs=multiply_by_inputs)
    with eval_mode(model), torch.enable_grad():
        return method.attribute(batch.input_ids, target=batch.target,
                                additional_forward_args=(batch.attention_mask,))


@register("saliency")
@dataclass
class Saliency(Explainer):
    """L2 norm over the hidden dimension of the target logit's gradient w.r.t. each token's input embedding."""

    family = "gradient"

    def explain(self, model: torch.nn.Module, batch: Batch) -> Attribution:
        gradients = embedding_gradients(model, batch, multiply_by_inputs=False)
        return Attribution(scores=zero_padding(gradients.norm(dim=-1), batch.attention_mask), model_calls=1)


@register("input_x_gradient")
@dataclass
class InputXGradient(Explainer):
    """Dot product of the target logit's gradient and the token's input embedding (sum over hidden)."""

    family = "gradient"
    signed = True

    def explain(self, model: torch.nn.Module, batch: Batch) -> Attribution:
        products = embedding_gradients(model, batch, multiply_by_inputs=True)
        return Attribution(scores=zero_padding(products.sum(dim=-1), batch.attention_mask), model_calls=1)


@register("integrated_gradients")
@dataclass
class IntegratedGradients(Explainer):
    """captum LayerIntegratedGradients on the word embeddings from the [PAD] baseline, summed over hidden.

    Completeness: a row's scores sum to logit(x) - logit(baseline) of the target class, up to the
    quadrature error that `last_convergence_delta` (per example, from the last call) reports.
    `internal_batch_size` bounds the interpolated sequences per forward pass (None: all at once).
    """

    family = "gradient"
    signed = True
    n_steps: int = 20
    internal_batch_size: Optional[int] = 64
    method: str = "gausslegendre"

    def __post_init__(self) -> None:
        require_positive_int(self.n_steps, "n_steps")
        if self.internal_batch_size is not None:
            require_positive_int(self.internal_batch_size, "internal_batch_size")
        self.last_convergence_delta: Optional[torch.Tensor] = None

    def explain(self, model: torch.nn.Module, batch: Batch) -> Attribution:
        method = LayerIntegratedGradients(logits_function(model), model.get_input_embeddings())
        with eval_mode(model), torch.enable_grad():
            attributions, delta = method.attribute(
                batch.input_ids, baselines=pad_baseline_ids(batch), target=batch.target,
                additional_forward_args=(batch.attention_mask,), n_steps=self.n_steps, method=self.method,
                internal_batch_size=self.internal_batch_size, return_convergence_delta=True)
        self.last_convergence_delta = delta.detach()
        # n_steps forward+backward passes on the path, plus captum's forward passes at the two
        # endpoints for the layer values and again for the convergence delta.
        return Attribution(scores=zero_padding(attributions.sum(dim=-1), batch.attention_mask),
                           model_calls=self.n_steps + 4)


def last_layer_gradcam(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
    """[B, T] Grad-CAM on tokens at the last encoder layer.

    With h the last layer's hidden states and g = d logit[target] / d h, the weight of feature f is the
    mean of g over the example's real tokens (padding excluded, so padding cannot dilute it), and
    score_j = ReLU(sum_f weight_f * h_jf).
    """
    with eval_mode(model), torch.enable_grad():
        output = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_hidden_states=True)
        hidden = output.hidden_states[-1]
        target_logit = output.logits.gather(1, batch.target[:, None]).sum()
        (gradients,) = torch.autograd.grad(target_logit, hidden)
    real = batch.attention_mask.to(hidden.dtype)[:, :, None]
    weights = (gradients * real).sum(dim=1) / real.sum(dim=1).clamp(min=1)
    return torch.relu((hidden.detach() * weights[:, None, :]).sum(dim=-1))


@register("grad_cam")
@dataclass
class GradCam(Explainer):
    """Grad-CAM applied to tokens at the last encoder layer (see `last_layer_gradcam`)."""

    family = "gradient"

    def explain(self, model: torch.nn.Module, batch: Batch) -> Attribution:
        return Attribution(scores=zero_padding(last_layer_gradcam(model, batch), batch.attention_mask),
                           model_calls=1)
