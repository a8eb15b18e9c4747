"""`fewshot`: the few-shot curve's ks and draws, its candidate priors and the refit's schedule."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from learned_attribution.core.models.learned import Variant
from learned_attribution.core.models.learned.fewshot import FewShotSettings

from .blocks import block, positive_int
from .crosstask import variant


FEWSHOT_KEYS = ("ks", "repeats", "pool_roles", "priors", "schedule", "choice_repeats")
FIT_KEYS = ("steps", "batch_size", "step_scale", "prior_weight")


@dataclass(frozen=True)
class FewShotCurveSettings:
    """`fewshot`: the numbers of annotated examples (`ks`, 0 = the cross-task explainer itself), the seeded draws
    per k, the held-out task's roles the examples are drawn from, the catalogue variants that are candidate priors
    beside the fold's own ExpNet+ (each fitted cross-task on the fold's training tasks), the refit's schedule, and the
    draws per training task and k on which a fold compares the priors (`choose_refits`)."""

    ks: tuple[int, ...]
    repeats: int
    pool_roles: tuple[str, ...]
    priors: tuple[Variant, ...]
    schedule: FewShotSettings
    choice_repeats: int


def fewshot_settings(values: Mapping[str, Any] | None, seed: int, catalogue: Mapping[str, Any]
                     ) -> FewShotCurveSettings:
    """`params:fewshot` (conf/base/parameters_fewshot.yml), its priors named from the variant catalogue
    `catalogue` (`params:expnet_plus_variants`), a bad value named by its key."""
    values = block(values, "fewshot", FEWSHOT_KEYS)
    ks = values["ks"]
    if not isinstance(ks, list | tuple) or not ks or any(isinstance(k, bool) or not isinstance(k, int) or k < 0
                                                          for k in ks):
        raise ValueError(f"parameter fewshot.ks={ks!r} must be a list of integers of at least 0")
    names = list(values["priors"] or [])
    unknown = [name for name in names if name not in catalogue]
    if unknown:
        raise ValueError(f"parameter fewshot.priors names unknown variants {unknown}; the catalogue "
                         f"expnet_plus_variants defines {sorted(catalogue)}")
    fit = block(values["schedule"], "fewshot.schedule", FIT_KEYS)
    try:
        schedule = FewShotSettings(steps=positive_int(fit["steps"], "fewshot.schedule.steps"),
                                   batch_size=positive_int(fit["batch_size"], "fewshot.schedule.batch_size"),
                                   step_scale=float(fit["step_scale"]), prior_weight=float(fit["prior_weight"]),
                                   seed=seed)
    except ValueError as error:
        raise ValueError(f"parameter fewshot.schedule: {error}") from None
    return FewShotCurveSettings(ks=tuple(sorted(set(ks))), repeats=positive_int(values["repeats"], "fewshot.repeats"),
                                pool_roles=tuple(values["pool_roles"]),
                                priors=tuple(variant(name, catalogue[name], f"expnet_plus_variants.{name}")
                                             for name in names),
                                schedule=schedule,
                                choice_repeats=positive_int(values["choice_repeats"], "fewshot.choice_repeats"))
