"""Activation-family baseline (SPEC §8, §10): AFN norm, the L2 norm of each token's hidden state at a layer.

Layers count encoder blocks with the embedding output as layer 0, i.e. they index
`output.hidden_states`. The default layer is two thirds of the depth: 4 of 6 (MiniLM), 8 of 12 (bert-base).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from learned_attribution.core.models.model_pass import HIDDEN_STATES, ModelPass

from .base import Batch, register
from .passes import PassMethod


def default_afn_layer(num_layers: int) -> int:
    """round(2/3 x num_layers): the AFN layer when none is configured (6 -> 4, 12 -> 8)."""
    if isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers < 1:
        raise ValueError(f"num_layers={num_layers!r}: must be a positive integer")
    return round(2 * num_layers / 3)


@register("afn_norm")
@dataclass
class AfnNorm(PassMethod):
    """AFN strength S_i = ||h_i||_2 at `layer` (None: `default_afn_layer` of the model's depth).
    Class-agnostic: the same map for every target and contrast."""

    family = "activation"
    class_agnostic = True  # a hidden state's norm reads neither the head nor a gradient
    needs = frozenset({HIDDEN_STATES})
    layer: Optional[int] = None

    def __post_init__(self) -> None:
        if self.layer is not None and (isinstance(self.layer, bool) or not isinstance(self.layer, int)
                                       or self.layer < 0):
            raise ValueError(f"explainer setting layer={self.layer!r}: must be a non-negative integer or None")

    def layer_for(self, model: torch.nn.Module) -> int:
        """The layer this explainer reads in `model`."""
        return self.layer if self.layer is not None else default_afn_layer(model.config.num_hidden_layers)

    def scores_from(self, run: ModelPass, batch: Batch) -> torch.Tensor:
        layer = self.layer if self.layer is not None else default_afn_layer(len(run.hidden_states) - 1)
        if not 0 <= layer < len(run.hidden_states):
            raise ValueError(f"explainer setting layer={layer}: the model has hidden states for layers "
                             f"0..{len(run.hidden_states) - 1} (0 = embedding output)")
        return run.hidden_states[layer].norm(dim=-1)
