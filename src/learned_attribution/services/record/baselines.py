"""Every baseline on every example of a fold, in committed parts: the methods the main job runs on a seeded sample
only (integrated gradients, occlusion, LIME, KernelSHAP) run on every scored rationale test example, `part_size`
examples a part, in both modes (predicted; gold for the mispredicted examples, the correct ones sharing predicted
mode's rows), and each part is stored as per-example metric rows (`RECORD_COLUMNS`, no token scores) in the record
folder (`parts.py`: CSV + sidecar with checksum and fingerprint). The main job's own per-example rows (every method it
runs on every example, both learned explainers included) are one more part per fold (`main_job_part`).

A part is keyed by what its rows depend on: the method and its settings, the explained layer and the matched budget,
the classifier's weights, the part's examples, the source of the explainers and metrics, and the kernels. A part
whose key differs is recomputed, never mixed in. With a deadline (`invocation_deadline`), no part is started that would
end after it and `RecordUnfinished` says what is left; the same command run again continues from the finished
parts. With `compute.dask`, each part's methods run as Dask tasks; `compute.device` places the classifier (a GPU
where there is one).
"""
from __future__ import annotations

import logging
import math
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Collection, Mapping

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

import learned_attribution.core.explainers as explainers_package
import learned_attribution.core.metrics as metrics_package
from learned_attribution.core.data.modes import GOLD, PREDICTED, recomputed
from learned_attribution.core.explainers.apply import explain_examples, resolve_method
from learned_attribution.core.metrics.plausibility import evaluate
from learned_attribution.core.models.artifacts import classifier_fingerprint
from learned_attribution.core.models.loading import TrainedClassifier
from learned_attribution.core.models.runner import kernels_description
from learned_attribution.core.models.signals import token_vocabulary

from ..config import ComputeSettings
from ..deadline import starts_part
from ..distributed import dask_client, explain_on_dask
from ..evaluation.protocol import gold_labels, method_masks
from .parts import digest, finished, source_digest, write_part

logger = logging.getLogger(__name__)

RECORD_COLUMNS = ["example_id", "method", "mode", "correct", "n_tokens", "n_gold", "auroc", "auprc", "f1", "error"]
MAIN_JOB = "main_job"  # the part name of the main job's own per-example rows
# The code a part's numbers come from (the explainers and the metrics): a change to it recomputes the parts; a change
# to how parts are run or stored (this module, parts.py) does not.
CODE = [*Path(explainers_package.__file__).parent.glob("*.py"), *Path(metrics_package.__file__).parent.glob("*.py")]


class RecordUnfinished(RuntimeError):
    """This invocation's minutes ran out before every part was computed. The finished parts are kept (and are what
    to commit); the same command run again continues."""


@dataclass(frozen=True)
class RecordFold:
    """A fold as the record reads it: its held-out task, classifier, scored rationale test examples (`example_id`,
    `input_ids`, `label`, `predicted`, `correct`, `token_labels`) and matched budget."""

    task: str
    classifier: TrainedClassifier
    examples: pd.DataFrame
    rho: float

    def run(self) -> dict[str, Any]:
        """What every part of this fold shares: its classifier, examples and budget (a report refuses to mix)."""
        return {"task": self.task, "classifier": classifier_fingerprint(self.classifier.model),
                "examples": examples_digest(self.examples), "rho": round(float(self.rho), 6)}


@dataclass
class FoldProgress:
    task: str
    parts: int  # planned
    finished: int  # finished now (this call's and earlier ones')
    computed: int  # in this call
    seconds: float  # of this call's parts


def examples_digest(examples: pd.DataFrame) -> str:
    return digest([(str(i), list(map(int, ids)), int(p), int(y), list(map(int, t))) for i, ids, p, y, t in
                   zip(examples["example_id"], examples["input_ids"], examples["predicted"], examples["label"],
                       examples["token_labels"])])


