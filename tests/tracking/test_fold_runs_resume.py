"""The MLflow hook (adapters/hooks) across a kill and a resume, on a real SQLite store: the hook is driven directly
(before_pipeline_run, the runner's after_dataset_saved, on_pipeline_error / after_pipeline_run) around a real
Kedro SequentialRunner on a small namespaced fold pipeline whose outputs are real files in tmp_path.

A "kill" is a node raising a BaseException the runner does not handle (no hook closes the runs), after which
the runs' pid tag is pointed at a process that has exited, as a SIGKILLed `kedro run` leaves them.
"""
from __future__ import annotations

import logging
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from kedro.framework.hooks.manager import _create_hook_manager
from kedro.io import DataCatalog
from kedro.pipeline import node, pipeline
from kedro.runner import SequentialRunner
from mlflow.entities import ViewType
from mlflow.tracking import MlflowClient

from learned_attribution.adapters.hooks import MlflowRunsHook
from learned_attribution.adapters.kedro_datasets import AtomicCSVDataset, AtomicJSONDataset
from learned_attribution.services.tracking import store as tracking

FOLDS = ("heldout_cola", "heldout_sst2")


class Killed(BaseException):
    """Stands for SIGKILL: no `except Exception` in the runner or the session sees it."""


KILL_AT: set[str] = set()  # node names that "kill the process" when they start


def _metrics(task: str) -> pd.DataFrame:
    return pd.DataFrame([{"method": method, "rule": "top_k", "subset": "all", "n_examples": 10,
                          "auroc": 0.5 + k / 10, "auprc": 0.4 + k / 10, "f1": 0.3 + k / 10}
                         for k, method in enumerate(["expnet", "expnet_plus", "saliency"])])


def _fold_pipeline(task: str):
    def score_fold():
        return _metrics(task)

    def train_expnet():
        return pd.DataFrame([{"epoch": 1, "train_loss": 0.7}, {"epoch": 2, "train_loss": 0.4}])

    def budget(metrics, history):
        if f"heldout_{task}.budget" in KILL_AT:
            raise Killed
        return {"seconds": 12.5, "examples": 10}

    return pipeline([node(score_fold, None, "fold_metrics", name="score_fold"),
                     node(train_expnet, None, "expnet_history", name="train_expnet"),
                     node(budget, ["fold_metrics", "expnet_history"], "budget", name="budget")],
                    namespace=f"heldout_{task}")


def _catalog(data: Path) -> DataCatalog:
    datasets = {}
    for fold in FOLDS:
        datasets[f"{fold}.fold_metrics"] = AtomicCSVDataset(filepath=str(data / fold / "fold_metrics.csv"))
        datasets[f"{fold}.expnet_history"] = AtomicCSVDataset(filepath=str(data / fold / "expnet_history.csv"))
        datasets[f"{fold}.budget"] = AtomicJSONDataset(filepath=str(data / fold / "budget.json"))
    return DataCatalog(datasets)


def _params(uri: str, experiment: str, seed: int = 13) -> dict:
    return {"mlflow": {"tracking_uri": uri, "experiment": experiment, "strict": False}, "seed": seed, "max_length": 64,
            "encoder": {"name_or_path": "tiny"}, "crosstask": {"baselines": ["saliency"]}}


def _run(params: dict, data: Path, only_missing: bool = False, fail: bool = False) -> MlflowRunsHook:
    """One `kedro run --pipeline folds` as the session drives it: the hook around a real runner."""
    hook = MlflowRunsHook()
    hook.after_context_created(SimpleNamespace(params=params))
    folds = _fold_pipeline("cola") + _fold_pipeline("sst2")
    catalog = _catalog(data)
    run_params = {"env": "smoke", "pipeline_names": ["folds"], "only_missing_outputs": only_missing}
    hook.before_pipeline_run(run_params=run_params, pipeline=folds, catalog=catalog)
    manager = _create_hook_manager()
    manager.register(hook)
    try:
        if fail:
            raise RuntimeError("a node failed")
        result = SequentialRunner().run(folds, catalog, manager, only_missing_outputs=only_missing)
    except Exception as error:
        hook.on_pipeline_error(error=error, run_params=run_params, pipeline=folds, catalog=catalog)
        return hook
    hook.after_pipeline_run(run_params=run_params, run_result=result, pipeline=folds, catalog=catalog)
    return hook


