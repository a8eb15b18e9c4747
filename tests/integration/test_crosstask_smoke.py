"""`crosstask --env smoke` end to end in a real Kedro session, with MLflow on a temporary SQLite store."""
from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SMOKE = PROJECT_ROOT / "data" / "smoke"
FOLDS = ("heldout_hatexplain", "heldout_sst2", "heldout_cola")
METHODS = {"expnet", "raw_attention", "attention_rollout", "gae", "attcat", "attention_x_gradient", "saliency",
           "input_x_gradient", "integrated_gradients", "grad_cam", "occlusion", "lime", "kernel_shap", "afn_norm"}

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def smoke_run(smoke_crosstask_run, smoke_tracking_uri):
    return MlflowClient(smoke_tracking_uri)


def test_every_fold_scores_fourteen_methods_and_the_floors(smoke_run):
    metrics = pd.read_csv(SMOKE / "08_reporting" / "crosstask_metrics.csv")
    assert set(metrics["fold"]) == set(FOLDS)
    for fold, rows in metrics.groupby("fold"):
        assert set(rows.loc[rows["family"] != "floor", "method"]) == METHODS, fold
        assert {"all_tokens", "random"} <= set(rows.loc[rows["family"] == "floor", "method"])
        assert set(rows["subset"]) >= {"all", "sample"}
        expnet_rules = set(rows.loc[rows["method"] == "expnet", "rule"])
        assert expnet_rules == {"matched", "own", "own_calibrated"}
        sample = rows[rows["subset"] == "sample"]
        # Every method, ExpNet included, is scored on the same sample, with faithfulness beside it.
        assert sample.loc[sample["family"] != "floor", "n_examples"].nunique() == 1
        assert sample.loc[sample["family"] != "floor", "comprehensiveness"].notna().all()
        all_rows = rows[(rows["subset"] == "all") & (rows["family"] != "floor")]
        assert all_rows["auroc"].between(0, 1).all() and all_rows["f1"].between(0, 1).all()
    for fold in FOLDS:
        task = fold.removeprefix("heldout_")
        report = SMOKE / "08_reporting" / "crosstask"
        assert (report / f"metrics_{task}.png").stat().st_size > 10_000
        assert "<html>" in (report / f"heatmaps_{task}.html").read_text()
    summary = (SMOKE / "08_reporting" / "crosstask_summary.md").read_text()
    assert all(f"## {fold}" in summary for fold in FOLDS) and "Paper (bert-base)" in summary


def test_one_parent_and_three_fold_runs_with_metrics_and_artifacts(smoke_run):
    client = smoke_run
    experiment = client.get_experiment_by_name("crosstask-smoke")
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and len(children) == 3
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {parents[0].info.run_id}
    assert sorted(r.info.run_name for r in children) == sorted(FOLDS)
    for child in [*parents, *children]:
        assert child.info.status == "FINISHED"
    for child in children:
        keys = set(child.data.metrics)
        assert {"expnet/matched/all/auroc", "expnet/own/all/f1", "all_tokens/own/all/f1",
                "kernel_shap/matched/sample/comprehensiveness", "classifier/rationale_test/accuracy",
                "budget/rho"} <= keys
        assert child.data.params["held_out_task"] == child.info.run_name.removeprefix("heldout_")
        artifacts = {a.path for a in client.list_artifacts(child.info.run_id)}
        assert {"fold_metrics.csv", "metrics.png", "heatmaps.html", "expnet_weights.pt"} <= artifacts
    assert {"crosstask_metrics.csv", "crosstask_summary.md"} <= {a.path for a in client.list_artifacts(parents[0].info.run_id)}


def test_a_failing_run_marks_its_runs_failed(smoke_run, smoke_tracking_uri, smoke_runner):
    with pytest.raises(Exception):
        smoke_runner("folds", smoke_tracking_uri, {"crosstask": {"expnet": {"not_a_setting": 1}}})
    client = MlflowClient(smoke_tracking_uri)
    experiment = client.get_experiment_by_name("crosstask-smoke")
    runs = client.search_runs([experiment.experiment_id], order_by=["attributes.start_time DESC"])
    latest_parent = next(r for r in runs if "mlflow.parentRunId" not in r.data.tags)
    failed = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == latest_parent.info.run_id]
    assert latest_parent.info.status == "FAILED"
    assert len(failed) == 3 and all(r.info.status == "FAILED" for r in failed)
