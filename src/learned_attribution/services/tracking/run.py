"""One MLflow run and everything logged to it: opened or continued (`TrackedRun.open`), parameters flattened and
chunked, metrics (single values, per-epoch steps, per-layer steps), tables, texts, figures and folders as artifacts,
a served model registered, closed. Every call names its run explicitly through `MlflowClient` (runs of several
folds are open at once, so MLflow's fluent "active run" is never used) and goes through `GuardedLogging`, so a
tracking failure is a warning unless `mlflow.strict` is set."""
from __future__ import annotations

import logging
import math
import numbers
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
from mlflow.entities import Metric, Param
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from . import store

logger = logging.getLogger(__name__)

MAX_PARAM_LENGTH = 6000  # MLflow's limit on a param value; longer values are cut
MAX_PARAMS, MAX_METRICS = 100, 1000  # MLflow's limits per log_batch call


def flatten(mapping: Mapping, prefix: str = "") -> dict[str, object]:
    """{"a": {"b": 1}} -> {"a.b": 1}."""
    flat: dict[str, object] = {}
    for key, value in mapping.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def param_values(values: Mapping) -> dict[str, str]:
    """A (nested) mapping as MLflow params: flattened, each value as text of at most `MAX_PARAM_LENGTH`."""
    return {key: str(value)[:MAX_PARAM_LENGTH] for key, value in flatten(values).items()}


def numeric_metrics(values: Mapping) -> dict[str, float]:
    """The finite numbers of a (nested) mapping, booleans as 0/1."""
    metrics = {}
    for key, value in flatten(values).items():
        if isinstance(value, bool | np.bool_):
            metrics[key] = float(value)
        elif isinstance(value, numbers.Real) and not math.isnan(float(value)):
            metrics[key] = float(value)
    return metrics


def step_metrics(prefix: str, history: list[dict], step_key: str = "epoch") -> list[Metric]:
    """A training history (one dict per epoch) as MLflow metrics `<prefix>/<name>` with the epoch as step."""
    stamp = int(time.time() * 1000)
    return [Metric(f"{prefix}/{key}", float(value), stamp, int(row[step_key]))
            for row in history for key, value in row.items()
            if key != step_key and isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(float(value))]


