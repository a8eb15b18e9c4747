"""The baselines that read one pass of the classifier, and explaining several of them from one shared pass.

Nine baselines are functions of a single forward and backward pass: raw attention, rollout, GAE, AttCAT, attention
x gradient, saliency, input x gradient, Grad-CAM and the AFN norm. Each is a `PassMethod`: it names what it reads
(`needs`) and computes its scores from a `ModelPass` (`scores_from`). The pass itself is
`core/models/model_pass.py`'s `run_pass`, the engine the ExpNet+ signals read too. A method's `explain` runs a pass
of its own, so a method alone costs what it always did; `explain_together` runs one pass with the union of the
needs of several, so explaining a batch with all nine costs one forward and one backward pass instead of nine (the
backward pass runs once, down to the earliest tensor any of them differentiates). The scores are the same either
way: the same forward computation, and each gradient the same chain of the same backward pass (tested to float
rounding).
"""
from __future__ import annotations

from dataclasses import replace
from typing import ClassVar, Iterable, Mapping

import torch

from learned_attribution.core.models.architectures import NoAttentionsError, no_attentions_message
from learned_attribution.core.models.model_pass import ModelPass, run_pass

from .base import Attribution, AttributionMethod, Batch, attention_methods


def explainer_pass(model: torch.nn.Module, batch: Batch, needs: Iterable[str]) -> ModelPass:
    """`run_pass` for explainers: a model that returns no attentions is refused with a ValueError (an explainer's
    setting error) that names the methods that read them."""
    try:
        return run_pass(model, batch, needs)
    except NoAttentionsError:
        raise ValueError(no_attentions_message(model, attention_methods())) from None


def zero_padding(scores: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Scores with every padding position set to 0 (float32, detached)."""
    return (scores.detach().float() * attention_mask.to(scores.device).bool()).float()


class PassMethod(AttributionMethod):
    """A method whose scores are a function of one pass of the classifier (`needs`: what it reads of it). With
    `batch.target` None it explains the class the pass predicts and returns the pass's logits; with `batch.contrast`
    the pass's gradients are of the target's margin over the contrast class (`objective.py`)."""

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
        return self.attribution(explainer_pass(model, batch, self.needs), batch)


def explain_together(model: torch.nn.Module, batch: Batch,
                     methods: Mapping[str, AttributionMethod]) -> dict[str, Attribution]:
    """Every method's attribution of `batch` (name -> attribution, in the order of `methods`): the `PassMethod`s from
    one shared pass, the others each by its own `explain`. With `batch.target` None, the first pass explains the class
    it predicts and every later method explains that class: the first method run (the shared pass, else the first of
    `methods`) must classify (`AttributionMethod.classifies`)."""
    shared = {name: method for name, method in methods.items() if isinstance(method, PassMethod)}
    out: dict[str, Attribution] = {}
    if len(shared) > 1:
        run = explainer_pass(model, batch, frozenset().union(*(method.needs for method in shared.values())))
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
