"""Applying attribution methods to a table of examples: padded batches from a tokenizer, one method over batches
of examples with a retry per example, and the token-score rows that the scoring protocol reads. In process and on
Dask workers alike (`services/distributed.py` calls `explain_batches` on each worker)."""
from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import pandas as pd
import torch
from tqdm.auto import tqdm

from learned_attribution.core.data.modes import explained_classes
from learned_attribution.core.models.architectures import mask_token_id
from learned_attribution.core.models.features import frame_token_ids
from learned_attribution.core.models.runner import eval_mode, iter_batches, model_device

from .base import AttributionMethod, Batch, build_method, padded_batch
from .passes import PassMethod, explain_together

logger = logging.getLogger(__name__)

FAILURE_COLUMNS = ["method", "example_id", "error"]


def tokenizer_batch(input_ids: Sequence[Sequence[int]], target: Sequence[int] | None, tokenizer, *,
                    contrast: Sequence[int] | None = None) -> Batch:
    """A padded batch of token id lists with the tokenizer's special ids (a "removed" token becomes its mask
    token, else its pad: `architectures.mask_token_id`); `contrast`: a contrast class per text (None: none)."""
    return padded_batch(input_ids, target, pad_token_id=tokenizer.pad_token_id,
                        mask_token_id=mask_token_id(tokenizer), frame_token_ids=frame_token_ids(tokenizer),
                        contrast=contrast)


@dataclass
class ExplainRun:
    scores: pd.DataFrame  # example_id, method, family, scores (list over non-special tokens), model_calls
    failures: pd.DataFrame  # method, example_id, error
    seconds: dict[str, float]  # method -> seconds it took alone
    timed: dict[str, int] = field(default_factory=dict)  # method -> the examples its seconds cover


def explain_examples(model: torch.nn.Module, tokenizer, examples: pd.DataFrame,
                     methods: dict[str, AttributionMethod], batch_size: int,
                     timing: pd.DataFrame | None = None) -> ExplainRun:
    """Every method on every example (scores for the class each is explained for: `modes.explained_classes`), in
    process.

    Without `timing`, each method runs alone and is timed on every example. With `timing` (some of the examples),
    the methods that read one pass of the classifier (`passes.PassMethod`) share it, one forward and one backward
    pass per batch for all of them, and each is then timed alone on the `timing` examples (its cost as a user running
    it alone pays it; `ExplainRun.timed` says on how many). A batch that fails is retried one example at a time; an
    example that still fails is recorded with its id and error for every method of the pass, and the rest continue."""
    rows, failures, seconds, timed = [], [], {}, {}
    batches = list(iter_batches(list(examples["input_ids"]), batch_size))
    shared = {n: m for n, m in methods.items() if isinstance(m, PassMethod)} if timing is not None else {}
    if len(shared) < 2:
        shared = {}
    groups = ([shared] if shared else []) + [{name: method} for name, method in methods.items() if name not in shared]
    for group in groups:
        started = time.perf_counter()
        group_rows, group_failures = explain_batches(model, tokenizer, examples, batches, group,
                                                     progress=f"explain {', '.join(group)}")
        rows.extend(group_rows)
        failures.extend(group_failures)
        elapsed = time.perf_counter() - started
        if group is shared:
            logger.info("%s: one shared pass over %d examples in %.1f s", ", ".join(group), len(examples), elapsed)
        else:
            seconds.update(dict.fromkeys(group, elapsed))
            timed.update(dict.fromkeys(group, len(examples)))
            logger.info("%s: %d examples in %.1f s", ", ".join(group), len(examples), elapsed)
    if shared:
        timing_batches = list(iter_batches(list(timing["input_ids"]), batch_size))
        for name, method in shared.items():
            started = time.perf_counter()
            explain_batches(model, tokenizer, timing, timing_batches, {name: method})
            seconds[name], timed[name] = time.perf_counter() - started, len(timing)
        logger.info("timed alone on %d examples: %s", len(timing),
                    ", ".join(f"{name} {seconds[name]:.1f} s" for name in shared))
    order = {name: i for i, name in enumerate(methods)}
    rows.sort(key=lambda row: order[row["method"]])  # stable: each method's rows in batch order, as run alone
    return explain_run(rows, failures, {name: seconds[name] for name in methods},
                       {name: timed[name] for name in methods})


def explain_run(rows: list[dict], failures: list[dict], seconds: dict[str, float],
                timed: dict[str, int] | None = None) -> ExplainRun:
    """The tables of an explanation run (failures logged)."""
    failure_frame = pd.DataFrame(failures, columns=FAILURE_COLUMNS)
    if len(failure_frame):
        logger.warning("%d explanations failed:\n%s", len(failure_frame), failure_frame.to_string(index=False))
    return ExplainRun(pd.DataFrame(rows), failure_frame, seconds, timed or {})


def explain_batches(model: torch.nn.Module, tokenizer, examples: pd.DataFrame, batches: Sequence[Sequence[int]],
                    methods: Mapping[str, AttributionMethod], progress: str | None = None
                    ) -> tuple[list[dict], list[dict]]:
    """`methods` (name -> method; together: `passes.explain_together`) on the given batches (positional indices into
    `examples`): score rows in batch order and failures (a failing batch is retried one example at a time)."""
    rows: list[dict] = []
    failures: list[dict] = []
    for batch_index in tqdm(batches, desc=progress, leave=False, disable=progress is None):
        for chunk in _explain_with_retry(model, tokenizer, examples, list(batch_index), methods, failures):
            rows.extend(chunk)
    return rows, failures


def _explain_with_retry(model, tokenizer, examples, batch_index, methods, failures):
    try:
        yield _explain_rows(model, tokenizer, examples.iloc[batch_index], methods)
        return
    except Exception:  # noqa: BLE001 - any library error on one example must not stop the others
        if len(batch_index) == 1:
            failures.extend(_failures(methods, examples.iloc[batch_index[0]]["example_id"]))
            return
    for index in batch_index:
        try:
            yield _explain_rows(model, tokenizer, examples.iloc[[index]], methods)
        except Exception:  # noqa: BLE001
            failures.extend(_failures(methods, examples.iloc[index]["example_id"]))


def _failures(methods: Mapping[str, AttributionMethod], example_id) -> list[dict]:
    error = sys.exc_info()[1]
    return [{"method": name, "example_id": example_id, "error": f"{type(error).__name__}: {error}"}
            for name in methods]


def _explain_rows(model, tokenizer, rows: pd.DataFrame, methods: Mapping[str, AttributionMethod]) -> list[dict]:
    batch = tokenizer_batch(list(rows["input_ids"]), explained_classes(rows).tolist(), tokenizer).to(model_device(model))
    with eval_mode(model):
        attributions = explain_together(model, batch, methods)
    keep = ~batch.special_mask.cpu().numpy()
    out = []
    for name, attribution in attributions.items():
        scores = attribution.scores.detach().float().cpu().numpy()
        for row, example_id in enumerate(rows["example_id"]):
            out.append({"example_id": example_id, "method": name, "family": methods[name].family,
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
