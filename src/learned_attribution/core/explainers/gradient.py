"""Gradient-family baselines (SPEC §8): Saliency, Input x Gradient, Integrated Gradients, Grad-CAM.

Saliency, Input x Gradient and Integrated Gradients differentiate with respect to the output of the
classifier's word-embedding layer (`model.get_input_embeddings()`), so the "input embedding" of a token is the
output of that layer, before position/segment embeddings and LayerNorm are added: the quantities of captum's
`LayerGradientXActivation` and `LayerIntegratedGradients` on that layer (tested against them). They are
computed here rather than through captum so that a batch costs only what the method needs: one forward and
one backward pass for the gradient methods, and for Integrated Gradients passes that hold the interpolation
steps of texts of one length, unpadded, instead of every step at the batch's longest length. All of them
explain the target-class *logit* (gradients of a softmax probability saturate), or with `batch.contrast` its margin
over the contrast class, logit[target] - logit[contrast] (`objective.py`). Grad-CAM on tokens has no
captum equivalent (captum's LayerGradCam averages gradients over the hidden dimension, i.e. per token, which
is not Grad-CAM's per-feature weighting), so it is written here too. Saliency, Input x Gradient and Grad-CAM are
`passes.PassMethod`s: explained together with the other baselines that read one pass, they share it.

With `batch.target = None` every method here explains the class its own forward pass predicts and returns
that pass's logits (`AttributionMethod.classifies`). Every score at a padding position is set to 0; padding never
changes the scores of real tokens because padded keys receive zero attention.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import torch
from captum.attr._utils.approximation_methods import approximation_parameters

from learned_attribution.core.models.model_pass import (EMBEDDING_GRADIENTS, HIDDEN_GRADIENTS, HIDDEN_STATES, ModelPass,
                                                    WordEmbeddingLeaf)
from learned_attribution.core.models.runner import eval_mode

from .base import Attribution, Batch, AttributionMethod, register
from .objective import check_batch, check_classes, explained_logit
from .passes import PassMethod, zero_padding


def logits_function(model: torch.nn.Module) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """`(input_ids, attention_mask) -> logits [B, C]`: the forward function captum would differentiate."""

    def forward(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return model(input_ids=input_ids, attention_mask=attention_mask).logits

    return forward


def pad_baseline_ids(batch: Batch) -> torch.Tensor:
    """Integrated Gradients' baseline: [PAD] at every real non-special token, [CLS]/[SEP]/padding kept."""
    return torch.where(batch.special_mask, batch.input_ids, torch.full_like(batch.input_ids, batch.pad_token_id))


