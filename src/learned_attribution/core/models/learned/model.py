"""The trained learned explainer (`LearnedModel`): a variant's fitted input pipeline and its trained network, ready
for one target classifier: signal columns in (`predict`), or, for a text student, a batch of texts through its
classifier (`classify_and_score`)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from .encoder import explained_class
from .inputs import InputPipeline
from .recipe import Variant


@dataclass
class LearnedModel:
    """A trained variant, ready for one target classifier: `predict` takes raw signal columns. `net` holds one
    network per seed; the explainer's score is their ensemble (mean logit)."""

    variant: Variant
    inputs: InputPipeline
    net: nn.Module  # its registered network: a signal network's inputs [..., F] -> logits [members, ...]
    history: list[dict] = field(default_factory=list)
    best_epoch: int = 0  # the last best epoch among the members
    member_best_epochs: list[int] = field(default_factory=list)
    # Each seed's validation score at its best epoch: its stopping rule's AUROC, or Spearman for a student.
    member_val_scores: list[float] = field(default_factory=list)
    calibrated_threshold: float = 0.5
    n_pseudo_examples: int = 0
    threshold: float = 0.5
    context: dict = field(default_factory=dict)  # fold, tasks, encoder, classifier shape (core/models/artifacts.py)

    @property
    def columns(self) -> list[str]:
        return self.inputs.columns

    @property
    def n_members(self) -> int:
        return self.net.members

    @property
    def shape_free(self) -> bool:
        return self.variant.shape_free

    @property
    def reads_token_ids(self) -> bool:
        """A text student (encoder or attention): it reads the text's token ids through its classifier
        (`classify_and_score`), not signal columns (`predict`)."""
        return self.variant.reads_text

    def classify_and_score(self, classifier: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                           target: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """A text student on a batch of texts: the classifier's logits [B, C] and the student's token probabilities
        [B, T] for the class each text explains (`target` [B]; None: the predicted class), on the device of
        `input_ids`. `net.model_calls` classifier-sized passes per text."""
        self.net.to(input_ids.device)
        with torch.inference_mode():
            logits, scores = self.net.classify_and_score(classifier, input_ids, attention_mask)
            target = logits.argmax(-1) if target is None else target
            return logits, torch.sigmoid(explained_class(scores, target).float())

    def predict(self, features: np.ndarray, example_ids: np.ndarray | None = None,
                member: int | None = None) -> np.ndarray:
        """Token probabilities for raw signals [N, len(columns)] of the target classifier: the seeds' ensemble,
        or one seed's network (`member`). `example_ids` (one per row) are needed by the variants that read whole
        examples (example_z, anchor, simplex)."""
        if self.reads_token_ids:
            raise TypeError(f"{self.variant.name} is an {self.variant.network} student: it reads token ids "
                            "(classify_and_score), not signal columns")
        inputs, offsets = self.inputs.transform(features, example_ids)
        return self.network_probabilities(torch.as_tensor(inputs), 0.0 if offsets is None else torch.as_tensor(offsets),
                                          member)

    def network_probabilities(self, inputs: torch.Tensor, offsets: torch.Tensor | float,
                              member: int | None = None) -> np.ndarray:
        """Token probabilities from the network's own inputs (already transformed) and the anchor offsets (0
        without an anchor): sigmoid(offset + anchor_weight x the ensemble's, or one seed's, logit)."""
        with torch.inference_mode():
            if not self.variant.anchor_weight:
                residual = torch.zeros(len(inputs))
            else:
                logits = self.net(inputs)
                residual = logits.mean(0) if member is None else logits[member]
            return torch.sigmoid(offsets + self.variant.anchor_weight * residual).numpy()

    @property
    def own_threshold(self) -> float | None:
        """The threshold of its own rationale rule (calibrated on validation rationales), None for a student of
        real-valued attributions, whose scores rank tokens without a rationale scale: top-k instead."""
        return None if self.variant.objective == "distill" else self.calibrated_threshold

    def gates(self) -> dict[str, float]:
        """Head gates (mean over the seeds), empty without gating."""
        gates = self.net.gates()
        return {} if gates is None else {f"gate_h{h}": float(g) for h, g in enumerate(gates.detach().mean(0))}

    def stack_weights(self) -> dict[str, float]:
        """A simplex stack's convex weight of every input column (mean over the seeds), empty otherwise."""
        weights = self.net.column_weights()
        return {} if weights is None else dict(zip(self.columns, weights.detach().mean(0).tolist()))
