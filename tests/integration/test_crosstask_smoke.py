"""`crosstask --env smoke` end to end in a real Kedro session, with MLflow on a temporary SQLite store."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score
from mlflow.tracking import MlflowClient

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SMOKE = PROJECT_ROOT / "data" / "smoke"
FOLDS = ("heldout_hatexplain", "heldout_sst2", "heldout_cola")
METHODS = {"expnet_plus", "expnet_paper", "raw_attention", "attention_rollout", "gae", "attcat", "attention_x_gradient", "saliency",
           "input_x_gradient", "integrated_gradients", "grad_cam", "occlusion", "lime", "kernel_shap", "afn_norm"}

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def smoke_run(smoke_crosstask_run, smoke_tracking_uri):
    return MlflowClient(smoke_tracking_uri)


def test_every_fold_scores_fifteen_methods_and_the_floors(smoke_run):
    metrics = pd.read_csv(SMOKE / "08_reporting" / "crosstask_metrics.csv")
    assert set(metrics["fold"]) == set(FOLDS)
    for fold, rows in metrics.groupby("fold"):
        assert set(rows.loc[rows["family"] != "floor", "method"]) == METHODS, fold
        assert {"all_tokens", "random"} <= set(rows.loc[rows["family"] == "floor", "method"])
        assert set(rows["subset"]) >= {"all", "sample"}
        for learned in ("expnet_plus", "expnet_paper"):
            assert set(rows.loc[rows["method"] == learned, "rule"]) == {"matched", "own", "own_calibrated"}
        sample = rows[(rows["subset"] == "sample") & (rows["mode"] == "predicted")]
        # Every method, ExpNet included, is scored on the same sample, with faithfulness (of the model's own
        # decision: predicted mode) beside it.
        assert sample.loc[sample["family"] != "floor", "n_examples"].nunique() == 1
        assert sample.loc[sample["family"] != "floor", "comprehensiveness"].notna().all()
    assert set(metrics["mode"]) == {"predicted", "gold"}
    for fold in FOLDS:  # each mode's AUROC, recomputed here from its saved token scores with scikit-learn
        task = fold.removeprefix("heldout_")
        for mode, file in (("predicted", "token_scores"), ("gold", "gold_token_scores")):
            scores = pd.read_parquet(SMOKE / "07_model_output" / f"{file}_{task}.parquet")
            matched = metrics[(metrics["fold"] == fold) & (metrics["rule"] == "matched") & (metrics["subset"] == "all")
                              & (metrics["mode"] == mode)]
            for method in ("expnet_plus", "saliency", "raw_attention"):
                rows = scores[scores["method"] == method]
                aurocs = [roc_auc_score(gold, s) for gold, s in zip(rows["gold"], rows["scores"])
                          if 0 < sum(gold) < len(gold)]
                expected = matched.loc[matched["method"] == method, "auroc"].item()
                assert np.mean(aurocs) == pytest.approx(expected, abs=1e-9), (fold, mode, method)
            # gold mode explains each mispredicted example for its label, every other for its prediction
            explained = scores.drop_duplicates("example_id")
            expected = explained["label"] if mode == "gold" else explained["predicted"]
            assert (explained["explained"] == expected).all(), (fold, mode)
    for fold in FOLDS:
        task = fold.removeprefix("heldout_")
        report = SMOKE / "08_reporting" / "crosstask"
        assert (report / f"metrics_{task}.png").stat().st_size > 10_000
        assert "<html>" in (report / f"heatmaps_{task}.html").read_text()
    summary = (SMOKE / "08_reporting" / "crosstask_summary.md").read_text()
    assert all(f"## {fold}" in summary for fold in FOLDS) and "Paper (bert-base)" in summary
    assert summary.count("ExpNet+ (stack_self_training: ") == len(FOLDS)
    assert summary.count("- AUROC by prediction: correctly predicted") == len(FOLDS)
    assert "selected" not in summary  # one recipe: the candidates and their selection are the ablation's
    assert "## Predicted and gold mode" in summary


def test_the_ablation_validates_every_candidate_beside_the_main_jobs_recipe(smoke_ablation_run, smoke_tracking_uri):
    """Every configured candidate is validated both ways on the training tasks and scored on the held-out one;
    the selection rule picks the best mean validation AUROC; the main job's recipe, retrained with the ablation's
    seeds, is marked, and the fold's own ExpNet+ sits beside the candidates as the main job scored it."""
    import yaml

    # The smoke ablation's candidates (parameters merge softly).
    variants = set(yaml.safe_load((PROJECT_ROOT / "conf/smoke/parameters_ablation.yml").read_text())
                   ["ablation"]["candidates"])
    ablation = pd.read_csv(SMOKE / "08_reporting" / "expnet_plus_ablation.csv")
    metrics = pd.read_csv(SMOKE / "08_reporting" / "crosstask_metrics.csv")
    metrics = metrics[metrics["mode"] == "predicted"]  # the ablation's references are the fold's predicted mode
    grid = pd.read_csv(SMOKE / "08_reporting" / "expnet_plus_training_grid.csv")
    for fold in FOLDS:
        task = fold.removeprefix("heldout_")
        # the training grid: six cells, one chosen on the training tasks' validation, scored in both modes
        cells = grid[grid["fold"] == fold]
        assert sorted(zip(cells["train_on"], cells["inputs"])) == sorted(
            (data, inputs) for data in ("correct", "all_predicted", "all_gold") for inputs in ("signed", "magnitude"))
        assert cells["selected"].sum() == 1 and cells[["predicted_auroc", "gold_auroc"]].notna().all().all()
        selection = pd.read_csv(SMOKE / "08_reporting" / "ablation" / f"expnet_plus_selection_{task}.csv")
        assert set(selection["variant"]) == variants
        assert len(selection[selection["direction"] != "mean"]) == 2 * len(variants)
        means = selection[selection["direction"] == "mean"].set_index("variant")["val_auroc"]
        chosen = selection.loc[selection["selected"], "variant"].unique()
        assert list(chosen) == [means.idxmax()]
        rows = ablation[ablation["fold"] == fold]
        assert variants <= set(rows["variant"])
        assert {"main job", "best baseline", "floor"} <= set(rows["description"])
        marked = rows.loc[rows["variant"].isin(variants) & rows["main_recipe"].astype(bool), "variant"]
        assert list(marked) == ["stack_self_training"]
        main_row = rows[rows["description"] == "main job"]
        fold_row = metrics[(metrics["fold"] == fold) & (metrics["method"] == "expnet_plus")
                           & (metrics["subset"] == "all") & (metrics["rule"] == "matched")]
        assert main_row["auroc"].iloc[0] == pytest.approx(fold_row["auroc"].iloc[0], abs=1e-12)
        # split by prediction, the reference rows are the fold's own rows of those subsets
        best_row = rows[rows["description"] == "best baseline"]
        best = best_row["variant"].iloc[0].removesuffix(" (best baseline)")
        for subset in ("correct", "incorrect"):
            for method, row in (("expnet_plus", main_row), (best, best_row)):
                subset_row = metrics[(metrics["fold"] == fold) & (metrics["method"] == method)
                                     & (metrics["subset"] == subset) & (metrics["rule"] == "matched")]
                expected = subset_row["auroc"].iloc[0] if len(subset_row) else float("nan")  # none mispredicted
                assert row[f"auroc_{subset}"].iloc[0] == pytest.approx(expected, abs=1e-4, nan_ok=True)
        # the ablation's seeds per variant; the ensemble is scored, and each seed's own network too
        candidates = rows[rows["variant"].isin(variants)]
        assert (candidates["seeds"] == 2).all() and candidates["auroc_seed_sd"].ge(0).all()
        assert (candidates["auroc_seed_min"] <= candidates["auroc_seed_max"]).all()
        stack = candidates.set_index("variant").loc["stack_agreement"]
        assert "convex stack" in stack["description"] and stack["n_pseudo_examples"] > 0
        assert len(stack["stack_weights"].split(", ")) == 5
        # every candidate is on the ablation's cost chart: timed beside a forward pass
        cost = pd.read_csv(SMOKE / "08_reporting" / "ablation" / f"expnet_plus_cost_{task}.csv")
        assert set(cost["variant"]) == variants and (cost["ratio_to_forward"] > 0).all()
        assert (SMOKE / "08_reporting" / "ablation" / f"cost_{task}.png").stat().st_size > 10_000
    assert (SMOKE / "08_reporting" / "expnet_plus_ablation.png").stat().st_size > 10_000
    assert "# ExpNet+ ablation" in (SMOKE / "08_reporting" / "expnet_plus_ablation.md").read_text()
    # one MLflow run per fold's ablation, in its own experiment
    client = MlflowClient(smoke_tracking_uri)
    runs = client.search_runs([client.get_experiment_by_name("crosstask-smoke-ablation").experiment_id])
    assert sorted(r.info.run_name for r in runs) == sorted(f"ablation_{t}" for t in ("hatexplain", "sst2", "cola"))
    for run in runs:
        assert {"expnet_plus_ablation.csv", "expnet_plus_selection.csv", "expnet_plus_cost.csv",
                "cost_vs_plausibility.png"} <= {a.path for a in client.list_artifacts(run.info.run_id)}
        assert any(k.startswith("expnet_plus_ablation/") for k in run.data.metrics)


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
        assert {"predicted/expnet_plus/matched/all/auroc", "predicted/expnet_paper/own/all/f1", "predicted/all_tokens/own/all/f1",
                "predicted/kernel_shap/matched/sample/comprehensiveness", "gold/expnet_plus/matched/all/auroc",
                "classifier/rationale_test/accuracy",
                "budget/rho"} <= keys
        assert child.data.params["held_out_task"] == child.info.run_name.removeprefix("heldout_")
        artifacts = {a.path for a in client.list_artifacts(child.info.run_id)}
        assert {"fold_metrics.csv", "metrics.png", "heatmaps.html", "expnet_paper", "expnet_plus", "explainer"} \
            <= artifacts
        assert not {"expnet_plus_ablation.csv", "expnet_plus_selection.csv"} & artifacts  # the ablation's runs
        assert {a.path for a in client.list_artifacts(child.info.run_id, "expnet_plus")} == {
            "expnet_plus/config.json", "expnet_plus/model.safetensors"}
        assert child.data.tags["registered_model"].startswith(f"models:/crosstask-smoke-{child.info.run_name}/")
        assert not any(k.startswith("expnet_plus_ablation/") for k in keys)
        assert child.data.tags["expnet_plus_variant"] == "stack_self_training"
        # Training curves as step metrics, the commit, and a SHA-256 of every raw input file.
        for curve in ("expnet_training/val_auroc", "expnet_plus_training/val_auroc", "classifier/train_loss"):
            steps = [m.step for m in client.get_metric_history(child.info.run_id, curve)]
            assert steps and steps == sorted(steps) and steps[0] == 1, curve
        assert len(child.data.tags["mlflow.source.git.commit"]) == 40
        inputs = {i.dataset.name: i for i in client.get_run(child.info.run_id).inputs.dataset_inputs}
        assert {"raw_hatexplain_dataset", "raw_sst2_glue_train", "raw_cola_in_domain_train"} <= set(inputs)
        tags = {t.key: t.value for t in inputs["raw_hatexplain_dataset"].tags}
        assert len(tags["sha256"]) == 64 and inputs["raw_hatexplain_dataset"].dataset.digest == tags["sha256"][:32]
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    assert {"crosstask_metrics.csv", "crosstask_summary.md"} <= {a.path for a in client.list_artifacts(parents[0].info.run_id)}


