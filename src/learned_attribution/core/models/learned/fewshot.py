"""Few-shot in-task fitting: a trained learned explainer (a fold's cross-task ExpNet+) refit on a few annotated
examples of its own classifier, with the cross-task fit as its prior.

The network starts from the trained weights and takes a fixed number of Adam steps on the variant's own objective
over the k examples, plus an L2 pull of every weight towards where it started (L2-SP, Li et al. 2018), so that a
handful of examples moves the explainer only as far as they can say. The pull is weighed as a prior is against a
mean loss over k examples in a MAP fit, `prior_weight / k`, so it gives way as examples accumulate. No validation
split: a user with k examples has none to spare, so the schedule is fixed (`FewShotSettings`; the fewshot pipeline
chooses one per fold and k on the fold's training tasks, and stores it in the fold's folder as a `FewShotChoice`).
The input pipeline (columns, statistics) is kept: the statistics of a per-task variant are the target classifier's
already. k = 0 is the prior itself. The examples are taken in the order of their ids, so a refit does not depend on
the order its rows come in (how they were batched when their signals were read)."""
from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Mapping

import numpy as np
import pandas as pd
import torch

from .losses import objective
from .recipe import TrainingSettings
from .model import LearnedModel
from .training import TransformedRows, group_examples, transformed_rows

FOLD_PRIOR = "fold"  # the fold's own ExpNet+ as a few-shot prior (its bundle's `expnet_plus`)


@dataclass(frozen=True)
class FewShotSettings:
    """The fixed schedule of a few-shot refit: `steps` Adam steps of `batch_size` examples (drawn with
    replacement from the k), the step size as a multiple of the variant's own (its recipe's `learning_rate`, else
    1e-3), the weight of the L2 pull towards the prior's weights (a sum over every weight, divided by the number of
    examples k) and the seed of the batches. The focal loss's alpha and gamma and the gates' L1 pull are the paper's
    / the folds' settings."""

    steps: int = 300
    batch_size: int = 16
    step_scale: float = 1.0
    prior_weight: float = 0.03
    seed: int = 0
    alpha: float = 0.25
    gamma: float = 2.0
    gate_l1: float = 0.01

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"few-shot setting {name}={value!r} must be a positive integer")
        if not self.step_scale > 0:
            raise ValueError(f"few-shot setting step_scale={self.step_scale!r} must be positive")
        if self.prior_weight < 0:
            raise ValueError(f"few-shot setting prior_weight={self.prior_weight!r} must be at least 0")


