"""One interface for every token attribution method, and the registry that picks them by name.

An explainer takes a sequence classifier (a Hugging Face encoder of a family in `core/models/architectures.py`, loaded
with eager attention) and a padded batch, and returns one score per subword token for the class given in
`batch.target` (None: the classifier's predicted class), or with `batch.contrast` for that class's margin over the
contrast class (`objective.py` says what each family's margin is). Higher means more important. Scores at special
and padding positions are returned but never used: callers mask them with `batch.special_mask`.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, ClassVar, Sequence

import torch

from learned_attribution.core.models.features import special_token_mask
from learned_attribution.core.models.runner import pad_batch


@dataclass
class Batch:
    input_ids: torch.Tensor  # [B, T] long
    attention_mask: torch.Tensor  # [B, T] long, 1 = real token
    target: torch.Tensor | None  # [B] long, the class to explain (the predicted class); see `Attribution.logits`
    special_mask: torch.Tensor  # [B, T] bool, True at [CLS], [SEP] and padding
    mask_token_id: int  # token that replaces a "removed" token in perturbation methods
    pad_token_id: int
    # [B] long, a contrast (foil) class per row: the scores then explain the target's margin over it; None: no contrast
    contrast: torch.Tensor | None = None

    def to(self, device: torch.device) -> "Batch":
        """The same batch with its tensors on `device`."""
        return replace(self, input_ids=self.input_ids.to(device), attention_mask=self.attention_mask.to(device),
                       target=None if self.target is None else self.target.to(device),
                       special_mask=self.special_mask.to(device),
                       contrast=None if self.contrast is None else self.contrast.to(device))


@dataclass
class Attribution:
    scores: torch.Tensor  # [B, T] float, one score per token for batch.target
    # Classifier forward passes per example (a gradient method's backward pass rides on its forward
    # pass and is not counted separately); the cost benchmark measures wall time beside it.
    model_calls: int
    # The classifier's logits [B, C] when the explainer's own pass computed them. Learned explainers accept
    # `batch.target = None` (explain the predicted class) and return them, so that classifying and explaining
    # new text take one pass (learned_attribution/services/explain.py).
    logits: torch.Tensor | None = None


class AttributionMethod:
    """Base class: subclasses set `family` and implement `explain`."""

    name: ClassVar[str] = ""
    family: ClassVar[str] = ""
    # Signed scores (evidence for and against the class: IG, occlusion, LIME, KernelSHAP, ...) are shown on a
    # diverging colour scale and summed over a word's subwords; unsigned ones take the word's maximum.
    signed: ClassVar[bool] = False
    # `explain` accepts `batch.target = None`: it then explains the class its own forward pass predicts and returns
    # that pass's logits (`Attribution.logits`), so a caller classifying new text needs no pass of its own.
    classifies: ClassVar[bool] = False
    # `explain` reads attention probabilities (eager attention only): a model that cannot return them is refused
    # with the list of these methods (`attention_methods`).
    needs_attentions: ClassVar[bool] = False
    # The scores cannot depend on the class explained (nor on a contrast): the method reads no gradient and no
    # output of the classifier's head, so every target gives the same map (callers say so to the user).
    class_agnostic: ClassVar[bool] = False

    def explain(self, model: torch.nn.Module, batch: Batch) -> Attribution:
        raise NotImplementedError


METHODS: dict[str, type[AttributionMethod]] = {}


def register(name: str) -> Callable[[type[AttributionMethod]], type[AttributionMethod]]:
    """Class decorator: make an explainer available to `build_method(name, ...)`."""

    def add(cls: type[AttributionMethod]) -> type[AttributionMethod]:
        if name in METHODS:
            raise ValueError(f"explainer {name!r} registered twice")
        cls.name = name
        METHODS[name] = cls
        return cls

    return add


def attention_methods() -> list[str]:
    """The registered methods that read attention probabilities (`AttributionMethod.needs_attentions`)."""
    return sorted(name for name, method in METHODS.items() if method.needs_attentions)


def needs_attentions(method: str) -> bool:
    """Whether the registered method `method` reads attention probabilities (an unknown name: False)."""
    registered = METHODS.get(method)
    return bool(registered is not None and registered.needs_attentions)


def build_method(name: str, **settings) -> AttributionMethod:
    """The explainer registered as `name`, constructed with its settings from parameters."""
    if name not in METHODS:
        raise KeyError(f"unknown explainer {name!r}; registered: {sorted(METHODS)}")
    return METHODS[name](**settings)


def padded_batch(input_ids: Sequence[Sequence[int]], target: Sequence[int] | None, *, pad_token_id: int, mask_token_id: int,
               frame_token_ids: Sequence[int], contrast: Sequence[int] | None = None) -> Batch:
    """Right-pad token id lists into a `Batch`; `frame_token_ids` ([CLS], [SEP], [PAD]) and padding are special;
    `contrast`: a contrast class per text (None: none)."""
    ids, attention_mask = pad_batch(input_ids, pad_token_id)
    special = special_token_mask(ids, attention_mask, frame_token_ids)
    target = None if target is None else torch.as_tensor(list(target), dtype=torch.long)
    contrast = None if contrast is None else torch.as_tensor(list(contrast), dtype=torch.long)
    return Batch(input_ids=ids, attention_mask=attention_mask, target=target,
                 special_mask=special, mask_token_id=mask_token_id, pad_token_id=pad_token_id, contrast=contrast)
