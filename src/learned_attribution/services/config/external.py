"""`evaluate_external`: a user's rationale file scored like a held-out fold (the file, the classifier's task, the
fold, the cap)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from learned_attribution.core.tasks import FOLDS, TASKS, held_out_task

from .blocks import block, positive_int

REQUIRED = ("file", "classifier_task", "expnet_fold")
EXTERNAL_KEYS = (*REQUIRED, "max_examples", "batch_size", "mlflow_experiment")


@dataclass(frozen=True)
class ExternalSettings:
    """`evaluate_external`: the rationale file (relative to the working directory), the task whose classifier is
    explained, the fold whose learned explainers and budget are used, the seeded cap on scored examples, the
    prediction batch size and the MLflow experiment."""

    file: str
    classifier_task: str
    expnet_fold: str
    max_examples: int | None
    batch_size: int
    mlflow_experiment: str

    @property
    def held_out_task(self) -> str:
        """The fold's held-out task (heldout_sst2 -> sst2)."""
        return held_out_task(self.expnet_fold)

    @property
    def partition(self) -> str:
        """File name (no suffix) of this evaluation's metrics under 08_reporting/external/."""
        return f"metrics_{Path(self.file).stem}_{self.classifier_task}_{self.expnet_fold}"

    @property
    def title(self) -> str:
        """The run's title (its metrics chart's)."""
        return f"{Path(self.file).name}: {self.classifier_task} classifier, {self.expnet_fold} ExpNet"


def external_settings(values: Mapping[str, Any] | None) -> ExternalSettings:
    """`params:evaluate_external` (defaults in conf/base/parameters_evaluate_external.yml); an unset file, task or
    fold is named with the command that sets it."""
    values = block(values, "evaluate_external", EXTERNAL_KEYS)
    missing = [key for key in REQUIRED if values[key] in (None, "")]
    if missing:
        raise ValueError(f"parameter(s) {', '.join('evaluate_external.' + k for k in missing)} not set; pass them "
                         f'with kedro run --pipeline evaluate_external --params "evaluate_external.file=...,'
                         f'evaluate_external.classifier_task=...,evaluate_external.expnet_fold=..."')
    if values["classifier_task"] not in TASKS:
        raise ValueError(f"parameter evaluate_external.classifier_task must be one of {list(TASKS)}, got "
                         f"{values['classifier_task']!r}")
    if values["expnet_fold"] not in FOLDS:
        raise ValueError(f"parameter evaluate_external.expnet_fold must be one of {list(FOLDS)}, got "
                         f"{values['expnet_fold']!r}")
    return ExternalSettings(
        file=str(values["file"]), classifier_task=values["classifier_task"], expnet_fold=values["expnet_fold"],
        max_examples=positive_int(values["max_examples"], "evaluate_external.max_examples", none=True),
        batch_size=positive_int(values["batch_size"], "evaluate_external.batch_size"),
        mlflow_experiment=str(values["mlflow_experiment"]))
