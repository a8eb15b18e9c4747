"""What each family of explainers explains: the class it is given (`Batch.target`), or that class's margin over a
contrast (foil) class (`Batch.contrast`).

Without a contrast, a method explains the target class (the predicted one when `Batch.target` is None). With a
contrast c' for a target c (one per row), it explains the margin of c over c':

- every method that differentiates (the pass engine `core/models/model_pass.py`, so GAE, AttCAT, attention x
  gradient, Grad-CAM, saliency, input x gradient and the ExpNet+ gradient signals; and Integrated Gradients,
  whose completeness then holds for the margin): logit[c] - logit[c'] (`explained_logit`);
- the perturbation methods (occlusion, LIME, KernelSHAP): p[c] - p[c'], the difference of the two softmax
  probabilities (`explained_probability`).

Logits for the gradients (a probability's gradient saturates), probabilities for the perturbations (what a removed
token changes in the classifier's decision). Both are linear in the two classes' quantities, so a method that is
linear in them (input x gradient, AttCAT, Integrated Gradients, occlusion, and LIME and KernelSHAP for a fixed
seed) gives the target's scores minus the contrast's. A contrast needs a target, differs from it in every row, and
both are classes of the model (`check_batch`, `check_classes`).

Without a contrast each value is computed by the same operations as before contrasts existed, so every score is
the same to the last bit. The logit margin is defined with the engine, in `core/models`, which the explainers read
and which cannot read them; it is re-exported here so that both definitions are found in one place.
"""
from __future__ import annotations

import torch

from learned_attribution.core.models.model_pass import check_batch, check_classes, explained_logit

__all__ = ["check_batch", "check_classes", "explained_logit", "explained_probability"]


def explained_probability(logits: torch.Tensor, target: int, contrast: int | None = None) -> torch.Tensor:
    """[k] what a perturbation method watches per row of `logits` [k, C]: the softmax probability of `target`, or
    with a `contrast`, p[target] - p[contrast]. A class outside 0..C-1 is refused (as `check_classes` does)."""
    num_labels = logits.shape[-1]
    for name, index in (("target", target), ("contrast", contrast)):
        if index is not None and not 0 <= index < num_labels:
            raise ValueError(f"batch.{name} holds {index}, outside 0..{num_labels - 1} for a {num_labels}-class model")
    probabilities = torch.softmax(logits.float(), dim=-1)
    if contrast is None:
        return probabilities[:, target]
    return probabilities[:, target] - probabilities[:, contrast]
