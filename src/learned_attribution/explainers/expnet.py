"""ExpNet as an explainer: one forward pass for the attention features, then the tiny network."""
from __future__ import annotations

import numpy as np
import torch

from learned_attribution.models.expnet import ExpNetTraining
from learned_attribution.models.features import cls_attention_features, layer_attention

from .base import Attribution, Batch, Explainer, register


@register("expnet")
class ExpNetExplainer(Explainer):
    """Scores are ExpNet's token probabilities from the explained classifier's attention (SPEC §5-6)."""

    family = "learned"

    def __init__(self, training: ExpNetTraining, layer: int = -1):
        self.training = training
        self.layer = layer

    @torch.inference_mode()
    def explain(self, model: torch.nn.Module, batch: Batch) -> Attribution:
        model.eval()
        attention = layer_attention(model, batch.input_ids, batch.attention_mask, self.layer)
        features = cls_attention_features(attention).float().numpy()  # [B, T, 2H]
        flat = features.reshape(-1, features.shape[-1])
        probabilities = self.training.predict(flat).reshape(features.shape[:2])
        scores = torch.as_tensor(np.where(batch.special_mask.numpy(), 0.0, probabilities), dtype=torch.float32)
        return Attribution(scores=scores, model_calls=1)