def part_path(folder: Path, task: str, method: str, index: int) -> Path:
    return folder / task / method / f"part-{index:03d}.csv"


def example_rows(scores: pd.DataFrame, failures: pd.DataFrame, examples: pd.DataFrame, rho: float,
                 mode: str) -> pd.DataFrame:
    """Per-example metric rows (`RECORD_COLUMNS`) of every method in `scores` (example_id, method, scores) on
    `examples`: AUROC, AUPRC and F1 at the matched budget `rho` (top-k), against each example's human rationale; a
    failed explanation is a row with its error and no metric."""
    by_id = examples.set_index("example_id")
    frames = []
    for method, group in scores.groupby("method", sort=False):
        ids = group["example_id"].tolist()
        token_scores = [np.asarray(s, dtype=float) for s in group["scores"]]
        gold = [gold_labels(by_id.at[i, "token_labels"]) for i in ids]
        per_example = evaluate(token_scores, gold, method_masks(token_scores, rho)).per_example
        frames.append(pd.DataFrame({"example_id": ids, "method": method, "mode": mode,
                                    "correct": by_id.loc[ids, "correct"].astype(bool).to_numpy(),
                                    "n_tokens": per_example["n_tokens"], "n_gold": per_example["n_gold"],
                                    "auroc": per_example["auroc"], "auprc": per_example["auprc"],
                                    "f1": per_example["f1"], "error": None}))
    if len(failures):
        frames.append(pd.DataFrame({"example_id": failures["example_id"], "method": failures["method"], "mode": mode,
                                    "correct": by_id.loc[failures["example_id"], "correct"].astype(bool).to_numpy(),
                                    "error": failures["error"].astype(str)}))
    rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=RECORD_COLUMNS)
    return rows.reindex(columns=RECORD_COLUMNS)


def _explain(fold: RecordFold, rows: pd.DataFrame, name: str, settings: Mapping[str, Any], method,
             batch_size: int, client, compute: ComputeSettings):
    if client is not None:
        return explain_on_dask(client, fold.classifier, rows, {name: dict(settings)}, batch_size, compute.dask)
    return explain_examples(fold.classifier.model, fold.classifier.tokenizer, rows, {name: method}, batch_size)


def compute_part(fold: RecordFold, rows: pd.DataFrame, name: str, settings: Mapping[str, Any], layer: int,
                 batch_size: int, compute: ComputeSettings, client=None) -> tuple[pd.DataFrame, int]:
    """One method on one part's examples in both modes: (its per-example rows, explanations computed)."""
    method = resolve_method(name, layer=layer, vocabulary=token_vocabulary(fold.classifier.tokenizer),
                            settings=dict(settings))
    predicted = _explain(fold, rows, name, settings, method, batch_size, client, compute)
    out = [example_rows(predicted.scores, predicted.failures, fold.examples, fold.rho, PREDICTED)]
    wrong = recomputed(rows)
    explanations = len(rows)
    if len(wrong) and not method.class_agnostic:
        gold = _explain(fold, wrong, name, settings, method, batch_size, client, compute)
        out.append(example_rows(gold.scores, gold.failures, fold.examples, fold.rho, GOLD))
        explanations += len(wrong)
    return pd.concat(out, ignore_index=True), explanations