def test_a_failing_run_marks_its_runs_failed(smoke_run, smoke_tracking_uri, smoke_runner):
    with pytest.raises(ValueError, match="crosstask.expnet.not_a_setting"):
        smoke_runner("folds", smoke_tracking_uri, {"crosstask": {"expnet": {"not_a_setting": 1}}})
    client = MlflowClient(smoke_tracking_uri)
    experiment = client.get_experiment_by_name("crosstask-smoke")
    runs = client.search_runs([experiment.experiment_id], order_by=["attributes.start_time DESC"])
    latest_parent = next(r for r in runs if "mlflow.parentRunId" not in r.data.tags)
    failed = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == latest_parent.info.run_id]
    assert latest_parent.info.status == "FAILED"
    assert len(failed) == 3 and all(r.info.status == "FAILED" for r in failed)


def test_an_unusable_tracking_store_stops_the_run_before_any_work(smoke_runner, tmp_path):
    from learned_attribution.services.tracking.store import TrackingStoreError

    uri = f"sqlite:///{tmp_path}/no/such/dir/x.db"
    with pytest.raises(TrackingStoreError, match=r"^mlflow.tracking_uri=sqlite:///.*/no/such/dir/x.db: the folder"):
        smoke_runner("folds", uri)
    assert not (tmp_path / "no").exists()


