"""Talking to MLflow: which store, whether it works, experiments (and a copied store's foreign artifact root),
runs left behind by dead processes and continuing them on a resume, and logging that warns instead of stopping
the computation, and one-shot runs of parameters, metrics and artifacts (`log_run`). The fold hook (hooks.py),
the AFN and amortize pipelines and evaluate_external all go through here; every call names its run explicitly (`MlflowClient`, no fluent
active run).
"""
from __future__ import annotations

import logging
import math
import numbers
import os
import socket
import time
from collections.abc import Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator
from urllib.parse import urlparse

import numpy as np

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

logger = logging.getLogger(__name__)

PARAMETER = "mlflow.tracking_uri"
DEFAULT_URI = "sqlite:///mlflow.db"
# The MLflow 3 UI opens experiments of this kind on the runs table (not the GenAI traces overview).
EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}
HOST_TAG, PID_TAG = "learned_attribution.host", "learned_attribution.pid"
# A run's identity for a resume (`resume_key`), how often it was continued and when last.
RESUME_TAG = "learned_attribution.resume_key"
RESUMED_TAG, RESUMED_AT_TAG = "learned_attribution.resumed_count", "learned_attribution.resumed_at"


class TrackingStoreError(RuntimeError):
    """The configured MLflow store cannot be used; the message names the parameter and the path."""


def resolve_tracking_uri(configured: str | None) -> str:
    """`MLFLOW_TRACKING_URI` from the environment wins over the `mlflow.tracking_uri` parameter."""
    return os.environ.get("MLFLOW_TRACKING_URI") or configured or DEFAULT_URI


def _sqlite_path(uri: str) -> Path | None:
    """The database file of a `sqlite:///path` or `sqlite:///file:path?mode=...&uri=true` URI."""
    if urlparse(uri).scheme != "sqlite" or not uri.startswith("sqlite:///"):
        return None
    path = uri[len("sqlite:///"):].split("?", 1)[0]
    return Path(path.removeprefix("file:"))