def require_positive_int(value: object, parameter: str) -> None:
    """Raise a ValueError naming the explainer setting `parameter` unless `value` is an int >= 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"explainer setting {parameter}={value!r}: must be a positive integer")


def target_of(target: torch.Tensor | None, logits: torch.Tensor) -> torch.Tensor:
    """The class to explain per row: `target`, or the predicted class when it is None."""
    return logits.detach().argmax(dim=-1) if target is None else target.to(logits.device)


def target_logit_sum(logits: torch.Tensor, target: torch.Tensor, contrast: torch.Tensor | None = None) -> torch.Tensor:
    """Sum over rows of each row's explained logit (`explained_logit`: the target's, or its margin over `contrast`):
    its gradient gives every row its own (rows never interact)."""
    return explained_logit(logits, target, contrast).sum()


@register("saliency")
@dataclass
class Saliency(PassMethod):
    """L2 norm over the hidden dimension of the target logit's gradient w.r.t. each token's input embedding."""

    family = "gradient"
    needs = frozenset({EMBEDDING_GRADIENTS})

    def scores_from(self, run: ModelPass, batch: Batch) -> torch.Tensor:
        return run.embedding_gradients.norm(dim=-1)


@register("input_x_gradient")
@dataclass
class InputXGradient(PassMethod):
    """Dot product of the target logit's gradient and the token's input embedding (sum over hidden)."""

    family = "gradient"
    signed = True
    needs = frozenset({EMBEDDING_GRADIENTS})

    def scores_from(self, run: ModelPass, batch: Batch) -> torch.Tensor:
        return (run.embedding_gradients * run.word_embeddings).sum(dim=-1)


# ----------------------------------------------------------------------------------------------------
# Integrated Gradients
# ----------------------------------------------------------------------------------------------------

def row_lengths(attention_mask: torch.Tensor) -> list[int]:
    """Per row: the position of its last real token + 1 (its length; right padding follows it)."""
    positions = torch.arange(1, attention_mask.shape[1] + 1, device=attention_mask.device)
    return (positions * (attention_mask != 0)).amax(dim=1).tolist()


def pack_passes(lengths: Sequence[int], n_steps: int, max_rows: int | None,
                mix_lengths: bool) -> list[list[tuple[int, int]]]:
    """The forward passes that cover every (row, step) pair once: lists of pairs, at most `max_rows` each
    (None: no bound), rows taken shortest first and each row's steps together. Unless `mix_lengths`, a pass
    holds rows of one length only, so no pass computes padding."""
    order = sorted(range(len(lengths)), key=lambda row: lengths[row])  # stable: ties keep the batch order
    limit = max_rows or len(lengths) * n_steps
    passes: list[list[tuple[int, int]]] = []
    current: list[tuple[int, int]] = []
    current_length = None
    for row in order:
        if current and not mix_lengths and lengths[row] != current_length:
            passes.append(current)
            current = []
        current_length = lengths[row]
        for step in range(n_steps):
            current.append((row, step))
            if len(current) == limit:
                passes.append(current)
                current = []
    if current:
        passes.append(current)
    return passes


@register("integrated_gradients")
@dataclass
class IntegratedGradients(AttributionMethod):
    """Integrated Gradients on the word embeddings from the [PAD] baseline, summed over hidden; the quantity of
    captum's `LayerIntegratedGradients` on that layer (same quadrature: `method`, `n_steps`).

    Completeness: a row's scores sum to logit(x) - logit(baseline) of the target class (with a contrast: of its
    margin over the contrast, logit[target] - logit[contrast]), up to the quadrature error that
    `last_convergence_delta` (per example, from the last call) reports.
    `internal_batch_size` bounds the interpolated sequences per forward pass (None: no bound). Each text's
    steps run at its own length: a pass holds the steps of texts of one length (`mix_lengths` False), or
    of texts next to each other in length order, padded to the longest of them (True). None (default):
    one length per pass on the CPU, where a pass costs in proportion to the tokens it holds, so padding is
    pure waste; mixed elsewhere (GPUs), where few full passes beat many small ones.
    """

    family = "gradient"
    signed = True
    classifies = True
    n_steps: int = 20
    internal_batch_size: Optional[int] = 64
    method: str = "gausslegendre"
    mix_lengths: Optional[bool] = None

    def __post_init__(self) -> None:
        require_positive_int(self.n_steps, "n_steps")
        if self.internal_batch_size is not None:
            require_positive_int(self.internal_batch_size, "internal_batch_size")
        if self.mix_lengths is not None and not isinstance(self.mix_lengths, bool):
            raise ValueError(f"explainer setting mix_lengths={self.mix_lengths!r}: must be true, false or null")
        approximation_parameters(self.method)  # an unknown method fails here, not on the first batch
        self.last_convergence_delta: Optional[torch.Tensor] = None

    def explain(self, model: torch.nn.Module, batch: Batch) -> Attribution:
        check_batch(batch)
        lengths = row_lengths(batch.attention_mask)
        mix = batch.input_ids.device.type != "cpu" if self.mix_lengths is None else self.mix_lengths
        with eval_mode(model):
            embedding = model.get_input_embeddings()
            with torch.no_grad():
                inputs, baselines = embedding(batch.input_ids), embedding(pad_baseline_ids(batch))
            logits, endpoint_difference, target = self._endpoints(model, batch, inputs, baselines, lengths, mix)
            total_gradients = self._path_gradients(model, batch, inputs, baselines, target, lengths, mix)
        attributions = total_gradients * (inputs - baselines).float()
        self.last_convergence_delta = attributions.sum(dim=(1, 2)) - endpoint_difference
        # n_steps forward+backward passes on the path, and one forward pass at each end (the explained logit
        # at the input and at the baseline, for the convergence delta and, without a target, the class).
        return Attribution(scores=zero_padding(attributions.sum(dim=-1), batch.attention_mask),
                           model_calls=self.n_steps + 2, logits=logits)

    def _endpoints(self, model: torch.nn.Module, batch: Batch, inputs: torch.Tensor, baselines: torch.Tensor,
                   lengths: list[int], mix: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(logits at the inputs [B, C], the explained logit (`explained_logit`) at the input minus at the baseline
        [B], target [B]): forward passes over the inputs and baselines, packed like the path steps. The baseline is
        the path's start, the [PAD] word embeddings fed in place of the text's (as every step is), never the [PAD]
        ids themselves: RoBERTa, XLM-R and MPNet derive position ids from the ids, so [PAD] ids would also move
        every position."""
        ends: dict[tuple[int, int], torch.Tensor] = {}
        with torch.no_grad():
            for rows in pack_passes(lengths, 2, self.internal_batch_size, mix):
                width = max(lengths[row] for row, _ in rows)
                index = torch.as_tensor([row for row, _ in rows], device=batch.input_ids.device)
                at_baseline = torch.as_tensor([end == 1 for _, end in rows], device=batch.input_ids.device)
                embedded = torch.where(at_baseline[:, None, None], baselines[index, :width], inputs[index, :width])
                with WordEmbeddingLeaf(model, embedded):
                    out = model(input_ids=batch.input_ids[index, :width],
                                attention_mask=batch.attention_mask[index, :width]).logits.float()
                ends.update(zip(rows, out))
        logits = torch.stack([ends[(row, 0)] for row in range(len(lengths))])
        check_classes(batch, logits.shape[-1])
        target = target_of(batch.target, logits)
        baseline_logits = torch.stack([ends[(row, 1)] for row in range(len(lengths))])
        difference = explained_logit(logits, target, batch.contrast) - explained_logit(baseline_logits, target,
                                                                                       batch.contrast)
        return logits, difference[:, 0], target

    def _path_gradients(self, model: torch.nn.Module, batch: Batch, inputs: torch.Tensor, baselines: torch.Tensor,
                        target: torch.Tensor, lengths: list[int], mix: bool) -> torch.Tensor:
        """[B, T, H]: the quadrature-weighted sum over the path's steps of d explained logit / d embeddings."""
        device = inputs.device
        step_sizes_of, alphas_of = approximation_parameters(self.method)
        alphas = torch.as_tensor(alphas_of(self.n_steps), dtype=inputs.dtype, device=device)
        step_sizes = torch.as_tensor(step_sizes_of(self.n_steps), dtype=torch.float32, device=device)
        total = torch.zeros(inputs.shape, dtype=torch.float32, device=device)
        contrast = None if batch.contrast is None else batch.contrast.to(device)
        for rows in pack_passes(lengths, self.n_steps, self.internal_batch_size, mix):
            width = max(lengths[row] for row, _ in rows)
            index = torch.as_tensor([row for row, _ in rows], device=device)
            steps = torch.as_tensor([step for _, step in rows], device=device)
            start, end = baselines[index, :width], inputs[index, :width]
            scaled = start + alphas[steps, None, None] * (end - start)
            with torch.enable_grad(), WordEmbeddingLeaf(model, scaled) as tap:
                logits = model(input_ids=batch.input_ids[index, :width],
                               attention_mask=batch.attention_mask[index, :width]).logits
                explained = target_logit_sum(logits, target[index], None if contrast is None else contrast[index])
                (gradients,) = torch.autograd.grad(explained, tap.leaf)
            total[:, :width].index_add_(0, index, gradients.float() * step_sizes[steps, None, None])
        return total


# ----------------------------------------------------------------------------------------------------
# Grad-CAM
# ----------------------------------------------------------------------------------------------------

def gradcam_scores(hidden: torch.Tensor, gradients: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """[B, T] Grad-CAM on tokens from one layer's hidden states h [B, T, D] and g = d explained logit / d h: the weight
    of feature f is the mean of g over the example's real tokens (padding excluded, so padding cannot dilute it),
    and score_j = ReLU(sum_f weight_f * h_jf)."""
    real = attention_mask.to(hidden.device, hidden.dtype)[:, :, None]
    weights = (gradients * real).sum(dim=1) / real.sum(dim=1).clamp(min=1)
    return torch.relu((hidden * weights[:, None, :]).sum(dim=-1))


@register("grad_cam")
@dataclass
class GradCam(PassMethod):
    """Grad-CAM applied to tokens at the last encoder layer (see `gradcam_scores`)."""

    family = "gradient"
    needs = frozenset({HIDDEN_STATES, HIDDEN_GRADIENTS})

    def scores_from(self, run: ModelPass, batch: Batch) -> torch.Tensor:
        return gradcam_scores(run.hidden_states[-1], run.hidden_gradients[-1], batch.attention_mask)
