"""The encoder student: a copy of the classifier's own encoder with a token head, the student with more than
per-token capacity (Yang et al., ACL 2023: a fine-tuned encoder as the student of an attribution method).

A per-token network scores each token from that token's signals alone and cannot express a teacher whose values
depend on how the tokens interact (KernelSHAP's do). The encoder student reads the text itself: a copy of the
classifier's encoder (`copy.deepcopy(model.base_model)`: any supported family, no second checkpoint), its
embeddings and lower blocks frozen at the classifier's weights and its top `encoder_blocks` blocks trained with a
linear head that gives each token one score per class; the score explained is the predicted class's. Initialised
from the classifier, it starts from the representation the decision was made with, which a network trained from
scratch over the token signals lacked (docs/choices.md: it fit its training labels and lost on held-out texts).

It costs one forward pass of the copy beside the classifier's own (the prediction), no backward pass. One network
(not `seeds` side by side: each would be a copy of the encoder); the loss is the students' (`distillation_loss`),
early stopping on the validation texts' mean per-example Spearman, as for every student.

The loop here (`train_text_student`), the scoring (`student_text_scores`) and what a text student refuses of a
variant (`check_text_student`) are every text student's: the encoder student's and the attention student's
(`attention_student.py`), which differ only in what their network reads of a batch (`BatchInputs`: token ids, or the
classifier's kept hidden states).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn

from learned_attribution.core.metrics.fidelity import example_spearman

from ..architectures import architecture
from ..features import frame_token_ids, special_token_mask
from ..runner import length_grouped_batches, model_device, pad_batch
from .losses import distillation_loss
from .recipe import TrainingSettings
from .registry import TOKEN_IDS, LearnedNetwork, register_network

if TYPE_CHECKING:
    from .recipe import Variant

# Attention the copy runs with: it needs no attention probabilities, so the fused kernel where the family has one.
FAST_ATTENTION = "sdpa"


def _fast_attention(encoder: nn.Module) -> nn.Module:
    if getattr(encoder, "_supports_sdpa", False):  # DeBERTa-v2 and MPNet have no fused kernel: they stay eager
        encoder.set_attn_implementation(FAST_ATTENTION)
    return encoder


def check_text_student(variant: Variant, where: str, depth: str) -> None:
    """What every text student refuses: signal inputs and their transforms, an objective other than the teacher's
    scores; its settings' `depth` (blocks or layers that train) must be a positive integer."""
    conflicting = [flag for flag in ("example_z", "anchor", "balance", "self_training") if getattr(variant, flag)]
    if variant.feature_sets or conflicting or variant.objective != "distill" or variant.standardise != "global":
        raise ValueError(f"{where}: an {variant.network} student reads the text itself (feature_sets: []) and "
                         f"is trained on a teacher's scores (objective: distill), with no "
                         f"{conflicting or 'input transforms'}")
    value = getattr(variant.network_settings, depth)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{where}: {depth}={value!r} must be a positive integer")


@dataclass(frozen=True)
class EncoderStudentSettings:
    """The `encoder` student's own settings."""

    encoder_blocks: int = 4  # the copy's top blocks that train (the rest stay the classifier's)


