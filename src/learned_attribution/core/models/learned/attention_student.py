"""The attention student: new self-attention layers over the classifier's own frozen hidden states, the encoder
student's cheaper-to-train sibling in the same learned-explainer core (a token head with one score per class, the
predicted class's explained; the students' loss; early stopping on the validation texts' per-example Spearman; the
one loop of the text students, `encoder.train_text_student`).

What it reads: the classifier's hidden states at the explained layer (the output of that block), from the
classifier's own pass. At explain time the pass that gives the prediction gives them too (`output_hidden_states`),
so it costs one classifier pass plus its small layers, where the encoder student runs a second copy of the encoder.

What trains: `attention_layers` freshly initialised `nn.TransformerEncoderLayer`s of the classifier's width, head
count and feed-forward width (`architectures.py`: one table for every family), pre-norm, padding masked, and a linear
head. The classifier never trains: its hidden states of the training and validation texts are computed once and
kept, so an epoch runs the small layers alone. Its folder holds the new layers and the head, not a copy of the
encoder (about `attention_layers` blocks' weights).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

import pandas as pd
import torch
from torch import nn
from torch.nn.utils.rnn import pad_sequence

from ..architectures import architecture
from ..runner import eval_mode, length_grouped_batches, model_device, pad_batch
from ..signals import explained_block
from .encoder import BatchInputs, check_text_student, text_batch
from .registry import HIDDEN_STATES, LearnedNetwork, register_network

if TYPE_CHECKING:
    from .recipe import Variant

DROPOUT = 0.1  # nn.TransformerEncoderLayer's default, and the supported families' own hidden dropout


@dataclass(frozen=True)
class AttentionStudentSettings:
    """The `attention` student's own settings."""

    attention_layers: int = 2  # the new self-attention layers over the hidden states


@register_network("attention")
class AttentionTokenHead(LearnedNetwork):
    """Hidden states [B, T, D] of the classifier's block `layer` -> token scores [B, T, C] (one per class): `layers`
    pre-norm self-attention blocks (padding masked), a final LayerNorm, a linear head. Every parameter trains."""

    Settings = AttentionStudentSettings
    reads = HIDDEN_STATES
    members = 1
    model_calls = 1  # per text at explain time: the classifier's pass gives its prediction and the hidden states

    def __init__(self, hidden_size: int, heads: int, feed_forward: int, num_labels: int, layers: int, layer: int):
        super().__init__()
        if isinstance(layers, bool) or not isinstance(layers, int) or layers < 1:
            raise ValueError(f"attention_layers={layers!r}: train at least one layer")
        self.hidden_size, self.heads, self.feed_forward = int(hidden_size), int(heads), int(feed_forward)
        self.num_labels, self.layer = int(num_labels), int(layer)
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(self.hidden_size, self.heads, self.feed_forward, dropout=DROPOUT,
                                       activation="gelu", batch_first=True, norm_first=True)
            for _ in range(layers))
        # Pre-norm blocks leave the residual stream unnormalised: the final norm nn.TransformerEncoder's `norm` adds.
        self.norm = nn.LayerNorm(self.hidden_size)
        self.head = nn.Linear(self.hidden_size, self.num_labels)

    @classmethod
    def for_classifier(cls, model: nn.Module, layers: int, layer: int = -1) -> "AttentionTokenHead":
        """New layers (from torch's global seed) over `model`'s hidden states at its explained `layer` (negative:
        counted from the last block), shaped by its config."""
        config, family = model.config, architecture(model)
        return cls(int(config.hidden_size), int(config.num_attention_heads), family.feed_forward_width(config),
                   int(config.num_labels), layers, explained_block(layer, len(family.blocks(model))))

    @classmethod
    def over_classifier(cls, settings: AttentionStudentSettings, model: nn.Module, layer: int
                        ) -> "AttentionTokenHead":
        return cls.for_classifier(model, settings.attention_layers, layer)

    @classmethod
    def check(cls, variant: Variant, where: str) -> None:
        check_text_student(variant, where, "attention_layers")

    @classmethod
    def describe(cls, settings: AttentionStudentSettings) -> str:
        return (f"the classifier's frozen hidden states, {settings.attention_layers} new attention layers and a token "
                "head trained")

    def architecture(self) -> dict:
        return {"class": "AttentionTokenHead", "hidden_size": self.hidden_size, "heads": self.heads,
                "feed_forward": self.feed_forward, "num_labels": self.num_labels, "layers": len(self.blocks),
                "layer": self.layer}

    def trained_parameters(self) -> list[nn.Parameter]:
        return list(self.parameters())

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        padding = attention_mask == 0
        states = hidden_states.to(self.head.weight.dtype)  # a bf16 pass of the classifier: read in the layers' dtype
        for block in self.blocks:
            states = block(states, src_key_padding_mask=padding)
        return self.head(self.norm(states))

    def classify_and_score(self, classifier: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor
                           ) -> tuple[torch.Tensor, torch.Tensor]:
        """The classifier's logits [B, C] and this student's token scores [B, T, C], from one classifier pass."""
        logits, hidden = classifier_hidden_states(classifier, input_ids, attention_mask, self.layer)
        return logits, self(hidden, attention_mask)

    def text_inputs(self, classifier: nn.Module, tokenizer, texts: pd.DataFrame, batch_size: int,
                    device: torch.device | str = "cpu") -> BatchInputs:
        """What it reads of `texts` (example_id, input_ids): the classifier's hidden states, computed once and kept
        on `device`."""
        return hidden_state_inputs(tokenizer, hidden_state_cache(classifier, texts, tokenizer, self.layer, batch_size,
                                                                 device))


def classifier_hidden_states(classifier: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                             layer: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One pass of the classifier: its logits [B, C] and the output of its block `layer` [B, T, D]."""
    output = classifier(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
    return output.logits, output.hidden_states[layer + 1]  # hidden_states[0] is the embedding output


def hidden_state_cache(classifier: nn.Module, texts: pd.DataFrame, tokenizer, layer: int, batch_size: int = 32,
                       device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
    """{example_id: its hidden states [T, D] at block `layer`, every position}: the classifier (eval mode, no
    gradient) over length-grouped batches of `texts` (example_id, input_ids) where it is, kept in fp32 on `device`."""
    ids, example_ids = list(texts["input_ids"]), list(texts["example_id"])
    where = model_device(classifier)
    cache: dict[str, torch.Tensor] = {}
    # no_grad rather than inference_mode: the kept tensors are inputs of trained layers, and an inference tensor
    # cannot be saved for their backward pass.
    with torch.no_grad(), eval_mode(classifier):
        for batch in length_grouped_batches([len(i) for i in ids], batch_size, shuffle=False):
            input_ids, attention_mask = pad_batch([ids[i] for i in batch], tokenizer.pad_token_id, where)
            _, hidden = classifier_hidden_states(classifier, input_ids, attention_mask, layer)
            hidden = hidden.float().to(device)
            for row, index in enumerate(batch):
                cache[example_ids[index]] = hidden[row, :len(ids[index])].clone()
    return cache


def hidden_state_inputs(tokenizer, hidden_states: Mapping[str, torch.Tensor]) -> BatchInputs:
    """The attention student's inputs of a batch: its texts' kept hidden states, right-padded as the token ids are,
    and the attention mask."""
    def inputs(texts: pd.DataFrame, batch, device: torch.device):
        _, attention_mask, scored = text_batch([texts["input_ids"].iat[i] for i in batch], tokenizer, device)
        states = pad_sequence([hidden_states[texts["example_id"].iat[i]] for i in batch], batch_first=True)
        return (states.to(device), attention_mask), scored
    return inputs
