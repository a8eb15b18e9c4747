"""Perturbation-family baselines (SPEC §8): Occlusion, LIME and KernelSHAP, all via captum.

A "removed" token is replaced by `batch.mask_token_id`. Every method watches the softmax probability of
`batch.target`, or with `batch.contrast` the difference p[target] - p[contrast] (`objective.py`). Examples are
explained one at a time, on their real tokens only (padding is cut off, so it can neither be perturbed nor leak
into the scores), and captum only ever sees the example's *content* tokens (real, non-special): the forward
function puts them back between the special tokens before calling the classifier, so [CLS]/[SEP] are never
perturbed and are not features of the surrogate models. Perturbed copies go through the classifier `batch_size` at
a time.

LIME follows the `lime` package's text explainer: the original plus samples with a uniformly drawn
number (1..n) of tokens removed, exponential kernel on 100 x cosine distance with width 25, and a
weighted ridge surrogate (alpha 1). KernelSHAP is captum's (Shapley-kernel sampling, linear regression,
the all-kept and all-removed samples pinned by a very large weight). Both are seeded per example with
`seed`, so scores do not depend on which other examples share the batch, and the global torch RNG is
left as it was.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterator

import torch
from captum._utils.models.linear_model import SkLearnRidge
from captum.attr import FeatureAblation, KernelShap, Lime

from .base import Attribution, Batch, AttributionMethod, register
from learned_attribution.core.models.runner import eval_mode

from .gradient import require_positive_int
from .objective import check_batch, explained_probability


@dataclass
class ContentView:
    """One example cut to its real tokens; `content` indexes the non-special ones within `real_ids`."""

    real_ids: torch.Tensor  # [L] ids of the real (non-padding) tokens
    content: torch.Tensor  # [n] positions within real_ids that may be perturbed
    positions: torch.Tensor  # [n] the same positions within the padded row


def content_view(batch: Batch, row: int) -> ContentView:
    """The perturbable tokens of example `row`: real (attention mask 1) and not special."""
    real_positions = batch.attention_mask[row].bool().nonzero().squeeze(1)
    real_special = batch.special_mask[row, real_positions]
    return ContentView(real_ids=batch.input_ids[row, real_positions],
                       content=(~real_special).nonzero().squeeze(1),
                       positions=real_positions[~real_special])


def target_probability_of_content(model: torch.nn.Module, view: ContentView, target: int,
                                  contrast: int | None = None) -> Callable[[torch.Tensor], torch.Tensor]:
    """`content_ids [k, n] -> [k]`: target-class probability (with `contrast`: minus the contrast's,
    `explained_probability`) with the content tokens put back in place."""

    def forward(content_ids: torch.Tensor) -> torch.Tensor:
        input_ids = view.real_ids.expand(content_ids.shape[0], -1).clone()
        input_ids[:, view.content] = content_ids
        with torch.no_grad():
            logits = model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids)).logits
        return explained_probability(logits, target, contrast)

    return forward


def lime_text_kernel(kernel_width: float) -> Callable[..., float]:
    """LIME text's sample weight: sqrt(exp(-d^2 / width^2)), d = 100 x cosine distance to all-kept."""

    def similarity(_original, _perturbed, interpretable_sample: torch.Tensor, **_kwargs) -> float:
        kept = interpretable_sample.float().flatten()
        cosine = kept.sum() / (math.sqrt(kept.numel()) * kept.norm()) if kept.sum() > 0 else kept.sum()
        distance = 100.0 * (1.0 - float(cosine))
        return math.sqrt(math.exp(-(distance ** 2) / kernel_width ** 2))

    return similarity


def lime_text_samples(original: torch.Tensor, num_interp_features: int, **_kwargs) -> Iterator[torch.Tensor]:
    """LIME text's sampler: the original first, then a uniform number (1..n) of random tokens removed.

    Drawn from the (seeded) CPU generator, then moved to the input's device.
    """
    yield torch.ones(1, num_interp_features, dtype=torch.long, device=original.device)
    while True:
        n_removed = int(torch.randint(1, num_interp_features + 1, ()).item())
        removed = torch.randperm(num_interp_features)[:n_removed]
        sample = torch.ones(1, num_interp_features, dtype=torch.long)
        sample[0, removed] = 0
        yield sample.to(original.device)