def fine_tune(model: LearnedModel, rows: pd.DataFrame | TransformedRows,
              settings: FewShotSettings = FewShotSettings()) -> LearnedModel:
    """`model` refit on the labelled signal rows `rows` of its own target classifier (columns `model.columns`,
    `example_id`, `token_label`; one or more examples, each example's rows in position order), or on those rows
    transformed once by `model`'s input pipeline (`transformed_rows`: the draws of one prior share the pass): a new
    `LearnedModel` with the same inputs and threshold, its networks moved by `settings`; `model` itself is not
    changed. Examples without a rationale token and a non-rationale one give no ranking pair and teach nothing; an
    empty `rows` is the prior. The examples are taken in the order of their ids (a stable sort: each example's rows
    keep their order)."""
    if isinstance(rows, pd.DataFrame):
        missing = [c for c in (*model.columns, "example_id", "token_label") if c not in rows.columns]
        if missing:
            raise ValueError(f"few-shot rows lack columns {missing}: pass the target classifier's signal rows")
        example_ids = rows["example_id"].to_numpy()
    else:
        if rows.pipeline is not model.inputs:
            raise ValueError(f"few-shot rows transformed by another input pipeline than {model.variant.name}'s")
        if rows.labels is None:
            raise ValueError("few-shot rows lack token_label: pass labelled signal rows")
        example_ids = rows.example_ids
    net = copy.deepcopy(model.net)
    n_examples = len(pd.unique(example_ids))
    tuned = replace(model, net=net, history=[], context={**model.context, "fewshot_examples": n_examples})
    if n_examples == 0 or not model.variant.anchor_weight:
        return tuned
    if isinstance(rows, pd.DataFrame):
        rows = transformed_rows(model, rows)
    rows = rows.of_examples(example_ids, by_id=True)
    examples = group_examples(rows.inputs, rows.labels, rows.example_ids,
                              np.zeros(len(rows.example_ids), dtype=object), rows.offsets)
    loss_settings = TrainingSettings(hidden=0, alpha=settings.alpha, gamma=settings.gamma,
                                     learning_rate=0.0, batch_size=settings.batch_size, batch_unit="examples",
                                     max_epochs=0, patience=0, gate_l1=settings.gate_l1, pseudo_weight=0.0,
                                     seeds=1, seed=settings.seed)
    prior = [p.detach().clone() for p in net.parameters()]
    # the variant's own step (its recipe's, else the folds' default 1e-3), scaled: one schedule fits both a
    # convex stack (own step 1e-2) and a per-token network (1e-3)
    learning_rate = settings.step_scale * (model.variant.learning_rate or 1e-3)
    optimizer = torch.optim.Adam(net.parameters(), lr=learning_rate)
    rng = np.random.default_rng(settings.seed)
    weights = torch.ones(len(examples))
    net.train()
    for step in range(1, settings.steps + 1):
        index = rng.integers(0, len(examples), size=min(settings.batch_size, len(examples)))
        x, y, mask, batch_offsets = examples.padded(index)
        fit = objective(net, x, y, mask, batch_offsets, weights[index], model.variant, loss_settings)
        pull = sum(((p - p0) ** 2).sum() for p, p0 in zip(net.parameters(), prior))
        loss = fit + settings.prior_weight / n_examples * pull
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        tuned.history.append({"step": step, "loss": float(fit.detach()), "prior_pull": float(pull.detach())})
    net.eval()
    return tuned


@dataclass(frozen=True)
class ChosenRefit:
    """What a fold refits at one k, as the fewshot pipeline chose and measured it: the prior (`FOLD_PRIOR` or a
    catalogue variant's name), that prior's variant and the schedule (its seed the curve's draw 0's)."""

    prior: str
    variant: str
    schedule: FewShotSettings


@dataclass(frozen=True)
class FewShotChoice:
    """A fold's few-shot choice: per k > 0 the `ChosenRefit` the fewshot pipeline chose on the fold's training
    tasks and scored on its held-out test set, and the fitted priors it names other than the fold's own ExpNet+ (each
    fitted cross-task for the held-out classifier). `refit_for(n)` is what a user's n examples are refit with."""

    fold: str
    refits: Mapping[int, ChosenRefit]
    priors: Mapping[str, LearnedModel] = field(default_factory=dict)

    def __post_init__(self) -> None:
        missing = sorted({r.prior for r in self.refits.values()} - {FOLD_PRIOR} - set(self.priors))
        if missing:
            raise ValueError(f"few-shot choice of {self.fold}: no fitted prior for {missing}")

    def refit_for(self, n_examples: int) -> tuple[int, ChosenRefit]:
        """The k and refit for `n_examples`: the largest k of the choice with k <= n, else (fewer examples than
        every k) the smallest k."""
        if not self.refits:
            raise ValueError(f"few-shot choice of {self.fold}: no k > 0 was chosen")
        ks = sorted(self.refits)
        k = max((k for k in ks if k <= n_examples), default=ks[0])
        return k, self.refits[k]

    def record(self) -> dict[str, Any]:
        """The JSON record (`choice.json`): the fold and, per k (a string key), the prior, its variant and the
        schedule's fields."""
        return {"fold": self.fold,
                "refits": {str(k): {"prior": r.prior, "variant": r.variant, "schedule": asdict(r.schedule)}
                           for k, r in sorted(self.refits.items())}}

    @classmethod
    def from_record(cls, record: Mapping[str, Any], priors: Mapping[str, LearnedModel]) -> "FewShotChoice":
        refits = {int(k): ChosenRefit(r["prior"], r["variant"], FewShotSettings(**r["schedule"]))
                  for k, r in record["refits"].items()}
        return cls(str(record["fold"]), refits, dict(priors))
