"""Nodes of the record pipeline: thin calls into `services/record`, one fold per namespace."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pandas as pd

from learned_attribution.core.models.loading import TrainedClassifier
from learned_attribution.services.config import (ComputeSettings, RecordSettings, ScoringSettings, compute_settings,
                                                 record_settings, scoring_settings)
from learned_attribution.services.deadline import invocation_deadline
from learned_attribution.services.evaluation.protocol import scored_examples
from learned_attribution.services.record.baselines import RecordFold, RecordUnfinished, main_job_part, record_fold
from learned_attribution.services.record.parts import hold_record_lock
from learned_attribution.services.record.report import read_record, record_markdown, record_table

logger = logging.getLogger(__name__)


def record_run_settings(baseline_record: dict[str, Any], crosstask: dict[str, Any], layer: int, seed: int,
                        compute: dict[str, Any], parts: Path
                        ) -> tuple[RecordSettings, ScoringSettings, ComputeSettings, float]:
    """The record's parameter blocks, parsed once, and this invocation's deadline (`baseline_record.minutes` from
    now); takes the record folder's lock for the rest of the run (a second run at once refuses, naming this one)."""
    scoring = scoring_settings(crosstask, layer, seed)
    settings = record_settings(baseline_record, scoring)
    hold_record_lock(parts, "kedro run --pipeline record")
    return settings, scoring, compute_settings(compute), invocation_deadline(settings.minutes)


def record_baselines(classifier: TrainedClassifier, predictions: pd.DataFrame, budget: dict[str, float],
                     token_scores: pd.DataFrame, gold_token_scores: pd.DataFrame, parts: Path,
                     settings: RecordSettings, scoring: ScoringSettings, compute: ComputeSettings, deadline: float,
                     *, task: str) -> pd.DataFrame:
    """The fold's main-job part, then every record method on every scored example in parts; the progress table
    (method, parts, finished). Raises `RecordUnfinished` when the minutes ran out first (the parts are kept)."""
    fold = RecordFold(task, classifier, scored_examples(predictions, scoring), budget["rho"])
    main_job_part(fold, parts, token_scores, gold_token_scores, recorded=list(settings.methods))
    rows = []
    for name, method_settings in settings.methods.items():
        progress = record_fold(fold, parts, {name: method_settings}, part_size=settings.part_size,
                               layer=scoring.layer, batch_size=scoring.batch_size, compute=compute, deadline=deadline)
        rows.append({"method": name, "parts": progress.parts, "finished": progress.finished,
                     "computed": progress.computed, "seconds": round(progress.seconds, 1)})
        logger.info("record %s %s: %d of %d parts finished (%d computed in %.0f s)", task, name, progress.finished,
                    progress.parts, progress.computed, progress.seconds)
        if progress.finished < progress.parts:
            raise RecordUnfinished(f"record {task}: {name} has {progress.finished} of {progress.parts} parts in "
                                   f"{Path(parts) / task} when this invocation's minutes (baseline_record.minutes) "
                                   "ran out; the parts are kept: commit them, and run the same command again to "
                                   "continue")
    return pd.DataFrame(rows)


def record_report(parts: Path, scoring: ScoringSettings, *progress: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The baselines table of everything the record holds (every fold, both modes), as CSV and markdown."""
    rows, part_table = read_record(parts)
    table = record_table(rows, part_table, scoring.n_boot, scoring.boot_seed)
    return table, record_markdown(table)
