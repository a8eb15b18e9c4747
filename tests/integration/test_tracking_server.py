"""A team's shared tracking store: a real PostgreSQL started here, a real `mlflow server` on it (backend
store postgresql+psycopg, proxied artifacts), and the smoke folds tracked to that server through
MLFLOW_TRACKING_URI (which wins over the `mlflow.tracking_uri` parameter). Both servers are stopped by PID."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.integration

POSTGRES_BINARIES = ("initdb", "postgres")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _as_database_user(command: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root, run it as the `postgres` system user."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


def _wait(check, what: str, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    raise TimeoutError(f"{what} did not come up within {seconds:.0f} s")


@pytest.fixture(scope="module")
def postgres_uri():
    """A fresh PostgreSQL 15 cluster on a free loopback port with an `mlflow` database; stopped by its PID."""
    missing = [b for b in POSTGRES_BINARIES if shutil.which(b) is None]
    if missing:
        pytest.skip(f"PostgreSQL binaries {missing} are not installed (apt install postgresql)")
    import psycopg

    folder = Path(tempfile.mkdtemp(prefix="learned_attribution_pg_"))
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
    data = folder / "data"
    subprocess.run(_as_database_user(["initdb", "-D", str(data), "-U", "mlflow", "--auth=trust", "-E", "UTF8",
                                      "--no-instructions"]), check=True, capture_output=True)
    port = _free_port()
    server = subprocess.Popen(_as_database_user(["postgres", "-D", str(data), "-p", str(port), "-k", str(folder),
                                                 "-c", "listen_addresses=127.0.0.1"]),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    def ready() -> bool:
        try:
            psycopg.connect(f"postgresql://mlflow@127.0.0.1:{port}/postgres", connect_timeout=2).close()
            return True
        except psycopg.OperationalError:
            return False

    try:
        _wait(ready, "PostgreSQL")
        with psycopg.connect(f"postgresql://mlflow@127.0.0.1:{port}/postgres", autocommit=True) as connection:
            connection.execute("CREATE DATABASE mlflow")
        yield f"postgresql+psycopg://mlflow@127.0.0.1:{port}/mlflow"
    finally:
        pid_file = data / "postmaster.pid"
        if pid_file.exists():
            postmaster_pid = int(pid_file.read_text().splitlines()[0])
            os.kill(postmaster_pid, signal.SIGINT)  # PostgreSQL's fast shutdown
        server.wait(timeout=60)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def tracking_server(postgres_uri, tmp_path_factory):
    """`mlflow server` with the PostgreSQL backend store and proxied artifacts; stopped by its PID."""
    artifacts = tmp_path_factory.mktemp("mlflow_artifacts")
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--backend-store-uri", postgres_uri,
                               "--artifacts-destination", str(artifacts), "--host", "127.0.0.1", "--port", str(port),
                               "--workers", "1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    uri = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        if server.poll() is not None:
            raise RuntimeError(f"mlflow server exited with {server.returncode}")
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=2) as answer:
                return answer.status == 200
        except OSError:
            return False

    try:
        _wait(healthy, "mlflow server", 120)
        yield uri, artifacts
    finally:
        os.killpg(server.pid, signal.SIGTERM)  # the server and its workers share its process group
        server.wait(timeout=60)


def test_the_smoke_folds_track_to_a_postgresql_backed_server(smoke_crosstask_run, smoke_runner, tracking_server,
                                                             tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    uri, artifacts = tracking_server
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)  # wins over the parameter below
    unused = tmp_path / "unused.db"
    smoke_runner("folds", f"sqlite:///{unused}")
    assert not unused.exists()

    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("crosstask-smoke")
    runs = client.search_runs([experiment.experiment_id], max_results=100)
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]
    assert sorted(r.data.tags["fold"] for r in children) == ["heldout_cola", "heldout_hatexplain", "heldout_sst2"]
    for run in children:
        assert run.info.status == "FINISHED"
        metrics = pd.read_csv(smoke_crosstask_run / "08_reporting" / "crosstask" /
                              f"fold_metrics_{run.data.tags['held_out_task']}.csv")
        row = metrics[(metrics["method"] == "expnet_plus") & (metrics["rule"] == "matched") & (metrics["subset"] == "all")]
        assert run.data.metrics["predicted/expnet_plus/matched/all/auroc"] == pytest.approx(row["auroc"].item(), abs=1e-9)
        gold = pd.read_csv(smoke_crosstask_run / "08_reporting" / "crosstask" /
                           f"gold_metrics_{run.data.tags['held_out_task']}.csv")
        row = gold[(gold["method"] == "expnet_plus") & (gold["rule"] == "matched") & (gold["subset"] == "all")]
        assert run.data.metrics["gold/expnet_plus/matched/all/auroc"] == pytest.approx(row["auroc"].item(), abs=1e-9)
        names = {a.path for a in client.list_artifacts(run.info.run_id)}
        assert "explainer" in names and len(names) > 3, names
    # The artifacts went through the server into its artifact destination, and the models were registered.
    assert any(artifacts.rglob("MLmodel"))
    assert client.search_model_versions("name = 'crosstask-smoke-heldout_sst2'")