def test_a_tracking_failure_mid_run_is_a_warning_and_the_outputs_are_written(smoke_run, smoke_tracking_uri,
                                                                          smoke_runner, monkeypatch, caplog):
    """MLflow fails on every artifact upload (injected); the fold tail still runs and writes its outputs, and the
    log names what was not logged. With `mlflow.strict: true` the same failure stops the run."""
    import logging

    def refuse(self, *args, **kwargs):
        raise OSError("artifact store unreachable")

    card = SMOKE / "06_models" / "heldout_sst2" / "fold.json"
    card.unlink()
    monkeypatch.setattr(MlflowClient, "log_artifacts", refuse)
    with caplog.at_level(logging.WARNING, logger="learned_attribution.services.tracking"):
        smoke_runner("folds", smoke_tracking_uri, only_missing_outputs=True)
    assert card.is_file()
    assert "was not logged (OSError: artifact store unreachable)" in caplog.text
    card.unlink()
    with pytest.raises(OSError, match="artifact store unreachable"):
        smoke_runner("folds", smoke_tracking_uri, {"mlflow": {"tracking_uri": smoke_tracking_uri,
                                                              "experiment": "crosstask-smoke", "strict": True}},
                     only_missing_outputs=True)
    assert card.is_file()  # saved before the hook failed: strict stops the run, it does not undo outputs


