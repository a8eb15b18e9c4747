"""The learned explainers: the paper's ExpNet, ExpNet+ and the amortized student, each one
pass of the classifier for the signals its variant reads, then a tiny network (`models/learned`). The three names
apply the same class to a fold's two trained variants and to a student."""
from __future__ import annotations

import numpy as np
import torch

from learned_attribution.core.models.learned import LearnedModel
from learned_attribution.core.models.signals import TokenVocabulary, signals_and_logits

from .base import Attribution, Batch, AttributionMethod, register

# The learned methods' names: every other module names them through these.
EXPNET_PLUS = "expnet_plus"
PAPER_EXPNET = "expnet_paper"
STUDENT = "student"
FOLD_LEARNED = (EXPNET_PLUS, PAPER_EXPNET)  # a fold's learned explainers, in the order they are applied
LEARNED = (*FOLD_LEARNED, STUDENT)


class LearnedMethod(AttributionMethod):
    """A trained `LearnedModel` applied to a classifier: its variant's signals from one pass (variants with
    gradient sets add a backward pass through the last layer, the `saliency` set through all layers), its input
    pipeline, its networks; an encoder student: the classifier's pass (its prediction), then the student's copy
    of the encoder on the same ids; an attention student: the classifier's pass (its prediction and hidden states),
    then the student's layers on those hidden states."""

    family = "learned"
    classifies = True
    needs_attentions = True

    def __init__(self, model: LearnedModel, layer: int = -1, vocabulary: TokenVocabulary | None = None):
        self.model = model
        self.layer = layer
        self.vocabulary = vocabulary

    def explain(self, model: torch.nn.Module, batch: Batch) -> Attribution:
        if self.model.reads_token_ids:  # a text student: the classifier's pass, then the student's network
            if batch.contrast is not None:  # its token head scores one class at a time: no margin to explain
                raise ValueError("a text student explains one class, not a margin over a contrast class: leave the "
                                 "contrast unset")
            logits, scores = self.model.classify_and_score(model, batch.input_ids, batch.attention_mask, batch.target)
            return Attribution(scores=scores.masked_fill(batch.special_mask, 0.0),
                               model_calls=self.model.net.model_calls, logits=logits)
        signals, logits = signals_and_logits(model, batch.input_ids, batch.attention_mask, batch.target,
                                             self.model.variant.feature_sets, self.layer, self.vocabulary,
                                             contrast=batch.contrast)
        # Only real tokens enter the network (within-example statistics must not see [CLS], [SEP], padding).
        keep = ~batch.special_mask.cpu().numpy()
        rows = signals.detach().cpu().numpy()[keep]
        example_ids = np.nonzero(keep)[0]
        probabilities = np.zeros(keep.shape, dtype=np.float32)
        probabilities[keep] = self.model.predict(rows, example_ids)
        scores = torch.as_tensor(probabilities, dtype=torch.float32)
        return Attribution(scores=scores.to(batch.input_ids.device), model_calls=1, logits=logits)


@register(PAPER_EXPNET)
class ExpNetMethod(LearnedMethod):
    """The paper's ExpNet (SPEC §5-6): token probabilities from the explained classifier's attention only
    (2H inputs: [CLS] -> token and token -> [CLS] per head of one layer). Class-agnostic: the same map for every
    target and contrast."""

    class_agnostic = True  # its attention columns read no gradient


@register(EXPNET_PLUS)
class ExpNetPlusMethod(LearnedMethod):
    """ExpNet+: the fold's chosen variant over the signals it reads (see `core/models/signals.py`)."""


@register(STUDENT)
class StudentMethod(LearnedMethod):
    """An amortized student: trained to reproduce an expensive method (its teacher) on
    its classifier's unlabeled texts; it reads no rationale. Its scores rank tokens as the teacher would (a
    probability-like score, not a rationale probability: its rationale is the top-k rule)."""

    family = "amortized"