def record_fold(fold: RecordFold, folder: str | Path, methods: Mapping[str, Mapping[str, Any]], *, part_size: int,
                layer: int, batch_size: int, compute: ComputeSettings, deadline: float = math.inf,
                progress: bool = True) -> FoldProgress:
    """Every method of `methods` (name -> settings) on every example of `fold`, `part_size` examples a part, into
    `folder`/<task>/<method>/part-NNN.csv; finished parts of the same key are kept. Stops starting parts at the
    `deadline` (returns the progress; `finished < parts` when it stopped)."""
    if isinstance(part_size, bool) or not isinstance(part_size, int) or part_size < 1:
        raise ValueError(f"parameter baseline_record.part_size={part_size!r}: must be a positive integer")
    folder = Path(folder)
    examples = fold.examples.sort_values("example_id").reset_index(drop=True)
    run = fold.run()
    code = source_digest(CODE)
    kernels = kernels_description(compute.device, compute.bf16)
    plan = []
    for name, settings in methods.items():
        for index, start in enumerate(range(0, len(examples), part_size)):
            rows = examples.iloc[start:start + part_size]
            key = digest(name, dict(settings), layer, run["classifier"], run["rho"], examples_digest(rows), code,
                         kernels)
            plan.append((part_path(folder, fold.task, name, index), name, settings, rows, key))
    todo = [p for p in plan if not finished(p[0], p[4])]
    if len(todo) < len(plan):
        logger.info("record %s: %d of %d parts already finished in %s", fold.task, len(plan) - len(todo), len(plan),
                    folder / fold.task)
    compute.place(fold.classifier.model)
    started, computed = time.perf_counter(), 0
    with (dask_client(compute.dask) if compute.dask is not None and todo else nullcontext()) as client:
        for path, name, settings, rows, key in tqdm(todo, desc=f"record {fold.task}", unit="part",
                                                    disable=not progress):
            if not starts_part(deadline, time.time(), (time.perf_counter() - started) / computed if computed
                               else None):
                break
            part_started = time.perf_counter()
            table, explanations = compute_part(fold, rows, name, settings, layer, batch_size, compute, client)
            write_part(path, table, fingerprint=key, seconds=time.perf_counter() - part_started,
                       explanations=explanations, kernels=kernels, run=run)
            computed += 1
    return FoldProgress(fold.task, len(plan), len(plan) - len(todo) + computed, computed,
                        time.perf_counter() - started)


def main_job_part(fold: RecordFold, folder: str | Path, token_scores: pd.DataFrame,
                  gold_token_scores: pd.DataFrame, recorded: Collection[str] = ()) -> Path:
    """The main job's per-example rows of `fold` (every method it ran on every example, both modes: `token_scores`
    and `gold_token_scores`, the fold's predicted- and gold-mode token scores; not the `recorded` methods, which
    the record's own parts hold) as the fold's `main_job` part; kept when its key (the token scores, examples and
    budget) is unchanged."""
    path = part_path(Path(folder), fold.task, MAIN_JOB, 0)
    full = token_scores[~token_scores["method"].isin(_sampled(token_scores) | set(recorded))]
    gold = gold_token_scores[gold_token_scores["method"].isin(set(full["method"]))]
    wrong = set(recomputed(fold.examples)["example_id"])
    gold = gold[gold["example_id"].isin(wrong)]
    run = fold.run()
    key = digest(_scores_digest(full), _scores_digest(gold), run, source_digest(CODE))
    if not finished(path, key):
        started = time.perf_counter()
        rows = pd.concat([example_rows(full, pd.DataFrame(columns=["method", "example_id", "error"]),
                                       fold.examples, fold.rho, PREDICTED),
                          example_rows(gold, pd.DataFrame(columns=["method", "example_id", "error"]),
                                       fold.examples, fold.rho, GOLD)], ignore_index=True)
        write_part(path, rows, fingerprint=key, seconds=time.perf_counter() - started, explanations=0,
                   kernels="the main job's", run=run)
    return path


def _sampled(token_scores: pd.DataFrame) -> set[str]:
    """The methods the main job ran on its seeded sample only (fewer examples than the fold's others)."""
    counts = token_scores.groupby("method")["example_id"].nunique()
    return set(counts[counts < counts.max()].index)


def _scores_digest(scores: pd.DataFrame) -> str:
    ordered = scores.sort_values(["method", "example_id"])
    return digest([(m, str(i), [round(float(v), 6) for v in s]) for m, i, s in
                   zip(ordered["method"], ordered["example_id"], ordered["scores"])])

