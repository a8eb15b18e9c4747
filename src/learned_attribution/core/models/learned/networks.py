"""The networks of the learned explainers: ExpNet's 2-layer network (optionally with per-head gates) and the convex
stack, each holding `members` independent copies (seeds) side by side: inputs [..., F] -> logits [members, ...];
and the text students' networks (`encoder.EncoderTokenHead`: token ids -> per-class token scores;
`attention_student.AttentionTokenHead`: the classifier's hidden states -> per-class token scores). A network is
rebuilt from its `architecture()` dict, as saved with a trained explainer."""
from __future__ import annotations

import re
from typing import Sequence

import numpy as np
import torch
from torch import nn

from .attention_student import AttentionTokenHead
from .encoder import EncoderTokenHead
from .inputs import ANCHOR_SCALE
from .recipe import TEXT_NETWORKS, TrainingSettings, Variant


class GatedExpNet(nn.Module):
    """ExpNet's 2-layer network (inputs -> hidden ReLU -> 1), optionally with one sigmoid gate per head
    multiplying every input column of that head (`head_of_column[c]` = head index, -1 = never gated).
    `members` independent copies (seeds) side by side: inputs [..., F] -> logits [members, ...]."""

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


class SimplexStack(nn.Module):
    """A convex stack: logits = scale x (inputs . softmax(weights)) + bias, per member, inputs [..., F] ->
    [members, ...]. With rank-normalised inputs the score ranks tokens by a weighted mean of the signals' ranks;
    scale and bias only calibrate (they never change a ranking)."""

    def __init__(self, n_features: int, members: int = 1):
        super().__init__()
        self.weight_logits = nn.Parameter(0.01 * torch.randn(members, n_features))
        self.log_scale = nn.Parameter(torch.full((members,), float(np.log(ANCHOR_SCALE))))
        self.bias = nn.Parameter(torch.zeros(members))

    @property
    def members(self) -> int:
        return self.weight_logits.shape[0]

    def architecture(self) -> dict:
        return {"class": "SimplexStack", "n_features": self.weight_logits.shape[1], "members": self.members}

    def weights(self) -> torch.Tensor:
        """[members, F] convex weights."""
        return torch.softmax(self.weight_logits, -1)

    def gates(self) -> None:
        return None

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        shape = features.shape[:-1]
        mixed = features.reshape(-1, features.shape[-1]) @ self.weights().T  # [N, S]
        logits = self.log_scale.exp()[None, :] * mixed + self.bias[None, :]
        return logits.T.reshape(self.members, *shape)


def build_network(architecture: dict) -> nn.Module:
    """A network from its `architecture()` dict (as saved with a trained explainer)."""
    architecture = dict(architecture)
    kind = architecture.pop("class")
    if kind == "GatedExpNet":
        return GatedExpNet(**architecture)
    if kind == "SimplexStack":
        return SimplexStack(**architecture)
    if kind == "EncoderTokenHead":
        return EncoderTokenHead.from_architecture(**architecture)
    if kind == "AttentionTokenHead":
        return AttentionTokenHead(**architecture)
    raise ValueError(f"unknown ExpNet+ network class {kind!r}")


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
    if variant.network in TEXT_NETWORKS:
        raise ValueError(f"variant {variant.name!r}: an {variant.network} student's network is built from its "
                         "classifier (build_text_network), not over signal columns")
    if variant.network == "simplex":
        return SimplexStack(len(columns), members=settings.seeds)
    return GatedExpNet(len(columns), settings.hidden, head_of_columns(columns) if variant.gating else None,
                       members=settings.seeds)


def build_text_network(variant: Variant, model: nn.Module, layer: int = -1) -> nn.Module:
    """A new text student's network for classifier `model` (its new weights from torch's global seed): network
    `encoder`, a copy of its encoder with its top `encoder_blocks` to train and a head; `attention`,
    `attention_layers` new layers and a head over its hidden states at the explained `layer`."""
    if variant.network == "encoder":
        return EncoderTokenHead.from_classifier(model, variant.encoder_blocks)
    if variant.network == "attention":
        return AttentionTokenHead.for_classifier(model, variant.attention_layers, layer)
    raise ValueError(f"variant {variant.name!r} (network {variant.network}) is not a text student: its network reads "
                     "signal columns (build_variant_network)")
