"""The steps the cost benchmark (attribution_throughput.py) times, one batch each: a plain classification forward
pass, an explainer's `explain`, and the public API end to end on word lists; and the batches they run on.

Each step waits for the GPU's queued kernels before it returns, so its time is its whole work.
"""
from __future__ import annotations

from typing import Sequence

import pandas as pd
import torch

from learned_attribution.core.models.runner import model_device

from harness import Step, length_batches


def make_batches(examples: pd.DataFrame, batch_size: int, tokenizer, targets: dict[int, int] | None = None,
                 device: torch.device | None = None):
    """[(row indices, Batch)] in the pipeline's length-sorted order, on `device`; targets default to class 0."""
    from learned_attribution.core.explainers.apply import tokenizer_batch

    ids = list(examples["input_ids"])
    out = []
    for indices in length_batches(examples, batch_size):
        target = [targets[i] if targets else 0 for i in indices]
        batch = tokenizer_batch([ids[i] for i in indices], target, tokenizer)
        out.append((indices, batch if device is None else batch.to(device)))
    return out


def synchronize(model: torch.nn.Module) -> None:
    """Wait for the GPU's queued kernels, so a step's time is its whole work (a no-op on the CPU)."""
    device = model_device(model)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def classify_steps(model: torch.nn.Module, batches) -> list[Step]:
    """Per batch: the plain classification forward pass (logits, no attentions) under inference mode."""

    def step_for(indices, batch) -> Step:
        def run() -> int:
            with torch.inference_mode():
                model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
            synchronize(model)
            return len(indices)
        return run

    return [step_for(indices, batch) for indices, batch in batches]


class ModelCallTally:
    """Model calls per example reported by an explainer's `Attribution`s, over every batch it explained."""

    def __init__(self) -> None:
        self.calls, self.rows = 0, 0

    @property
    def per_example(self) -> float:
        return self.calls / self.rows if self.rows else float("nan")


def explainer_steps(model: torch.nn.Module, explainer, batches, tally: ModelCallTally) -> list[Step]:
    """Per batch: `explainer.explain` (scores for the predicted class); non-finite scores are an error."""

    def step_for(indices, batch) -> Step:
        def run() -> int:
            attribution = explainer.explain(model, batch)
            synchronize(model)
            if not torch.isfinite(attribution.scores[~batch.special_mask]).all():
                raise FloatingPointError(f"{explainer.name}: non-finite scores in the batch of examples {indices}")
            tally.calls += attribution.model_calls * len(indices)
            tally.rows += len(indices)
            return len(indices)
        return run

    return [step_for(indices, batch) for indices, batch in batches]


def words_of(input_ids: Sequence[int], tokenizer) -> list[str]:
    """The words an id sequence spells, its frame tokens ([CLS]/[SEP], <s>/</s>, padding) dropped: its pieces
    grouped into words by the tokenizer's own word-boundary convention (`architectures.token_convention`: WordPiece's
    `##` continues a word, byte-level BPE's `Ġ` and SentencePiece's `▁` start one; the first piece always starts
    one, a special token such as [UNK] is a word of its own), each word the tokenizer's own string of its pieces.
    Given as a word list, the API re-tokenises them into the same ids (every word with its word-start marker, as
    the pipeline tokenises its word lists), so its entries explain the same tokens as the others."""
    from learned_attribution.core.models.architectures import token_convention
    from learned_attribution.core.models.features import frame_token_ids

    convention = token_convention(tokenizer)
    special = set(getattr(tokenizer, "all_special_tokens", []))
    frame = set(frame_token_ids(tokenizer))
    groups: list[list[str]] = []
    for index, token in zip(input_ids, tokenizer.convert_ids_to_tokens(list(input_ids))):
        if index in frame:
            continue
        starts = not groups or token in special or groups[-1][-1] in special or not convention.read(token).continues
        if starts:
            groups.append([token])
        else:
            groups[-1].append(token)
    words = [tokenizer.convert_tokens_to_string(group).strip() for group in groups]
    return [word for word in words if word]


def api_steps(explainer, method: str, variant, examples: pd.DataFrame, batch_indices, tokenizer) -> list[Step]:
    """Per batch: the public API end to end (tokenise the words, classify, explain, aggregate to words) for
    one method; for `expnet_plus`, with `variant` as the fold's ExpNet+."""
    word_lists = [words_of(ids, tokenizer) for ids in examples["input_ids"]]

    def step_for(indices) -> Step:
        def run() -> int:
            if variant is not None:  # the fold's ExpNet+ explainer, applying this variant's network
                explainer.learned["expnet_plus"] = explainer.method("expnet_plus").model = variant
            explainer.explain([word_lists[i] for i in indices], methods=[method], batch_size=len(indices))
            synchronize(explainer.classifier.model)
            return len(indices)
        return run

    return [step_for(indices) for indices in batch_indices]

