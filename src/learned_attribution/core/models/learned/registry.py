"""The learned networks by name: a network is one class registered with `@register_network(name)` (the name a
variant's `network` takes), which declares everything the rest of the core asks about it, so that adding one is one
registered file (imported by this package's `__init__`):

- `Settings`: its own settings, a frozen dataclass whose every field has a default (a variant holds one as
  `network_settings`); the field names are the keys a variant's recipe gives them by (flat, beside the recipe's).
- `reads`: what it reads, `SIGNALS` (signal columns: the one loop of `training.fit_variant`) or the text itself,
  `TOKEN_IDS` or `HIDDEN_STATES` (the classifier's: the text students' loop, `training.fit_text_variant`).
- `ranks_inputs`: its inputs are rank-normalised within the example (the input pipeline's `ranks` step).
- `over_columns` (signal networks) or `over_classifier` (text students): a new network, from torch's global seed.
- `check`: what it refuses of a variant; `describe`, `switches`: its words in the variant's description.
- `architecture()` (an instance's, saved with a trained explainer; its `class` is the class name) and
  `from_architecture`, which rebuilds it (`build_network`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Sequence

import torch
from torch import nn

SIGNALS = "signal columns"
TOKEN_IDS = "token ids"
HIDDEN_STATES = "hidden states"


@dataclass(frozen=True)
class NoSettings:
    """The settings of a network that has none of its own."""


class LearnedNetwork(nn.Module):
    """What every registered network declares (see the module docstring); the defaults are a signal network's with
    no settings, no gates and no column weights. (`variant` is a `recipe.Variant`, `training` its
    `recipe.TrainingSettings`: the recipe imports this registry, not the other way round.)"""

    network: ClassVar[str] = ""  # its registered name, set by `register_network`
    Settings: ClassVar[type] = NoSettings
    reads: ClassVar[str] = SIGNALS
    ranks_inputs: ClassVar[bool] = False

    @classmethod
    def over_columns(cls, settings: Any, columns: Sequence[str], training: Any) -> nn.Module:
        """A new network over signal `columns` with `training.seeds` members (a signal network's)."""
        raise NotImplementedError(f"network {cls.network!r} reads {cls.reads}, not signal columns")

    @classmethod
    def over_classifier(cls, settings: Any, model: nn.Module, layer: int) -> nn.Module:
        """A new text student of classifier `model`, reading it at the explained `layer` (a text student's)."""
        raise NotImplementedError(f"network {cls.network!r} reads signal columns, not the text")

    @classmethod
    def check(cls, variant: Any, where: str) -> None:
        """Raise ValueError (starting with `where`) for what this network cannot do of `variant`."""

    @classmethod
    def describe(cls, settings: Any) -> str:
        """What it is, in a variant's description, after the objective ("" for nothing)."""
        return ""

    @classmethod
    def switches(cls, settings: Any) -> tuple[str, ...]:
        """Its switches that are on, in a variant's description beside the recipe's own flags."""
        return ()

    @classmethod
    def from_architecture(cls, **architecture) -> nn.Module:
        """An untrained network of the saved `architecture()` (its weights are loaded next)."""
        return cls(**architecture)

    def gates(self) -> torch.Tensor | None:
        """[members, heads] gate values, None without gating."""
        return None

    def column_weights(self) -> torch.Tensor | None:
        """[members, F] weights of its input columns, where they are its parameters' meaning (a convex stack's)."""
        return None


NETWORKS: dict[str, type[LearnedNetwork]] = {}


def register_network(name: str) -> Callable[[type[LearnedNetwork]], type[LearnedNetwork]]:
    """Class decorator: make a network available to variants as `network: name`."""

    def add(cls: type[LearnedNetwork]) -> type[LearnedNetwork]:
        if name in NETWORKS:
            raise ValueError(f"learned network {name!r} registered twice")
        if any(other.__name__ == cls.__name__ for other in NETWORKS.values()):
            raise ValueError(f"learned network class {cls.__name__} registered twice (a saved architecture names "
                             "its class)")
        if cls.reads not in (SIGNALS, TOKEN_IDS, HIDDEN_STATES):
            raise ValueError(f"learned network {name!r} reads {cls.reads!r}, expected one of "
                             f"{(SIGNALS, TOKEN_IDS, HIDDEN_STATES)}")
        cls.network = name
        NETWORKS[name] = cls
        return cls

    return add


def build_network(architecture: dict) -> nn.Module:
    """A network from its `architecture()` dict (as saved with a trained explainer)."""
    architecture = dict(architecture)
    kind = architecture.pop("class")
    for cls in NETWORKS.values():
        if cls.__name__ == kind:
            return cls.from_architecture(**architecture)
    raise ValueError(f"unknown ExpNet+ network class {kind!r}")
