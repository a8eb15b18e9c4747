"""The signal networks of the learned explainers, registered (`registry.py`): ExpNet's 2-layer network (`mlp`,
optionally with per-head gates) and the convex stack (`simplex`), each holding `members` independent copies (seeds)
side by side: inputs [..., F] -> logits [members, ...]. The text students' networks are registered in their own
files (`encoder.py`, `attention_student.py`). `build_variant_network` and `build_text_network` build a variant's
network through the registry; a network is rebuilt from its `architecture()` dict, as saved with a trained explainer
(`registry.build_network`)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
from torch import nn

from .inputs import ANCHOR_SCALE
from .recipe import TrainingSettings, Variant
from .registry import SIGNALS, LearnedNetwork, register_network


@dataclass(frozen=True)
class MLPSettings:
    """The `mlp` network's own settings."""

    gating: bool = False  # one learned sigmoid gate per attention head over that head's input columns


@register_network("mlp")
class GatedExpNet(LearnedNetwork):
    """ExpNet's 2-layer network (inputs -> hidden ReLU -> 1), optionally with one sigmoid gate per head
    multiplying every input column of that head (`head_of_column[c]` = head index, -1 = never gated).
    `members` independent copies (seeds) side by side: inputs [..., F] -> logits [members, ...]."""

    Settings = MLPSettings

    def __init__(self, n_features: int, hidden: int, head_of_column: Sequence[int] | None = None, members: int = 1):
        super().__init__()
        # each member initialised exactly as nn.Linear would (so one member reproduces ExpNet's network)
        first = [nn.Linear(n_features, hidden) for _ in range(members)]
        second = [nn.Linear(hidden, 1) for _ in range(members)]
        self.w1 = nn.Parameter(torch.stack([layer.weight.detach().T for layer in first]))  # [S, F, H]
        self.b1 = nn.Parameter(torch.stack([layer.bias.detach() for layer in first]))  # [S, H]
        self.w2 = nn.Parameter(torch.stack([layer.weight.detach()[0] for layer in second]))  # [S, H]
        self.b2 = nn.Parameter(torch.stack([layer.bias.detach()[0] for layer in second]))  # [S]
        self.gate_logits = None
        if head_of_column is not None:
            heads = torch.as_tensor(list(head_of_column), dtype=torch.long)
            self.register_buffer("head_of_column", heads)
            self.gate_logits = nn.Parameter(torch.full((members, int(heads.max()) + 1), 2.0))  # gates start near 0.88

    @classmethod
    def over_columns(cls, settings: MLPSettings, columns: Sequence[str], training: TrainingSettings) -> "GatedExpNet":
        return cls(len(columns), training.hidden, head_of_columns(columns) if settings.gating else None,
                   members=training.seeds)

    @classmethod
    def check(cls, variant: Variant, where: str) -> None:
        if variant.network_settings.gating and variant.shape_free:
            raise ValueError(f"{where}: gating weighs attention heads, and a shape-free input set has no per-head "
                             "columns")

    @classmethod
    def switches(cls, settings: MLPSettings) -> tuple[str, ...]:
        return ("gating",) if settings.gating else ()

    @property
    def members(self) -> int:
        return self.w1.shape[0]

    def architecture(self) -> dict:
        heads = self.head_of_column.tolist() if self.gate_logits is not None else None
        return {"class": "GatedExpNet", "n_features": self.w1.shape[1], "hidden": self.w1.shape[2],
                "head_of_column": heads, "members": self.members}

    def gates(self) -> torch.Tensor | None:
        """[members, heads] gate values, None without gating."""
        return None if self.gate_logits is None else torch.sigmoid(self.gate_logits)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        shape = features.shape[:-1]
        x = features.reshape(1, -1, features.shape[-1])  # [1, N, F]
        if self.gate_logits is not None:
            gated = self.head_of_column >= 0
            scale = torch.ones(self.members, features.shape[-1], dtype=features.dtype, device=features.device)
            scale[:, gated] = self.gates()[:, self.head_of_column[gated]]
            x = x * scale[:, None, :]  # [S, N, F]
        hidden = torch.relu(torch.matmul(x, self.w1) + self.b1[:, None, :])  # [S, N, H]
        logits = (hidden * self.w2[:, None, :]).sum(-1) + self.b2[:, None]
        return logits.reshape(self.members, *shape)


@register_network("simplex")
class SimplexStack(LearnedNetwork):
    """A convex stack: logits = scale x (inputs . softmax(weights)) + bias, per member, inputs [..., F] ->
    [members, ...]. With rank-normalised inputs the score ranks tokens by a weighted mean of the signals' ranks;
    scale and bias only calibrate (they never change a ranking)."""

    ranks_inputs = True

    def __init__(self, n_features: int, members: int = 1):
        super().__init__()
        self.weight_logits = nn.Parameter(0.01 * torch.randn(members, n_features))
        self.log_scale = nn.Parameter(torch.full((members,), float(np.log(ANCHOR_SCALE))))
        self.bias = nn.Parameter(torch.zeros(members))

    @classmethod
    def over_columns(cls, settings, columns: Sequence[str], training: TrainingSettings) -> "SimplexStack":
        return cls(len(columns), members=training.seeds)

    @classmethod
    def check(cls, variant: Variant, where: str) -> None:
        conflicting = [flag for flag in ("example_z", "anchor") if getattr(variant, flag)]
        if conflicting or variant.standardise != "global":
            raise ValueError(f"{where}: a simplex stack rank-normalises its inputs within the example, so it "
                             f"takes no {conflicting or ['standardise: ' + variant.standardise]}")

    @classmethod
    def describe(cls, settings) -> str:
        return "convex stack"

    @property
    def members(self) -> int:
        return self.weight_logits.shape[0]

    def architecture(self) -> dict:
        return {"class": "SimplexStack", "n_features": self.weight_logits.shape[1], "members": self.members}

    def weights(self) -> torch.Tensor:
        """[members, F] convex weights."""
        return torch.softmax(self.weight_logits, -1)

    def column_weights(self) -> torch.Tensor:
        return self.weights()

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        shape = features.shape[:-1]
        mixed = features.reshape(-1, features.shape[-1]) @ self.weights().T  # [N, S]
        logits = self.log_scale.exp()[None, :] * mixed + self.bias[None, :]
        return logits.T.reshape(self.members, *shape)


def head_of_columns(columns: Sequence[str]) -> list[int]:
    """Head index of every per-head column (`..._h<k>`), -1 for the others."""
    heads = []
    for column in columns:
        match = re.search(r"_h(\d+)$", column)
        heads.append(int(match.group(1)) if match else -1)
    return heads


def build_variant_network(variant: Variant, columns: Sequence[str], settings: TrainingSettings) -> nn.Module:
    """A new (randomly initialised, from torch's global seed) network for `variant` over `columns` (a text
    student's is built from its classifier: `build_text_network`)."""
    if variant.reads_text:
        raise ValueError(f"variant {variant.name!r}: an {variant.network} student's network is built from its "
                         "classifier (build_text_network), not over signal columns")
    return variant.network_class.over_columns(variant.network_settings, columns, settings)


def build_text_network(variant: Variant, model: nn.Module, layer: int = -1) -> nn.Module:
    """A new text student's network for classifier `model` (its new weights from torch's global seed), reading it at
    the explained `layer`, as its registered network builds it (`over_classifier`)."""
    if variant.network_class.reads == SIGNALS:
        raise ValueError(f"variant {variant.name!r} (network {variant.network}) is not a text student: its network "
                         "reads signal columns (build_variant_network)")
    return variant.network_class.over_classifier(variant.network_settings, model, layer)