@register_network("encoder")
class EncoderTokenHead(LearnedNetwork):
    """input ids [B, T] -> token scores [B, T, C] (one per class): the encoder copy's last hidden states through a
    linear head. Only the top `trainable_blocks` blocks (all of them, when the classifier has fewer) and the head
    have `requires_grad`."""

    Settings = EncoderStudentSettings
    reads = TOKEN_IDS
    members = 1
    model_calls = 2  # per text at explain time: the classifier's pass (its prediction), then the copy's

    def __init__(self, encoder: nn.Module, num_labels: int, trainable_blocks: int):
        super().__init__()
        blocks = architecture(encoder).blocks(encoder)
        if trainable_blocks < 1:
            raise ValueError(f"encoder_blocks={trainable_blocks}: train at least one block")
        trainable_blocks = min(int(trainable_blocks), len(blocks))  # a shallower classifier: every block trains
        self.encoder = _fast_attention(encoder)
        self.trainable_blocks = trainable_blocks
        self.num_labels = int(num_labels)
        self.head = nn.Linear(int(encoder.config.hidden_size), self.num_labels)
        trained = {id(p) for block in blocks[len(blocks) - trainable_blocks:] for p in block.parameters()}
        for parameter in self.encoder.parameters():
            parameter.requires_grad_(id(parameter) in trained)

    @classmethod
    def from_classifier(cls, model: nn.Module, trainable_blocks: int) -> "EncoderTokenHead":
        """A copy of `model`'s encoder (its weights as they are now) and a new head, from torch's global seed."""
        return cls(copy.deepcopy(model.base_model), int(model.config.num_labels), trainable_blocks)

    @classmethod
    def over_classifier(cls, settings: EncoderStudentSettings, model: nn.Module, layer: int) -> "EncoderTokenHead":
        return cls.from_classifier(model, settings.encoder_blocks)  # the copy reads the text, not `layer`

    @classmethod
    def check(cls, variant: Variant, where: str) -> None:
        check_text_student(variant, where, "encoder_blocks")

    @classmethod
    def describe(cls, settings: EncoderStudentSettings) -> str:
        return f"a copy of the classifier's encoder, its top {settings.encoder_blocks} blocks and a token head trained"

    def architecture(self) -> dict:
        return {"class": "EncoderTokenHead", "config": self.encoder.config.to_dict(), "num_labels": self.num_labels,
                "trainable_blocks": self.trainable_blocks}

    @classmethod
    def from_architecture(cls, config: dict, num_labels: int, trainable_blocks: int) -> "EncoderTokenHead":
        """An untrained network of the saved shape (its weights are loaded next)."""
        from transformers import AutoConfig, AutoModel  # the heavy import only where a saved student is rebuilt

        values = dict(config)
        encoder_config = AutoConfig.for_model(values.pop("model_type"), **values)
        return cls(AutoModel.from_config(encoder_config), num_labels, trainable_blocks)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        # A classifier's encoder may have no pooler (RoBERTa's) where the rebuilt one has: the pooler is never read.
        result = super().load_state_dict(state_dict, strict=False, assign=assign)
        missing = [k for k in result.missing_keys if ".pooler." not in f".{k}"]
        if strict and (missing or result.unexpected_keys):
            raise RuntimeError(f"encoder student weights do not fit its network: missing {missing}, unexpected "
                               f"{result.unexpected_keys}")
        return result

    def trained_parameters(self) -> list[nn.Parameter]:
        return [p for p in self.parameters() if p.requires_grad]

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self.head(hidden)

    def classify_and_score(self, classifier: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor
                           ) -> tuple[torch.Tensor, torch.Tensor]:
        """The classifier's logits [B, C] and this student's token scores [B, T, C] of the same texts."""
        logits = classifier(input_ids=input_ids, attention_mask=attention_mask).logits
        return logits, self(input_ids, attention_mask)

    def text_inputs(self, classifier: nn.Module, tokenizer, texts: pd.DataFrame, batch_size: int,
                    device: torch.device | str = "cpu") -> BatchInputs:
        """What it reads of `texts`: their token ids (the classifier is not read)."""
        return token_id_inputs(tokenizer)


