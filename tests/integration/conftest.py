"""Fixtures of the integration tests: the smoke crosstask outputs, produced once per session if missing."""
from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SMOKE_DATA = PROJECT_ROOT / "data" / "smoke"
TASKS = ("hatexplain", "sst2", "cola")


@contextlib.contextmanager
def in_project_root():
    """Kedro resolves the catalog's relative paths (data/...) against the working directory."""
    before = Path.cwd()
    os.chdir(PROJECT_ROOT)
    try:
        yield PROJECT_ROOT
    finally:
        os.chdir(before)


def smoke_crosstask_outputs() -> list[Path]:
    """Files `kedro run --pipeline crosstask --env smoke` writes that later tests read."""
    per_task = [path for task in TASKS for path in (
        SMOKE_DATA / "06_models" / f"classifier_{task}" / "config.json",
        SMOKE_DATA / "06_models" / f"heldout_{task}" / "expnet_paper" / "config.json",
        SMOKE_DATA / "06_models" / f"heldout_{task}" / "fold.json",
        SMOKE_DATA / "07_model_output" / f"budget_{task}.json",
        SMOKE_DATA / "08_reporting" / "crosstask" / f"metrics_{task}.png",
        SMOKE_DATA / "08_reporting" / "crosstask" / f"cost_{task}.png",
        SMOKE_DATA / "08_reporting" / "crosstask" / f"heatmaps_{task}.html")]
    return [SMOKE_DATA / "08_reporting" / "crosstask_metrics.csv", *per_task]


@pytest.fixture(scope="session")
def smoke_tracking_uri(tmp_path_factory) -> str:
    """A temporary SQLite MLflow store for the smoke runs (never the project's mlflow.db)."""
    return f"sqlite:///{tmp_path_factory.mktemp('smoke_mlflow') / 'mlflow.db'}"


# The smoke pipelines run the real encoder, where every core helps (the smoke main job: 75 s on two threads, 109 s
# on one); the unit tests' tiny models keep the suite's one thread (tests/conftest.py).
SMOKE_THREADS = os.cpu_count() or 1
SMOKE_ENV = {**os.environ, "OMP_NUM_THREADS": str(SMOKE_THREADS)}  # for a smoke run in a subprocess


def run_smoke(pipeline_name: str, tracking_uri: str, extra_params: dict | None = None,
              only_missing_outputs: bool = False) -> None:
    """`kedro run --pipeline <name> --env smoke [--only-missing-outputs]` in a real Kedro session, MLflow to
    `tracking_uri`, on every core."""
    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    from learned_attribution.core.models.runner import torch_threads

    params = {"mlflow": {"tracking_uri": tracking_uri, "experiment": "crosstask-smoke"}, **(extra_params or {})}
    with in_project_root(), torch_threads(SMOKE_THREADS):
        bootstrap_project(PROJECT_ROOT)
        with KedroSession.create(project_path=PROJECT_ROOT, env="smoke", runtime_params=params) as session:
            session.run(pipeline_name=pipeline_name, only_missing_outputs=only_missing_outputs)


@pytest.fixture(scope="session")
def smoke_env() -> dict:
    """The environment of a smoke run in a subprocess (every core, as `run_smoke`)."""
    return dict(SMOKE_ENV)


@pytest.fixture(scope="session")
def smoke_runner():
    """`run_smoke` for tests that run further smoke pipelines themselves."""
    return run_smoke


@pytest.fixture(scope="session")
def smoke_crosstask_run(smoke_tracking_uri) -> Path:
    """data/smoke holding fresh smoke crosstask outputs: the pipeline runs once per test session, so
    tests never read outputs of older code."""
    run_smoke("crosstask", smoke_tracking_uri)
    missing = [str(path) for path in smoke_crosstask_outputs() if not path.is_file()]
    assert not missing, f"crosstask --env smoke did not write {missing}"
    return SMOKE_DATA


@pytest.fixture(scope="session")
def smoke_ablation_run(smoke_crosstask_run, smoke_tracking_uri) -> Path:
    """data/smoke holding fresh smoke ablation outputs (after the smoke main job), once per test session."""
    run_smoke("ablation", smoke_tracking_uri)
    return SMOKE_DATA