class _PerturbationMethod(AttributionMethod):
    """Shared loop: explain each example on its content tokens and scatter the scores back."""

    family = "perturbation"
    signed = True

    def explain_content(self, forward: Callable[[torch.Tensor], torch.Tensor], content_ids: torch.Tensor,
                        mask_token_id: int) -> tuple[torch.Tensor, int]:
        """Scores [n] for the content tokens [1, n] of one example, and the classifier rows spent on it."""
        raise NotImplementedError

    def explain(self, model: torch.nn.Module, batch: Batch) -> Attribution:
        check_batch(batch)  # the classes' range is checked on the first forward pass (`explained_probability`)
        scores = torch.zeros(batch.input_ids.shape, dtype=torch.float32, device=batch.input_ids.device)
        rows_spent = 0
        with eval_mode(model):
            for row in range(batch.input_ids.shape[0]):
                view = content_view(batch, row)
                if view.content.numel() == 0:
                    continue
                contrast = None if batch.contrast is None else int(batch.contrast[row])
                forward = target_probability_of_content(model, view, int(batch.target[row]), contrast)
                content_scores, calls = self.explain_content(forward, view.real_ids[view.content][None],
                                                             batch.mask_token_id)
                scores[row, view.positions] = content_scores.float().to(scores.device)
                rows_spent += calls
        return Attribution(scores=scores, model_calls=round(rows_spent / max(1, batch.input_ids.shape[0])))


@register("occlusion")
@dataclass
class Occlusion(_PerturbationMethod):
    """Drop in target probability when one token is replaced by the mask token (captum FeatureAblation)."""

    batch_size: int = 64

    def __post_init__(self) -> None:
        require_positive_int(self.batch_size, "batch_size")

    def explain_content(self, forward, content_ids, mask_token_id):
        drops = FeatureAblation(forward).attribute(content_ids, baselines=mask_token_id,
                                                   perturbations_per_eval=self.batch_size)
        return drops[0], content_ids.shape[1] + 1


@dataclass
class _SampledSurrogate(_PerturbationMethod):
    """Settings shared by LIME and KernelSHAP."""

    n_samples: int = 500
    batch_size: int = 64
    seed: int = 0

    def __post_init__(self) -> None:
        require_positive_int(self.n_samples, "n_samples")
        require_positive_int(self.batch_size, "batch_size")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValueError(f"explainer setting seed={self.seed!r}: must be an integer")

    def surrogate(self, forward: Callable[[torch.Tensor], torch.Tensor]) -> Lime:
        raise NotImplementedError

    def explain_content(self, forward, content_ids, mask_token_id):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            coefficients = self.surrogate(forward).attribute(
                content_ids, baselines=mask_token_id, n_samples=self.n_samples,
                perturbations_per_eval=self.batch_size)
        return coefficients[0], self.n_samples


@register("lime")
@dataclass
class LimeTokens(_SampledSurrogate):
    """LIME over token-masking samples (see module docstring); score = the ridge coefficient."""

    kernel_width: float = 25.0
    ridge_alpha: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.kernel_width > 0:
            raise ValueError(f"explainer setting kernel_width={self.kernel_width!r}: must be positive")

    def surrogate(self, forward):
        return Lime(forward, interpretable_model=SkLearnRidge(alpha=self.ridge_alpha),
                    similarity_func=lime_text_kernel(self.kernel_width), perturb_func=lime_text_samples)


@register("kernel_shap")
@dataclass
class KernelShapTokens(_SampledSurrogate):
    """KernelSHAP over token-masking samples (captum KernelShap); score = the token's Shapley estimate."""

    def explain_content(self, forward, content_ids, mask_token_id):
        if content_ids.shape[1] == 1:
            # One player: its Shapley value is exactly f(all kept) - f(all removed); captum's size
            # distribution is undefined for a single feature.
            both = torch.cat([content_ids, torch.full_like(content_ids, mask_token_id)])
            kept, removed = forward(both)
            return (kept - removed)[None], 2
        return super().explain_content(forward, content_ids, mask_token_id)

    def surrogate(self, forward):
        return KernelShap(forward)