def _kill(params: dict, data: Path, at: str) -> None:
    """Run until node `at` starts, die there, and leave the runs as a dead process leaves them."""
    KILL_AT.add(at)
    try:
        with pytest.raises(Killed):
            _run(params, data)
    finally:
        KILL_AT.clear()
    client = MlflowClient(params["mlflow"]["tracking_uri"])
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    for run in _runs(client, params["mlflow"]["experiment"]):
        assert run.info.status == "RUNNING"
        client.set_tag(run.info.run_id, tracking.PID_TAG, dead.stdout.strip())


def _runs(client: MlflowClient, experiment: str, name: str | None = None) -> list:
    found = client.get_experiment_by_name(experiment)
    runs = client.search_runs([found.experiment_id], "", ViewType.ALL, max_results=100) if found else []
    return [r for r in runs if name is None or r.info.run_name == name or
            (name == "parent" and "mlflow.parentRunId" not in r.data.tags)]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    """One SQLite store for the module (creating its tables takes seconds); each test has its experiment."""
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow')}/mlflow.db"


@pytest.mark.slow
def test_a_resumed_fold_continues_the_killed_run_that_holds_its_earlier_metrics(store, tmp_path):
    params, data = _params(store, "resume-after-kill"), tmp_path / "data"
    client = MlflowClient(store)
    _kill(params, data, at="heldout_sst2.budget")
    [killed] = _runs(client, "resume-after-kill", "heldout_sst2")
    before = client.get_run(killed.info.run_id)
    assert before.data.metrics["expnet_training/train_loss"] == 0.4  # the last epoch's, logged before the kill
    assert "budget/seconds" not in before.data.metrics

    _run(params, data, only_missing=True)
    [resumed] = _runs(client, "resume-after-kill", "heldout_sst2")
    assert resumed.info.run_id == killed.info.run_id and resumed.info.status == "FINISHED"
    assert before.data.metrics.items() <= resumed.data.metrics.items()  # everything logged before the kill
    assert resumed.data.metrics["budget/seconds"] == 12.5  # and what the resume computed
    assert resumed.data.tags["learned_attribution.resumed_count"] == "1"
    artifacts = {a.path for a in client.list_artifacts(resumed.info.run_id)}
    assert {"fold_metrics.csv", "expnet_history.csv"} <= artifacts
    [parent] = _runs(client, "resume-after-kill", "parent")  # the parent was continued too
    assert parent.info.status == "FINISHED" and resumed.data.tags["mlflow.parentRunId"] == parent.info.run_id
    assert len(_runs(client, "resume-after-kill")) == 3  # parent + two folds, nothing added by the resume


@pytest.mark.slow
def test_a_failed_run_is_continued_by_the_resume(store, tmp_path):
    params, data = _params(store, "resume-after-failure"), tmp_path / "data"
    client = MlflowClient(store)
    _run(params, data, fail=True)  # opens the runs, then the pipeline raises: every run FAILED
    assert {r.info.status for r in _runs(client, "resume-after-failure")} == {"FAILED"}
    _run(params, data, only_missing=True)
    runs = _runs(client, "resume-after-failure")
    assert len(runs) == 3 and {r.info.status for r in runs} == {"FINISHED"}
    [sst2] = [r for r in runs if r.info.run_name == "heldout_sst2"]
    assert sst2.data.metrics["budget/seconds"] == 12.5