def test_the_results_document_is_written_from_the_runs_reports(smoke_run, tmp_path):
    """`learned-attribution results` on the smoke run's reports: one headline row per fold with the numbers of
    crosstask_metrics.csv, the cost and timing sections, the fold charts copied beside the document."""
    from learned_attribution.adapters.cli import main

    readme = tmp_path / "README.md"
    readme.write_text("<!-- results:headline -->\n<!-- /results:headline -->\n")
    assert main(["results", "--reports", str(SMOKE / "08_reporting"), "--output", str(tmp_path / "results.md"),
                 "--readme", str(readme)]) == 0
    document = (tmp_path / "results.md").read_text()
    metrics = pd.read_csv(SMOKE / "08_reporting" / "crosstask_metrics.csv")
    for fold in FOLDS:
        for mode in ("predicted", "gold"):
            plus = metrics[(metrics["fold"] == fold) & (metrics["method"] == "expnet_plus")
                           & (metrics["rule"] == "matched") & (metrics["subset"] == "all")
                           & (metrics["mode"] == mode)].iloc[0]
            row = f"| {fold.removeprefix('heldout_')} (n = {int(plus['n_examples'])}) | {mode} | **{plus['auroc']:.3f} "
            assert row in document and row in readme.read_text()
        assert (tmp_path / "images" / f"cost_{fold.removeprefix('heldout_')}.png").is_file()
    assert "## Where the time went" in document and "## Cost against plausibility" in document
    # the run wrote its identity when it finished, and every section names the run by it
    from learned_attribution.services.checkout import git_commit
    from learned_attribution.services.record.runs import read_identities

    run = read_identities(SMOKE / "08_reporting")["crosstask"]
    assert run.commit == git_commit(Path(__file__).parent) and run.env == "smoke"
    assert run.kernels == pd.read_csv(SMOKE / "08_reporting" / "node_timings" / "crosstask.csv")["kernels"].iloc[0]
    assert document.count(f"*From the {run.label}.*") >= 8 and f"*From the {run.label}.*" in readme.read_text()