def _probe_sqlite_write(uri: str) -> None:
    """Create a table inside a transaction and roll it back: fails on a read-only store, leaves nothing."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(uri)
    try:
        with engine.connect() as connection:
            connection.exec_driver_sql("BEGIN")
            connection.exec_driver_sql("CREATE TABLE learned_attribution_write_probe (x INTEGER)")
            connection.exec_driver_sql("ROLLBACK")
    finally:
        engine.dispose()


@contextmanager
def _quick_http_probe(uri: str) -> Iterator[None]:
    """For a tracking server, one short attempt instead of MLflow's minutes of retries with back-off, so a
    server that is down stops the run at its start in seconds."""
    if urlparse(uri).scheme not in ("http", "https"):
        yield
        return
    saved = {key: os.environ.get(key) for key in ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT")}
    os.environ.update({"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1", "MLFLOW_HTTP_REQUEST_TIMEOUT": "15"})
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def check_store(uri: str) -> None:
    """Raise `TrackingStoreError` (one line naming `mlflow.tracking_uri` and the path) unless the store is
    reachable and writable: for SQLite the database's folder must exist (MLflow would otherwise fail deep
    inside SQLAlchemy, or silently create a store elsewhere) and the file be writable; a tracking server
    (http/https) or a PostgreSQL database (postgresql+psycopg://) must answer."""
    from mlflow.tracking import MlflowClient

    database = _sqlite_path(uri)
    if database is not None:
        folder = database.parent if str(database.parent) else Path(".")
        if not folder.is_dir():
            raise TrackingStoreError(f"{PARAMETER}={uri}: the folder {folder} of the SQLite store does not exist "
                                     "(a typo in the path?)")
        target = database if database.exists() else folder
        if not os.access(target, os.W_OK):
            raise TrackingStoreError(f"{PARAMETER}={uri}: {target} is not writable")
    try:
        with _quick_http_probe(uri):
            MlflowClient(tracking_uri=uri).search_experiments(max_results=1)
        if database is not None:
            _probe_sqlite_write(uri)
    except Exception as error:  # noqa: BLE001 - any store failure becomes one clear line
        first = str(error).strip().splitlines()[0][:300] if str(error).strip() else type(error).__name__
        raise TrackingStoreError(f"{PARAMETER}={uri}: the MLflow store cannot be used ({type(error).__name__}: "
                                 f"{first})") from None


def experiment_id(client, name: str, artifact_location: str | None = None) -> str:
    """The experiment's id, created when missing, marked as a model-training experiment; an existing one whose
    artifacts go outside this project (a copied store) gets a warning (`warn_foreign_artifact_root`)."""
    found = client.get_experiment_by_name(name)
    experiment = found.experiment_id if found else client.create_experiment(name, artifact_location=artifact_location)
    for key, value in EXPERIMENT_KIND.items():
        if not found or found.tags.get(key) != value:
            client.set_experiment_tag(experiment, key, value)
    if found:
        warn_foreign_artifact_root(client.tracking_uri, name, found.artifact_location)
    return experiment


def _local_path(location: str) -> Path | None:
    """The folder of a local artifact location (`file://...` or a plain path); None for remote stores."""
    parsed = urlparse(location)
    if parsed.scheme == "file":
        from mlflow.utils.file_utils import local_file_uri_to_path

        return Path(local_file_uri_to_path(location))
    return Path(location) if parsed.scheme == "" else None


def warn_foreign_artifact_root(uri: str, name: str, artifact_location: str) -> bool:
    """Warn (one line) when experiment `name` of a SQLite store keeps its artifacts in a local folder outside both
    the store's folder and the working folder: MLflow fixes an experiment's artifact root as an absolute path when
    it creates the experiment, so a copied project (`cp -a`) would keep writing into the original's folder.
    Returns whether it warned."""
    database, root = _sqlite_path(uri), _local_path(artifact_location or "")
    if database is None or root is None:
        return False
    homes = [database.resolve().parent, Path.cwd().resolve()]
    if any(root.resolve().is_relative_to(home) for home in homes):
        return False
    logger.warning("MLflow: experiment %r of %s keeps its artifacts in %s, outside this project (%s; a copied "
                   "store?): new artifacts go there too; give this project its own experiment (parameter "
                   "mlflow.experiment, or afn.mlflow.experiment) or see docs/choices.md, MLflow",
                   name, uri, artifact_location, homes[1])
    return True


def resume_key(identity: str, env: str, commit: str | None, params: dict[str, str], raw: dict[str, str]) -> str:
    """A stable key of what a run computes: which run (a fold, a parent), the Kedro env, the git commit, the
    parameters and the raw files' hashes. Only a run with the same key is ever continued (`resumable_run`)."""
    import hashlib
    import json

    payload = json.dumps({"run": identity, "env": env, "commit": commit or "", "params": params, "raw": raw},
                         sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def resumable_run(client, experiment: str, key: str):
    """The latest run of `experiment` tagged `key` when it did not finish (KILLED, FAILED), else None: a run
    that finished, or one still RUNNING in a live process, is never continued. Call `end_stale_runs` first,
    so that runs of dead processes are KILLED by then."""
    from mlflow.entities import ViewType

    runs = client.search_runs([experiment], f"tags.`{RESUME_TAG}` = '{key}'", ViewType.ACTIVE_ONLY, max_results=1,
                              order_by=["attributes.start_time DESC"])
    return runs[0] if runs and runs[0].info.status in ("KILLED", "FAILED") else None


def reopen_run(client, run) -> None:
    """Continue `run` (an MLflow `Run`): RUNNING again, this process's host and pid tags (so a new kill is
    recognised), `resumed_count` incremented and `resumed_at` set."""
    import time

    run_id = run.info.run_id
    client.update_run(run_id, status="RUNNING")
    count = int(run.data.tags.get(RESUMED_TAG, "0") or 0) + 1
    for key, value in {**process_tags(), RESUMED_TAG: str(count),
                       RESUMED_AT_TAG: time.strftime("%Y-%m-%d %H:%M:%S")}.items():
        client.set_tag(run_id, key, value)


def process_tags() -> dict[str, str]:
    """Tags that let a later start recognise a run whose process died (`end_stale_runs`)."""
    return {HOST_TAG: socket.gethostname(), PID_TAG: str(os.getpid())}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def end_stale_runs(client, experiment: str) -> list[str]:
    """Mark KILLED every RUNNING run of `experiment` started on this host by a process that no longer exists
    (killed, or crashed before closing it); returns their ids."""
    from mlflow.entities import ViewType

    host = socket.gethostname()
    ended = []
    for run in client.search_runs([experiment], "attributes.status = 'RUNNING'", ViewType.ACTIVE_ONLY,
                                  max_results=1000):
        tags = run.data.tags
        if tags.get(HOST_TAG) == host and tags.get(PID_TAG, "").isdigit() and not _alive(int(tags[PID_TAG])):
            client.set_terminated(run.info.run_id, status="KILLED")
            ended.append(run.info.run_id)
    if ended:
        logger.warning("MLflow: %d run(s) of a process that died were still RUNNING; marked KILLED: %s",
                       len(ended), ended)
    return ended


class GuardedLogging:
    """Runs MLflow calls so that a tracking failure is a warning naming what was not logged, and the
    computation and its outputs go on; `strict` (parameter `mlflow.strict`) makes it an error instead."""

    def __init__(self, strict: bool = False):
        self.strict = strict
        self.failures: list[str] = []

    def __call__(self, what: str, call: Callable[..., Any], *args, **kwargs) -> Any:
        try:
            return call(*args, **kwargs)
        except Exception as error:  # noqa: BLE001 - tracking must not stop the computation unless strict
            if self.strict:
                raise
            message = f"{type(error).__name__}: {str(error).strip().splitlines()[0][:300] if str(error).strip() else ''}"
            self.failures.append(f"{what} ({message})")
            logger.warning("MLflow: %s was not logged (%s); the run goes on (mlflow.strict: true stops instead)",
                           what, message)
            return None


def git_commit(folder: str | Path = ".") -> str | None:
    """The checked-out commit of the project, or None outside a git checkout."""
    import subprocess

    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def file_sha256(path: str | Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def raw_file_inputs(files: dict[str, str | Path]) -> list:
    """MLflow dataset inputs for raw files (name -> path): source = the file, digest = its SHA-256 (the full
    hash is also a tag), so a run says exactly which data it read."""
    from mlflow.data.meta_dataset import MetaDataset
    from mlflow.data.sources import LocalArtifactDatasetSource
    from mlflow.entities import DatasetInput, InputTag

    inputs = []
    for name, path in sorted(files.items()):
        sha = file_sha256(path)
        dataset = MetaDataset(LocalArtifactDatasetSource(str(Path(path).resolve())), name=name, digest=sha[:32])
        inputs.append(DatasetInput(dataset._to_mlflow_entity(),
                                   tags=[InputTag("mlflow.data.context", "raw"), InputTag("sha256", sha)]))
    return inputs


def step_metrics(prefix: str, history: list[dict], step_key: str = "epoch") -> list:
    """A training history (one dict per epoch) as MLflow metrics `<prefix>/<name>` with the epoch as step."""
    import math
    import time

    from mlflow.entities import Metric

    stamp = int(time.time() * 1000)
    return [Metric(f"{prefix}/{key}", float(value), stamp, int(row[step_key]))
            for row in history for key, value in row.items()
            if key != step_key and isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(float(value))]


# MLflow limits a param value to 6000 characters; longer values are cut.
_MAX_PARAM_LENGTH = 6000


def default_artifact_location(tracking_uri: str, experiment: str) -> str | None:
    """For a `sqlite:///path.db` store: `mlartifacts/<experiment>` beside the database file, so artifacts
    land next to their runs rather than in the working directory. None (MLflow's default) otherwise."""
    parsed = urlparse(tracking_uri)
    if parsed.scheme != "sqlite":
        return None
    database = tracking_uri[len("sqlite:///"):]
    return (Path(database).resolve().parent / "mlartifacts" / experiment).as_uri()


def refuse_own_tracking_uri(afn: Mapping | None) -> None:
    """`afn.mlflow.tracking_uri` was the afn pipeline's own store; every pipeline now logs to `mlflow.tracking_uri`.
    A value left in a conf file is refused in one line rather than silently ignored."""
    leftover = (((afn or {}).get("mlflow")) or {}).get("tracking_uri")
    if leftover is not None:
        raise ValueError(f"parameter afn.mlflow.tracking_uri={leftover} is not read: every pipeline logs to "
                         "mlflow.tracking_uri (conf/base/parameters.yml); move the value there and delete this key")


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


def numeric_metrics(values: Mapping) -> dict[str, float]:
    """The finite numbers of a (nested) mapping, booleans as 0/1, ready for `log_batch`."""
    metrics = {}
    for key, value in flatten(values).items():
        if isinstance(value, bool | np.bool_):
            metrics[key] = float(value)
        elif isinstance(value, numbers.Real) and not math.isnan(float(value)):
            metrics[key] = float(value)
    return metrics


def log_run(tracking_uri: str, experiment: str, params: Mapping, metrics: Mapping,
            layer_metrics: pd.DataFrame, texts: Mapping[str, str], figures: Mapping[str, Figure],
            artifact_location: str | None = None, *, run_name: str) -> str:
    """One finished run (the AFN pipeline's, a student's) in `experiment` (created when missing) holding `params` (flattened), `metrics`
    (the finite numbers), `layer_metrics` (every numeric column logged per layer as the metric's step),
    `texts` and `figures` as artifacts (name -> artifact path). Returns the run id; a failure marks the
    run FAILED and re-raises."""
    from mlflow.entities import Metric, Param
    from mlflow.tracking import MlflowClient

    tracking_uri = resolve_tracking_uri(tracking_uri)
    check_store(tracking_uri)
    client = MlflowClient(tracking_uri=tracking_uri)
    found = experiment_id(client, experiment, artifact_location or default_artifact_location(tracking_uri, experiment))
    end_stale_runs(client, found)
    commit = git_commit(Path.cwd())
    tags = {**process_tags(), **({"mlflow.source.git.commit": commit} if commit else {})}
    run_id = client.create_run(found, run_name=run_name, tags=tags).info.run_id
    try:
        now = int(time.time() * 1000)
        param_list = [Param(key, str(value)[:_MAX_PARAM_LENGTH]) for key, value in flatten(params).items()]
        metric_list = [Metric(key, value, now, 0) for key, value in numeric_metrics(metrics).items()]
        for row in layer_metrics.to_dict(orient="records"):
            step = int(row["layer"])
            metric_list += [Metric(f"by_layer.{key}", value, now, step)
                            for key, value in numeric_metrics(row).items() if key != "layer"]
        for start in range(0, len(param_list), 100):  # MLflow takes at most 100 params per batch
            client.log_batch(run_id, params=param_list[start:start + 100])
        for start in range(0, len(metric_list), 1000):
            client.log_batch(run_id, metrics=metric_list[start:start + 1000])
        for artifact, text in texts.items():
            client.log_text(run_id, text, artifact)
        for artifact, figure in figures.items():
            client.log_figure(run_id, figure, artifact)
    except Exception:
        client.set_terminated(run_id, status="FAILED")
        raise
    client.set_terminated(run_id, status="FINISHED")
    return run_id
