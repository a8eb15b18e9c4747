"""A smoke run killed (SIGKILL, no clean-up) while writing features, while saving a model and while scoring,
then resumed with `--only-missing-outputs`: nothing half-written is trusted, the tables equal a clean run's,
and the killed process's MLflow runs are continued (FINISHED) by the resume.

Each kill runs in a subprocess whose one change is a patched write or scoring function that kills the
process at that point; the resume is a plain Kedro session with `only_missing_outputs=True`.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

pytestmark = pytest.mark.integration

KILLER = textwrap.dedent('''
    import os, signal, sys
    point, uri, pipeline = sys.argv[1], sys.argv[2], sys.argv[3]

    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    if point == "features":  # after the first of the cola attention-feature parts is written
        from kedro_datasets.pandas import ParquetDataset
        original = ParquetDataset.save
        def save(self, data):
            original(self, data)
            if "attention_features_cola.partial" in str(self._filepath):
                die()
        ParquetDataset.save = save
    elif point == "model":  # writing heldout_sst2's folder: between its ExpNet+'s weights and its config
        from learned_attribution.core.models import artifacts
        original = artifacts.save_file
        def save_file(tensors, path):
            original(tensors, path)
            if "heldout_sst2.partial/expnet_plus/" in path:
                die()
        artifacts.save_file = save_file
    elif point == "scoring":  # in the middle of heldout_sst2's score_fold: its fifth method
        from learned_attribution.services.evaluation import protocol
        original, calls = protocol.subset_rows, []
        def subset_rows(*args, **kwargs):
            calls.append(1)
            if len(calls) == 5:
                die()
            return original(*args, **kwargs)
        protocol.subset_rows = subset_rows

    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project
    root = os.getcwd()
    bootstrap_project(root)
    params = {"mlflow": {"tracking_uri": uri, "experiment": "crosstask-smoke"}}
    with KedroSession.create(project_path=root, env="smoke", runtime_params=params) as session:
        session.run(pipeline_name=pipeline, only_missing_outputs=True)
''')


PROJECT_ROOT = Path(__file__).resolve().parents[2]
SMOKE_DATA = PROJECT_ROOT / "data" / "smoke"


def kill_at(point: str, pipeline: str, uri: str, tmp_path: Path, env: dict) -> None:
    script = tmp_path / "killer.py"
    script.write_text(KILLER)
    done = subprocess.run([sys.executable, str(script), point, uri, pipeline], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=900, env=env)
    assert done.returncode == -9, f"expected a SIGKILL at {point}: {done.returncode}\n{done.stderr[-3000:]}"


def feature_table(folder: Path) -> pd.DataFrame:
    return pd.concat([pd.read_parquet(p) for p in sorted(folder.glob("*.parquet"))], ignore_index=True)


@pytest.fixture(scope="module")
def clean(smoke_crosstask_run):
    return {"metrics": pd.read_csv(SMOKE_DATA / "08_reporting" / "crosstask_metrics.csv"),
            "features": feature_table(SMOKE_DATA / "04_feature" / "attention_features_cola")}


def test_killed_while_writing_features(clean, smoke_tracking_uri, smoke_runner, smoke_env, tmp_path):
    features = SMOKE_DATA / "04_feature" / "attention_features_cola"
    shutil.rmtree(features)
    kill_at("features", "classifiers", smoke_tracking_uri, tmp_path, smoke_env)
    partial = features.with_name(features.name + ".partial")
    assert not features.exists() and len(list(partial.glob("*.parquet"))) == 1  # 1 of 4 parts, not trusted
    smoke_runner("classifiers", smoke_tracking_uri, only_missing_outputs=True)
    assert not partial.exists()
    pd.testing.assert_frame_equal(feature_table(features), clean["features"])


def test_killed_while_saving_a_model(clean, smoke_tracking_uri, smoke_runner, smoke_env, tmp_path):
    fold = SMOKE_DATA / "06_models" / "heldout_sst2"
    shutil.rmtree(fold)
    kill_at("model", "crosstask", smoke_tracking_uri, tmp_path, smoke_env)
    # ExpNet+'s weights were written, its config and the card not: the fold's folder is not there
    assert not fold.exists() and (fold.with_name("heldout_sst2.partial") / "expnet_plus").is_dir()
    smoke_runner("crosstask", smoke_tracking_uri, only_missing_outputs=True)
    pd.testing.assert_frame_equal(pd.read_csv(SMOKE_DATA / "08_reporting" / "crosstask_metrics.csv"),
                                  clean["metrics"])


def test_killed_while_scoring(clean, smoke_tracking_uri, smoke_runner, smoke_env, tmp_path):
    fold_metrics = SMOKE_DATA / "08_reporting" / "crosstask" / "fold_metrics_sst2.csv"
    fold_metrics.unlink()
    kill_at("scoring", "crosstask", smoke_tracking_uri, tmp_path, smoke_env)
    assert not fold_metrics.exists()
    client = MlflowClient(smoke_tracking_uri)
    experiment = client.get_experiment_by_name("crosstask-smoke")
    killed = client.search_runs([experiment.experiment_id], "attributes.run_name = 'heldout_sst2'",
                                order_by=["attributes.start_time DESC"], max_results=1)[0]
    assert killed.info.status == "RUNNING"  # left so by the dead process
    smoke_runner("crosstask", smoke_tracking_uri, only_missing_outputs=True)
    pd.testing.assert_frame_equal(pd.read_csv(SMOKE_DATA / "08_reporting" / "crosstask_metrics.csv"),
                                  clean["metrics"])
    # The resume's start marked the dead process's runs KILLED and continued them (adapters/hooks): the fold's run is
    # the killed one, now FINISHED with the metrics of the resumed scoring, and no run is left RUNNING.
    resumed = client.get_run(killed.info.run_id)
    assert resumed.info.status == "FINISHED" and resumed.data.tags["learned_attribution.resumed_count"] == "1"
    assert any(key.endswith("/auroc") for key in resumed.data.metrics)
    latest = client.search_runs([experiment.experiment_id], "attributes.run_name = 'heldout_sst2'",
                                order_by=["attributes.start_time DESC"], max_results=1)[0]
    assert latest.info.run_id == killed.info.run_id  # the resume added no fold run
    statuses = {r.info.status for r in client.search_runs([experiment.experiment_id])}
    assert "RUNNING" not in statuses