class TrackedRun:
    """An open MLflow run."""

    def __init__(self, client: MlflowClient, run_id: str, guard: store.GuardedLogging):
        self.client, self.run_id, self.guard = client, run_id, guard
        self._logged_params: set[str] = set()

    @classmethod
    def open(cls, client: MlflowClient, experiment_id: str, *, name: str, key: str, resume: bool,
             tags: Mapping[str, str], params: Mapping, raw_inputs: list, commit: str | None,
             guard: store.GuardedLogging) -> "TrackedRun":
        """A resume continues the latest unfinished run with resume key `key` (its tags re-pointed, e.g. at a new
        parent); otherwise, or when there is none, a new run with `tags`, `params`, the git commit and the raw
        files as inputs."""
        found = store.resumable_run(client, experiment_id, key) if resume else None
        if found is not None:
            run = cls(client, found.info.run_id, guard)
            store.reopen_run(client, found)
            for tag, value in tags.items():
                if found.data.tags.get(tag) != value:
                    client.set_tag(run.run_id, tag, value)
            run._logged_params = set(found.data.params)  # same key, same parameters: log only the missing ones
            run.params(params)
            logger.info("MLflow: %s continues %s run %s (%d metrics logged before)", name, found.info.status,
                        run.run_id, len(found.data.metrics))
            return run
        run_id = client.create_run(experiment_id, run_name=name, tags={
            **tags, store.RESUME_TAG: key, **store.process_tags()}).info.run_id
        run = cls(client, run_id, guard)
        run.params(params)
        if commit:
            client.set_tag(run_id, "mlflow.source.git.commit", commit)
        guard(f"the raw input hashes of run {run_id}", client.log_inputs, run_id, raw_inputs)
        return run

    def params(self, values: Mapping) -> None:
        """Parameters (flattened), those not logged to this run yet, in batches."""
        items = [Param(k, v) for k, v in param_values(values).items() if k not in self._logged_params]
        for start in range(0, len(items), MAX_PARAMS):
            self.client.log_batch(self.run_id, params=items[start:start + MAX_PARAMS])
        self._logged_params |= {p.key for p in items}

    def metrics(self, values: Mapping, step: int = 0) -> None:
        """The finite numbers of `values` (flattened) at `step`."""
        stamp = int(time.time() * 1000)
        self._log_metrics([Metric(k, v, stamp, step) for k, v in numeric_metrics(values).items()])

    def steps(self, prefix: str, history: list[dict], step_key: str = "epoch") -> None:
        """A training history as metrics `<prefix>/<name>`, one step per epoch."""
        self._log_metrics(step_metrics(prefix, history, step_key))

    def layer_metrics(self, table: pd.DataFrame, step_column: str = "layer", prefix: str = "by_layer.") -> None:
        """Every numeric column of a per-layer table as a metric `<prefix><column>`, the layer as its step."""
        stamp = int(time.time() * 1000)
        self._log_metrics([Metric(f"{prefix}{key}", value, stamp, int(row[step_column]))
                           for row in table.to_dict(orient="records")
                           for key, value in numeric_metrics(row).items() if key != step_column])

    def _log_metrics(self, metrics: list[Metric]) -> None:
        for start in range(0, len(metrics), MAX_METRICS):
            self.client.log_batch(self.run_id, metrics=metrics[start:start + MAX_METRICS])

    def table(self, artifact: str, frame: pd.DataFrame) -> None:
        self.client.log_text(self.run_id, frame.to_csv(index=False), artifact)

    def text(self, artifact: str, text: str) -> None:
        self.client.log_text(self.run_id, text, artifact)

    def figure(self, artifact: str, figure) -> None:
        self.client.log_figure(self.run_id, figure, artifact)

    def folder(self, folder: str | Path, artifact_path: str | None = None) -> None:
        self.client.log_artifacts(self.run_id, str(folder), artifact_path)

    def tag(self, key: str, value: str) -> None:
        self.client.set_tag(self.run_id, key, value)

    def register(self, model_folder: str | Path, artifact_path: str, name: str, description: str) -> str:
        """Log a saved MLflow model folder under `artifact_path` and register it as a new version of `name`
        (created with `description` when missing); tags the run with the registered model. Returns the version."""
        self.folder(model_folder, artifact_path)
        try:
            self.client.create_registered_model(name, description=description)
        except MlflowException as error:
            if "RESOURCE_ALREADY_EXISTS" not in str(error.error_code):
                raise
        source = f"{self.client.get_run(self.run_id).info.artifact_uri}/{artifact_path}"
        version = self.client.create_model_version(name, source=source, run_id=self.run_id).version
        self.tag("registered_model", f"models:/{name}/{version}")
        logger.info("MLflow: run %s registered as models:/%s/%s", self.run_id, name, version)
        return version

    def close(self, status: str) -> None:
        self.guard(f"the end ({status}) of run {self.run_id}", self.client.set_terminated, self.run_id, status=status)


def tracking_client(tracking_uri: str | None) -> tuple[MlflowClient, str]:
    """A client on the checked store of `tracking_uri` (`MLFLOW_TRACKING_URI` wins), and the store's URI."""
    uri = store.resolve_tracking_uri(tracking_uri)
    store.check_store(uri)
    return MlflowClient(tracking_uri=uri), uri


def experiment(client: MlflowClient, name: str, artifact_location: str | None = None) -> str:
    """The experiment's id (created when missing; a SQLite store's artifacts beside the database by default), its
    stale runs of dead processes ended."""
    found = store.experiment_id(client, name, artifact_location
                                or store.default_artifact_location(client.tracking_uri, name))
    store.end_stale_runs(client, found)
    return found
