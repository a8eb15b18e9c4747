"""The MLflow store: which one (`MLFLOW_TRACKING_URI` wins over `mlflow.tracking_uri`), whether it works,
experiments (and a copied store's foreign artifact root), runs left behind by dead processes, the resume key of a
run and continuing it, raw files as run inputs, and logging that warns instead of stopping the computation."""
from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import urlparse

import sqlalchemy
from mlflow.data.meta_dataset import MetaDataset
from mlflow.data.sources import LocalArtifactDatasetSource
from mlflow.entities import DatasetInput, InputTag, ViewType
from mlflow.tracking import MlflowClient
from mlflow.utils.file_utils import local_file_uri_to_path

from learned_attribution.core.atomic import file_sha256

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
    payload = json.dumps({"run": identity, "env": env, "commit": commit or "", "params": params, "raw": raw},
                         sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def resumable_run(client, experiment: str, key: str):
    """The latest run of `experiment` tagged `key` when it did not finish (KILLED, FAILED), else None: a run
    that finished, or one still RUNNING in a live process, is never continued. Call `end_stale_runs` first,
    so that runs of dead processes are KILLED by then."""
    runs = client.search_runs([experiment], f"tags.`{RESUME_TAG}` = '{key}'", ViewType.ACTIVE_ONLY, max_results=1,
                              order_by=["attributes.start_time DESC"])
    return runs[0] if runs and runs[0].info.status in ("KILLED", "FAILED") else None


def reopen_run(client, run) -> None:
    """Continue `run` (an MLflow `Run`): RUNNING again, this process's host and pid tags (so a new kill is
    recognised), `resumed_count` incremented and `resumed_at` set."""
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


def raw_file_inputs(files: dict[str, str | Path]) -> list:
    """MLflow dataset inputs for raw files (name -> path): source = the file, digest = its SHA-256 (the full
    hash is also a tag), so a run says exactly which data it read."""
    inputs = []
    for name, path in sorted(files.items()):
        sha = file_sha256(path)
        dataset = MetaDataset(LocalArtifactDatasetSource(str(Path(path).resolve())), name=name, digest=sha[:32])
        inputs.append(DatasetInput(dataset._to_mlflow_entity(),
                                   tags=[InputTag("mlflow.data.context", "raw"), InputTag("sha256", sha)]))
    return inputs


def default_artifact_location(tracking_uri: str, experiment: str) -> str | None:
    """For a `sqlite:///path.db` store: `mlartifacts/<experiment>` beside the database file, so artifacts
    land next to their runs rather than in the working directory. None (MLflow's default) otherwise."""
    parsed = urlparse(tracking_uri)
    if parsed.scheme != "sqlite":
        return None
    database = tracking_uri[len("sqlite:///"):]
    return (Path(database).resolve().parent / "mlartifacts" / experiment).as_uri()


