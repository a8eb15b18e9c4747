"""The tracking package (services/tracking) on real SQLite MLflow stores: the start-up check, the environment's URI, model-training
experiments, runs of dead processes, and logging failures that warn instead of stopping."""
import logging
import socket
import subprocess
import sys

import pytest
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from learned_attribution.services.tracking import store as tracking
from learned_attribution.services.tracking.run import step_metrics


def test_a_sqlite_store_in_a_missing_folder_is_refused_in_one_line(tmp_path):
    uri = f"sqlite:///{tmp_path}/no/such/dir/x.db"
    with pytest.raises(tracking.TrackingStoreError) as error:
        tracking.check_store(uri)
    message = str(error.value)
    assert message.startswith(f"mlflow.tracking_uri={uri}:") and f"{tmp_path}/no/such/dir" in message
    assert "\n" not in message and not (tmp_path / "no").exists()


def test_a_broken_store_file_is_refused_in_one_line(tmp_path):
    (tmp_path / "x.db").write_bytes(b"this is not a database" * 100)
    with pytest.raises(tracking.TrackingStoreError, match=r"^mlflow.tracking_uri=sqlite:///.*x.db: the MLflow store "
                                                          r"cannot be used \(") as error:
        tracking.check_store(f"sqlite:///{tmp_path}/x.db")
    assert "\n" not in str(error.value)


def test_a_good_store_passes_and_the_environment_wins(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path}/ok.db"
    tracking.check_store(uri)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert tracking.resolve_tracking_uri("sqlite:///param.db") == "sqlite:///param.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    assert tracking.resolve_tracking_uri("sqlite:///param.db") == uri


def test_a_tracking_server_that_does_not_answer_stops_the_run_within_seconds(monkeypatch):
    import os
    import time

    with socket.socket() as probe:  # a loopback port with nothing listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.delenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", raising=False)
    started = time.monotonic()
    with pytest.raises(tracking.TrackingStoreError, match=rf"^mlflow.tracking_uri=http://127.0.0.1:{port}: the "
                                                          r"MLflow store cannot be used") as error:
        tracking.check_store(f"http://127.0.0.1:{port}")
    assert time.monotonic() - started < 30 and "\n" not in str(error.value)
    assert "MLFLOW_HTTP_REQUEST_MAX_RETRIES" not in os.environ  # the probe's settings are put back


def test_experiments_are_model_training_experiments(tmp_path):
    client = MlflowClient(f"sqlite:///{tmp_path}/m.db")
    first = tracking.experiment_id(client, "crosstask")
    assert tracking.experiment_id(client, "crosstask") == first
    assert client.get_experiment(first).tags["mlflow.experimentKind"] == "custom_model_development"


def test_runs_of_a_dead_process_end_killed_and_live_ones_stay(tmp_path):
    client = MlflowClient(f"sqlite:///{tmp_path}/m.db")
    experiment = tracking.experiment_id(client, "crosstask")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    gone = client.create_run(experiment, tags={tracking.HOST_TAG: socket.gethostname(),
                                               tracking.PID_TAG: dead.stdout.strip()}).info.run_id
    alive = client.create_run(experiment, tags=tracking.process_tags()).info.run_id
    elsewhere = client.create_run(experiment, tags={tracking.HOST_TAG: "another-host",
                                                    tracking.PID_TAG: dead.stdout.strip()}).info.run_id
    assert tracking.end_stale_runs(client, experiment) == [gone]
    assert client.get_run(gone).info.status == "KILLED"
    assert client.get_run(alive).info.status == client.get_run(elsewhere).info.status == "RUNNING"


def test_a_logging_failure_is_a_warning_unless_strict(tmp_path, caplog):
    client = MlflowClient(f"sqlite:///{tmp_path}/m.db")
    guard = tracking.GuardedLogging()
    with caplog.at_level(logging.WARNING, logger="learned_attribution.services.tracking"):
        assert guard("metrics of a missing run", client.log_metric, "no-such-run", "auroc", 0.5) is None
    assert "MLflow: metrics of a missing run was not logged" in caplog.text and len(guard.failures) == 1
    assert guard("a constant", lambda: 3) == 3
    with pytest.raises(MlflowException, match="no-such-run"):
        tracking.GuardedLogging(strict=True)("metrics of a missing run", client.log_metric, "no-such-run", "x", 1.0)


def test_training_histories_become_step_metrics_and_raw_files_inputs_with_their_hash(tmp_path):
    import hashlib

    history = [{"epoch": 1, "train_loss": 0.7, "val_auroc": 0.6, "note": "x"},
               {"epoch": 2, "train_loss": 0.5, "val_auroc": float("nan")}]
    metrics = step_metrics("expnet_training", history)
    assert sorted((m.key, m.step, m.value) for m in metrics) == [
        ("expnet_training/train_loss", 1, 0.7), ("expnet_training/train_loss", 2, 0.5),
        ("expnet_training/val_auroc", 1, 0.6)]
    raw = tmp_path / "train.tsv"
    raw.write_text("a\t1\n")
    client = MlflowClient(f"sqlite:///{tmp_path}/m.db")
    run = client.create_run(tracking.experiment_id(client, "x")).info.run_id
    client.log_inputs(run, tracking.raw_file_inputs({"raw_train": raw}))
    [logged] = client.get_run(run).inputs.dataset_inputs
    sha = hashlib.sha256(raw.read_bytes()).hexdigest()
    assert logged.dataset.name == "raw_train" and logged.dataset.digest == sha[:32]
    assert {t.key: t.value for t in logged.tags}["sha256"] == sha and str(raw) in logged.dataset.source


def test_a_read_only_store_is_refused_at_the_start(tmp_path, monkeypatch):
    """A store that reads but cannot be written (here a SQLite connection opened read-only; file permissions do
    not stop root) fails the start-up check, in one line, instead of failing at the first run it creates."""
    monkeypatch.chdir(tmp_path)  # MLflow makes the read-only URI's default artifact folder, `file:...`, relative
    database = tmp_path / "m.db"
    tracking.check_store(f"sqlite:///{database}")  # creates the store
    read_only = f"sqlite:///file:{database}?mode=ro&uri=true"
    MlflowClient(read_only).search_experiments()  # it reads
    with pytest.raises(tracking.TrackingStoreError, match=r"^mlflow.tracking_uri=sqlite:///file:.*m.db\?mode=ro.*: the "
                                                          r"MLflow store cannot be used \(.*readonly database") as error:
        tracking.check_store(read_only)
    assert "\n" not in str(error.value)
