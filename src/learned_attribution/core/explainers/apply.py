"""Applying attribution methods to a table of examples: padded batches from a tokenizer, one method over batches
of examples with a retry per example, and the token-score rows that the scoring protocol reads. In process and on
Dask workers alike (`services/distributed.py` calls `explain_batches` on each worker)."""
from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass
from typing import Sequence

import pandas as pd
import torch
from tqdm.auto import tqdm

from learned_attribution.core.models.architectures import mask_token_id
from learned_attribution.core.models.features import frame_token_ids
from learned_attribution.core.models.runner import eval_mode, iter_batches, model_device

from .base import AttributionMethod, Batch, build_method, padded_batch

logger = logging.getLogger(__name__)

FAILURE_COLUMNS = ["method", "example_id", "error"]


def tokenizer_batch(input_ids: Sequence[Sequence[int]], target: Sequence[int] | None, tokenizer) -> Batch:
    """A padded batch of token id lists with the tokenizer's special ids (a "removed" token becomes its mask
    token, else its pad: `architectures.mask_token_id`)."""
    return padded_batch(input_ids, target, pad_token_id=tokenizer.pad_token_id,
                        mask_token_id=mask_token_id(tokenizer), frame_token_ids=frame_token_ids(tokenizer))


@dataclass
class ExplainRun:
    scores: pd.DataFrame  # example_id, method, family, scores (list over non-special tokens), model_calls
    failures: pd.DataFrame  # method, example_id, error
    seconds: dict[str, float]


def explain_examples(model: torch.nn.Module, tokenizer, examples: pd.DataFrame,
                     methods: dict[str, AttributionMethod], batch_size: int) -> ExplainRun:
    """Every method on every example (scores for the `predicted` class), in process, each timed. A batch that
    fails is retried one example at a time; an example that still fails is recorded with its id and error, and the
    rest continue."""
    rows, failures, seconds = [], [], {}
    batches = list(iter_batches(list(examples["input_ids"]), batch_size))
    for name, method in methods.items():
        started = time.perf_counter()
        method_rows, method_failures = explain_batches(model, tokenizer, examples, batches, method, name,
                                                       progress=f"explain {name}")
        rows.extend(method_rows)
        failures.extend(method_failures)
        seconds[name] = time.perf_counter() - started
        logger.info("%s: %d examples in %.1f s", name, len(examples), seconds[name])
    return explain_run(rows, failures, seconds)


def explain_run(rows: list[dict], failures: list[dict], seconds: dict[str, float]) -> ExplainRun:
    """The tables of an explanation run (failures logged)."""
    failure_frame = pd.DataFrame(failures, columns=FAILURE_COLUMNS)
    if len(failure_frame):
        logger.warning("%d explanations failed:\n%s", len(failure_frame), failure_frame.to_string(index=False))
    return ExplainRun(pd.DataFrame(rows), failure_frame, seconds)


def explain_batches(model: torch.nn.Module, tokenizer, examples: pd.DataFrame, batches: Sequence[Sequence[int]],
                    method: AttributionMethod, name: str, progress: str | None = None) -> tuple[list[dict], list[dict]]:
    """One method on the given batches (positional indices into `examples`): score rows in batch order and
    failures (a failing batch is retried one example at a time)."""
    rows: list[dict] = []
    failures: list[dict] = []
    for batch_index in tqdm(batches, desc=progress, leave=False, disable=progress is None):
        for chunk in _explain_with_retry(model, tokenizer, examples, list(batch_index), method, failures, name):
            rows.extend(chunk)
    return rows, failures


def _explain_with_retry(model, tokenizer, examples, batch_index, method, failures, name):
    try:
        yield _explain_rows(model, tokenizer, examples.iloc[batch_index], method, name)
        return
    except Exception:  # noqa: BLE001 - any library error on one example must not stop the others
        if len(batch_index) == 1:
            failures.append({"method": name, "example_id": examples.iloc[batch_index[0]]["example_id"],
                             "error": _last_error()})
            return
    for index in batch_index:
        try:
            yield _explain_rows(model, tokenizer, examples.iloc[[index]], method, name)
        except Exception:  # noqa: BLE001
            failures.append({"method": name, "example_id": examples.iloc[index]["example_id"], "error": _last_error()})


def _last_error() -> str:
    error = sys.exc_info()[1]
    return f"{type(error).__name__}: {error}"


def _explain_rows(model, tokenizer, rows: pd.DataFrame, method: AttributionMethod, name: str) -> list[dict]:
    batch = tokenizer_batch(list(rows["input_ids"]), rows["predicted"].tolist(), tokenizer).to(model_device(model))
    with eval_mode(model):
        attribution = method.explain(model, batch)
    scores = attribution.scores.detach().float().cpu().numpy()
    keep = ~batch.special_mask.cpu().numpy()
    out = []
    for row, (_, record) in enumerate(rows.iterrows()):
        out.append({"example_id": record["example_id"], "method": name, "family": method.family,
                    "scores": scores[row][keep[row]].tolist(), "model_calls": attribution.model_calls})
    return out


def resolve_method(name: str, *, learned: dict | None = None, layer: int, vocabulary,
                   settings: dict | None = None) -> AttributionMethod:
    """The method registered as `name`: a trained learned model of `learned` (name -> `LearnedModel`: a fold's
    `expnet_plus` and `expnet_paper`, an amortized `student`) reading `layer` with the tokenizer's `vocabulary`
    (`signals.token_vocabulary`), or a baseline built with its `settings`."""
    if name in (learned or {}):
        return build_method(name, model=learned[name], layer=layer, vocabulary=vocabulary)
    return build_method(name, **(settings or {}))