@pytest.mark.slow
def test_a_no_op_resume_creates_no_run(store, tmp_path):
    params, data = _params(store, "no-op-resume"), tmp_path / "data"
    client = MlflowClient(store)
    _run(params, data)
    assert len(_runs(client, "no-op-resume")) == 3
    _run(params, data, only_missing=True)  # every output exists: the runner runs nothing
    assert len(_runs(client, "no-op-resume")) == 3
    # a resume that leaves one fold to run opens that fold (and a parent), not the finished one
    (data / "heldout_sst2" / "budget.json").unlink()
    _run(params, data, only_missing=True)
    runs = _runs(client, "no-op-resume")
    assert len(runs) == 5 and len(_runs(client, "no-op-resume", "heldout_cola")) == 1


@pytest.mark.slow
def test_a_run_with_other_parameters_is_never_continued(store, tmp_path):
    data = tmp_path / "data"
    client = MlflowClient(store)
    _kill(_params(store, "other-params"), data, at="heldout_sst2.budget")
    _run(_params(store, "other-params", seed=14), data, only_missing=True)
    runs = _runs(client, "other-params", "heldout_sst2")
    assert sorted(r.info.status for r in runs) == ["FINISHED", "KILLED"]


@pytest.mark.slow
def test_a_fold_continued_under_a_new_parent_is_re_pointed_at_it(store, tmp_path):
    params, data = _params(store, "new-parent"), tmp_path / "data"
    client = MlflowClient(store)
    _kill(params, data, at="heldout_sst2.budget")
    [old_parent] = _runs(client, "new-parent", "parent")
    client.set_terminated(old_parent.info.run_id, status="FINISHED")  # a parent that is not continued
    _run(params, data, only_missing=True)
    [fold] = _runs(client, "new-parent", "heldout_sst2")
    parents = _runs(client, "new-parent", "parent")
    [new_parent] = [r for r in parents if r.info.run_id != old_parent.info.run_id]
    assert fold.data.tags["mlflow.parentRunId"] == new_parent.info.run_id and fold.info.status == "FINISHED"
    assert fold.data.tags["learned_attribution.resumed_count"] == "1"


@pytest.mark.slow
def test_a_copied_project_warns_that_its_experiment_writes_artifacts_into_the_original(tmp_path, monkeypatch, caplog):
    """MLflow stores an experiment's artifact root as an absolute path when it creates the experiment, so a
    copy (`cp -a`) of a project with a SQLite store keeps writing into the original's mlruns/: one warning line
    names the experiment, the root and the fix; a new experiment in the copy writes inside the copy."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    original, copy = tmp_path / "original", tmp_path / "copy"
    original.mkdir()
    monkeypatch.chdir(original)  # a `kedro run` in the project: the artifacts go beside the store, mlartifacts/
    # Absolute store paths: MLflow caches a store per URI within a process, the copy runs in a fresh one.
    _run(_params(f"sqlite:///{original}/mlflow.db", "crosstask"), original / "data")
    assert (original / "mlartifacts" / "crosstask").is_dir()
    shutil.copytree(original, copy)
    monkeypatch.chdir(copy)
    uri = f"sqlite:///{copy}/mlflow.db"
    with caplog.at_level(logging.WARNING):
        _run(_params(uri, "crosstask"), copy / "other")
    [warning] = [r.getMessage() for r in caplog.records if "artifact" in r.getMessage()]
    root = MlflowClient(uri).get_experiment_by_name("crosstask").artifact_location
    assert "'crosstask'" in warning and root in warning and str(original) in root and "mlflow.experiment" in warning
    assert "\n" not in warning
    caplog.clear()
    with caplog.at_level(logging.WARNING):  # the fix the warning names: the copy's own experiment
        _run(_params(uri, "crosstask-copy"), copy / "third")
    assert not [r for r in caplog.records if "artifact" in r.getMessage()]
    [fold] = _runs(MlflowClient(uri), "crosstask-copy", "heldout_sst2")
    artifacts = Path(fold.info.artifact_uri.removeprefix("file://"))
    assert artifacts.is_relative_to(copy) and (artifacts / "fold_metrics.csv").is_file()
