"""A teacher: an expensive attribution method of the registry at a budget (its `n_samples` or `n_steps`), the
method an amortized student learns to reproduce (`services/amortize/`)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from .base import METHODS, build_method

TEACHER_BUDGETS = {"kernel_shap": "n_samples", "lime": "n_samples", "integrated_gradients": "n_steps",
                   "occlusion": None}
DEFAULT_SAMPLES = 200  # a sampling teacher's budget unless one is given


@dataclass(frozen=True)
class Teacher:
    """An expensive attribution method from the registry, with its settings (`n_samples`, `n_steps`, ...)."""

    method: str = "kernel_shap"
    settings: dict = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if self.method not in TEACHER_BUDGETS:
            raise ValueError(f"teacher {self.method!r} is not one of {sorted(TEACHER_BUDGETS)}")
        self.build()  # unknown or invalid settings fail here, naming the setting

    @classmethod
    def default(cls, method: str = "kernel_shap", budget: int | None = None, seed: int = 0) -> "Teacher":
        """`method` at `budget` (its `n_samples` or `n_steps`; unset: DEFAULT_SAMPLES for a sampling teacher, the
        method's own default otherwise), a sampling teacher drawing with `seed`: what `fit` and the amortize
        settings use when no teacher settings are given."""
        key = TEACHER_BUDGETS.get(method)
        if method not in TEACHER_BUDGETS:
            return cls(method)  # the constructor names the teachers there are
        if budget is not None and key is None:
            raise ValueError(f"the {method} teacher has no budget (one pass per token)")
        settings = {}
        if budget is not None:
            settings[key] = budget
        elif key == "n_samples":
            settings[key] = DEFAULT_SAMPLES
        if "seed" in METHODS[method].__dataclass_fields__:
            settings["seed"] = int(seed)
        return cls(method, settings)

    def build(self):
        """The teacher's attribution method."""
        try:
            return build_method(self.method, **self.settings)
        except TypeError as error:
            raise ValueError(f"teacher {self.method}: unknown setting in {sorted(self.settings)} ({error})") from error

    @property
    def budget(self) -> int | None:
        key = TEACHER_BUDGETS[self.method]
        if key is None:
            return None
        return int(self.settings.get(key, getattr(METHODS[self.method], key)))

    def at_budget(self, factor: int) -> "Teacher":
        """The same method at `factor` x the budget; a sampling teacher also draws with another seed, so the
        reference's noise is independent of the training labels'."""
        key = TEACHER_BUDGETS[self.method]
        if key is None:
            return self
        settings = {**self.settings, key: self.budget * int(factor)}
        if "seed" in METHODS[self.method].__dataclass_fields__:
            settings["seed"] = int(self.settings.get("seed", 0)) + 1
        return Teacher(self.method, settings)

    def describe(self) -> str:
        settings = ", ".join(f"{k} {v}" for k, v in sorted(self.settings.items()))
        return f"{self.method} ({settings})" if settings else self.method

    def identity(self) -> str:
        return json.dumps({"method": self.method, "settings": self.settings}, sort_keys=True)
