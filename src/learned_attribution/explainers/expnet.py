"""The learned explainers: the paper's ExpNet and ExpNet+ (issue 06), each one pass of the classifier then a tiny network."""
from __future__ import annotations

import numpy as np
import torch

from learned_attribution.models.expnet import ExpNetTraining
from learned_attribution.models.expnet_plus import ExpNetPlus
from learned_attribution.models.features import cls_attention_features
from learned_attribution.models.runner import eval_mode, forward
from learned_attribution.models.signals import TokenVocabulary, signals_and_logits

from .base import Attribution, Batch, Explainer, register


def _masked(probabilities: np.ndarray, batch: Batch, logits: torch.Tensor) -> Attribution:
    scores = torch.as_tensor(np.where(batch.special_mask.cpu().numpy(), 0.0, probabilities), dtype=torch.float32)
    return Attribution(scores=scores.to(batch.input_ids.device), model_calls=1, logits=logits)


@register("expnet_paper")
class ExpNetExplainer(Explainer):
    """The paper's ExpNet (SPEC §5-6): token probabilities from the explained classifier's attention only
    (2H inputs: [CLS] -> token and token -> [CLS] per head of one layer)."""

    family = "learned"
    classifies = True  # attention-only: the same for any target
    needs_attentions = True

    def __init__(self, training: ExpNetTraining, layer: int = -1):
        self.training = training
        self.layer = layer

    @torch.inference_mode()
    def explain(self, model: torch.nn.Module, batch: Batch) -> Attribution:
        with eval_mode(model):
            output = forward(model, batch.input_ids, batch.attention_mask, attentions=True)
        features = cls_attention_features(output.attentions[self.layer]).float().cpu().numpy()  # [B, T, 2H]
        flat = features.reshape(-1, features.shape[-1])
        return _masked(self.training.predict(flat).reshape(features.shape[:2]), batch, output.logits.float())


@register("expnet_plus")
class ExpNetPlusExplainer(Explainer):
    """ExpNet+ (issue 06): the same kind of network over the signals its variant reads (see
    `models/signals.py`); variants with gradient sets add a backward pass through the last layer
    (the `saliency` set: through all layers)."""

    family = "learned"
    classifies = True
    needs_attentions = True

    def __init__(self, model: ExpNetPlus, layer: int = -1, vocabulary: TokenVocabulary | None = None):
        self.model = model
        self.layer = layer
        self.vocabulary = vocabulary

    def explain(self, model: torch.nn.Module, batch: Batch) -> Attribution:
        signals, logits = signals_and_logits(model, batch.input_ids, batch.attention_mask, batch.target,
                                             self.model.variant.feature_sets, self.layer, self.vocabulary)
        # Only real tokens enter the network (within-example statistics must not see [CLS], [SEP], padding).
        keep = ~batch.special_mask.cpu().numpy()
        rows = signals.detach().cpu().numpy()[keep]
        example_ids = np.nonzero(keep)[0]
        probabilities = np.zeros(keep.shape, dtype=np.float32)
        probabilities[keep] = self.model.predict(rows, example_ids)
        return _masked(probabilities, batch, logits)