def text_batch(input_ids: Sequence[Sequence[int]], tokenizer, device: torch.device | str = "cpu"
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Padded ids, attention mask and the scored-token mask (not [CLS], [SEP], padding) of token id lists."""
    ids, attention_mask = pad_batch(input_ids, tokenizer.pad_token_id, device)
    return ids, attention_mask, ~special_token_mask(ids, attention_mask, frame_token_ids(tokenizer))


# What a text student's network reads for one batch of texts: (texts: example_id, input_ids, ...; the batch's row
# positions; the network's device) -> (the network's inputs, the [B, T] scored-token mask). The encoder student reads
# the token ids (`token_id_inputs`), the attention student the classifier's hidden states (`attention_student.py`);
# the loop, the scoring and the validation below are the same for both.
BatchInputs = Callable[[pd.DataFrame, Sequence[int], torch.device], tuple[tuple[torch.Tensor, ...], torch.Tensor]]


def token_id_inputs(tokenizer) -> BatchInputs:
    """The encoder student's inputs: a batch's padded token ids and attention mask."""
    def inputs(texts: pd.DataFrame, batch: Sequence[int], device: torch.device):
        input_ids, attention_mask, scored = text_batch([texts["input_ids"].iat[i] for i in batch], tokenizer, device)
        return (input_ids, attention_mask), scored
    return inputs


def explained_class(scores: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """[B, T] scores of the class each text explains (`target` [B]) from per-class token scores [B, T, C]."""
    return scores.gather(-1, target.to(scores.device)[:, None, None].expand(*scores.shape[:2], 1))[..., 0]


def _targets(scores: Sequence[Sequence[float]], scored: torch.Tensor) -> torch.Tensor:
    """[B, T] float: each text's target scores at its scored positions, 0 elsewhere."""
    targets = torch.zeros(scored.shape, dtype=torch.float32, device=scored.device)
    for row, values in enumerate(scores):
        positions = torch.nonzero(scored[row]).flatten()
        if len(positions) != len(values):
            raise ValueError(f"text {row} of the batch: {len(values)} target scores for {len(positions)} tokens")
        targets[row, positions] = torch.as_tensor(np.asarray(values, np.float32), device=scored.device)
    return targets


def _batch_scores(net: nn.Module, inputs: BatchInputs, texts: pd.DataFrame, batch: Sequence[int]
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """([B, T] scores of the class each text of the batch explains, [B, T] scored-token mask)."""
    network_inputs, scored = inputs(texts, batch, model_device(net))
    target = torch.as_tensor(texts["predicted"].to_numpy()[list(batch)], dtype=torch.long)
    return explained_class(net(*network_inputs), target), scored


def student_text_scores(net: nn.Module, inputs: BatchInputs, examples: pd.DataFrame, batch_size: int = 32
                        ) -> pd.DataFrame:
    """A text student's token scores (example_id, scores over the scored tokens, as the teacher tables hold them) of
    every example (example_id, input_ids, predicted), in length-grouped batches."""
    ids = list(examples["input_ids"])
    out: list[np.ndarray | None] = [None] * len(ids)
    net.eval()
    with torch.inference_mode():
        for batch in length_grouped_batches([len(i) for i in ids], batch_size, shuffle=False):
            values, scored = _batch_scores(net, inputs, examples, batch)
            values, scored = values.float().cpu(), scored.cpu()
            for row, index in enumerate(batch):
                out[index] = values[row][scored[row]].numpy()
    return pd.DataFrame({"example_id": list(examples["example_id"]), "scores": out})


def encoder_scores(net: EncoderTokenHead, examples: pd.DataFrame, tokenizer, batch_size: int = 32) -> pd.DataFrame:
    """The encoder student's token scores of every example (see `student_text_scores`), where `net` is."""
    return student_text_scores(net, token_id_inputs(tokenizer), examples, batch_size)


def _validation_spearman(net: nn.Module, inputs: BatchInputs, val: pd.DataFrame, batch_size: int) -> float:
    scored = student_text_scores(net, inputs, val, batch_size)
    groups = np.concatenate([np.full(len(s), k) for k, s in enumerate(scored["scores"])])
    values = example_spearman(np.concatenate(list(scored["scores"])),
                              np.concatenate([np.asarray(s, float) for s in val["scores"]]), groups)
    return float(np.nanmean(values)) if np.isfinite(values).any() else float("nan")


def train_text_student(net: nn.Module, inputs: BatchInputs, train: pd.DataFrame, val: pd.DataFrame,
                       learning_rate: float, settings: TrainingSettings, device: torch.device | str = "cpu"
                       ) -> tuple[list[dict], int, float]:
    """Train a text student `net` (its `trained_parameters`, AdamW at `learning_rate`) on `train` texts (example_id,
    input_ids, predicted, scores: the teacher's, one per scored token), each batch read by `inputs`, with the
    students' loss, stopping early on `val`'s mean per-example Spearman with their scores (`settings`: batch size in
    texts, epochs, patience, seed); the net keeps its best epoch and ends on the CPU. Returns (history, best epoch,
    best validation Spearman)."""
    net.to(device)
    optimizer = torch.optim.AdamW(net.trained_parameters(), lr=learning_rate)
    lengths = [len(i) for i in train["input_ids"]]
    scores = list(train["scores"])
    history: list[dict] = []
    best, best_epoch, waited = -np.inf, 0, 0
    best_state = {k: v.detach().clone() for k, v in net.state_dict().items()}
    for epoch in range(1, settings.max_epochs + 1):
        net.train()
        total = 0.0
        for batch in length_grouped_batches(lengths, settings.batch_size, shuffle=True, seed=settings.seed + epoch):
            logits, scored = _batch_scores(net, inputs, train, batch)
            loss = distillation_loss(logits, _targets([scores[i] for i in batch], scored), scored)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(batch)
        value = _validation_spearman(net, inputs, val, 2 * settings.batch_size)
        history.append({"epoch": epoch, "train_loss": total / len(train), "val_spearman": value,
                        "member_val_spearman": [value]})
        if value > best:
            best, best_epoch, waited = value, epoch, 0
            best_state = {k: v.detach().clone() for k, v in net.state_dict().items()}
        else:
            waited += 1
            if waited >= settings.patience:
                break
    net.load_state_dict(best_state)
    net.cpu().eval()
    return history, best_epoch, float(best)
