"""`kedro run --pipeline amortize --env smoke` on a slice of the real data (after the smoke crosstask run): a student
per task classifier, its reports, its MLflow run and registered pyfunc model, resume of a killed teacher, and the
student applied through the CLI."""
from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr
from mlflow.tracking import MlflowClient

pytestmark = pytest.mark.integration

PROJECT_ROOT = Path(__file__).resolve().parents[2]
TASKS = ("hatexplain", "sst2", "cola")


def student_run(client: MlflowClient, name: str):
    """The latest MLflow run of a student (the hook logs one per namespace into experiment `amortize`)."""
    experiment = client.get_experiment_by_name("amortize")
    [run] = client.search_runs([experiment.experiment_id], f"attributes.run_name = '{name}'", max_results=1,
                               order_by=["attributes.start_time DESC"])
    return run


@pytest.fixture(scope="module")
def amortize_run(smoke_crosstask_run, smoke_runner, smoke_tracking_uri):
    # Teacher parts of an earlier run's classifiers stay in the cache under other names: start from none.
    shutil.rmtree(smoke_crosstask_run / "05_model_input" / "amortize", ignore_errors=True)
    smoke_runner("amortize", smoke_tracking_uri)
    return smoke_crosstask_run


def test_every_task_classifier_gets_a_scored_logged_and_registered_student(amortize_run, smoke_tracking_uri,
                                                                            tmp_path):
    reports = amortize_run / "08_reporting" / "amortize"
    summary = (amortize_run / "08_reporting" / "amortize.md").read_text()
    identity = json.loads((amortize_run / "08_reporting" / "runs" / "amortize.json").read_text())
    assert identity["params"]["mlflow"]["tracking_uri"] == smoke_tracking_uri  # the run's --params, as given
    client = MlflowClient(tracking_uri=smoke_tracking_uri)
    for task in TASKS:
        card = json.loads((amortize_run / "06_models" / f"student_{task}" / "fold.json").read_text())
        assert card["kind"] == "student" and card["teacher"]["method"] == "kernel_shap"
        fidelity = pd.read_csv(reports / f"{task}_fidelity.csv").set_index("method")
        assert "student" in fidelity.index
        # The teacher's row, recomputed here with scipy from the saved held-out and reference teacher scores.
        held = pd.read_parquet(amortize_run / "07_model_output" / "amortize" / f"{task}_held_out_teacher.parquet")
        reference = pd.read_parquet(amortize_run / "07_model_output" / "amortize" / f"{task}_reference_teacher.parquet")
        by_id = dict(zip(reference["example_id"], reference["scores"]))
        with np.errstate(invalid="ignore"):
            rhos = [spearmanr(s, by_id[i]).statistic for i, s in zip(held["example_id"], held["scores"]) if i in by_id]
        teacher = fidelity[fidelity.index.str.startswith("teacher")].iloc[0]
        assert teacher["spearman"] == pytest.approx(np.nanmean(rhos), abs=1e-9)
        assert (fidelity["n_examples"] == 10).all()  # the held-out texts, none of them trained on
        faithfulness = pd.read_csv(reports / f"{task}_faithfulness.csv")
        assert {"student", "saliency"} <= set(faithfulness["method"])
        plausibility = pd.read_csv(reports / f"{task}_plausibility.csv")
        assert {"student", "saliency", "expnet_plus"} <= set(plausibility["method"])
        # The classifier's one table, through the catalog: the same numbers as the tables it is made of.
        table = pd.read_csv(reports / f"{task}_table.csv").set_index("method")
        assert list(table.index) == ["student", teacher.name, "saliency", "expnet_plus"]
        assert table.at["student", "spearman"] == pytest.approx(fidelity.at["student", "spearman"])
        matched = plausibility[(plausibility["subset"] == "all") & (plausibility["rule"] == "matched")]
        assert table.at["student", "auroc"] == pytest.approx(matched.set_index("method").at["student", "auroc"])
        train = pd.read_parquet(amortize_run / "05_model_input" / "amortize" / f"{task}_train_texts.parquet")
        predictions = pd.read_parquet(amortize_run / "07_model_output" / f"rationale_predictions_{task}.parquet")
        test_ids = set(predictions.loc[predictions["role"] == "rationale_test", "example_id"])
        assert not set(train["example_id"]) & test_ids  # never a text of the rationale test set
        assert f"## {task}" in summary
        logged = student_run(client, f"student_{task}")
        assert logged.info.status == "FINISHED" and "fidelity.student.spearman" in logged.data.metrics
        assert {"variants.csv", "fidelity.csv", "plausibility.csv", "report.md"} <= \
            {a.path for a in client.list_artifacts(logged.info.run_id)}
        name, number = logged.data.tags["registered_model"].removeprefix("models:/").split("/")
        assert name == f"amortize-student_{task}"
        assert client.get_model_version(name, number).run_id == logged.info.run_id
        # Loaded from the run's artifacts with this client (mlflow.set_tracking_uri would leak into later tests).
        (tmp_path / task).mkdir()
        model = mlflow.pyfunc.load_model(client.download_artifacts(logged.info.run_id, "explainer",
                                                                   str(tmp_path / task)))
        [record] = model.predict(pd.DataFrame({"text": ["a gutsy and exhilarating movie ."]}))
        assert set(record["scores"]) == {"student", "kernel_shap"}


def test_a_killed_teacher_resumes_from_its_parts(amortize_run, smoke_runner, smoke_tracking_uri, caplog):
    caplog.set_level(logging.INFO, logger="learned_attribution.services.amortize")
    parts = amortize_run / "05_model_input" / "amortize" / "sst2_teacher_parts" / "train"
    files = sorted(parts.iterdir())
    assert len(files) == 4  # 60 texts, 16 a part
    files[-1].unlink()  # the run was killed while the last part was computed: the output was never written
    (amortize_run / "07_model_output" / "amortize" / "sst2_teacher.parquet").unlink()
    before = pd.read_parquet(amortize_run / "07_model_output" / "amortize" / "sst2_held_out_teacher.parquet")
    smoke_runner("amortize", smoke_tracking_uri, only_missing_outputs=True)
    assert "3 of 4 parts already in" in caplog.text
    assert len(list(parts.iterdir())) == 4
    after = pd.read_parquet(amortize_run / "07_model_output" / "amortize" / "sst2_held_out_teacher.parquet")
    pd.testing.assert_frame_equal(before, after)


def test_the_student_explains_new_text_from_the_cli(amortize_run, tmp_path, monkeypatch):
    from learned_attribution.adapters.cli import main

    out = tmp_path / "out.jsonl"
    monkeypatch.chdir(PROJECT_ROOT)
    code = main(["explain", "--explainer", str(PROJECT_ROOT / "data/smoke/06_models/student_cola"),
                 "the book was read by me .", "--output", str(out), "--html", str(tmp_path / "out.html")])
    assert code == 0
    record = json.loads(out.read_text())
    assert set(record["scores"]) == {"student", "kernel_shap"} and len(record["words"]) == 7


def test_the_learning_curve_refits_the_student_on_shares_of_its_texts(amortize_run, tmp_path, monkeypatch):
    """benchmarks/student_learning_curve.py on the smoke run's outputs: nested shares of the teacher's texts, and at
    the full share the pipeline's own student (the same fit, scored as the pipeline scored it)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("student_learning_curve",
                                                  PROJECT_ROOT / "benchmarks" / "student_learning_curve.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    monkeypatch.chdir(PROJECT_ROOT)
    table = script.main(["--env", "smoke", "--tasks", "sst2", "--fractions", "1", "0.5", "--output-dir", str(tmp_path)])
    assert list(table["n_texts"]) == [30, 60] and list(table["fraction"]) == [0.5, 1.0]
    pd.testing.assert_frame_equal(table, pd.read_csv(tmp_path / "student_learning_curve.csv"), atol=1e-4)
    identity = json.loads((tmp_path / "student_learning_curve.json").read_text())  # which run, written last
    assert identity["pipeline"] == "student_learning_curve" and identity["env"] == "smoke" and identity["finished"]
    pipeline = pd.read_csv(amortize_run / "08_reporting" / "amortize" / "sst2_fidelity.csv").set_index("method")
    assert table["spearman"].iloc[-1] == pytest.approx(pipeline.at["student", "spearman"], abs=1e-3)
    variants = pd.read_csv(amortize_run / "08_reporting" / "amortize" / "sst2_variants.csv")
    assert table["variant"].iloc[-1] == variants.loc[variants["selected"], "variant"].item()
    with pytest.raises(ValueError, match="fractions"):
        script.main(["--env", "smoke", "--tasks", "sst2", "--fractions", "1.5", "--output-dir", str(tmp_path)])


def test_a_users_classifier_and_text_file_by_parameters(smoke_crosstask_run, smoke_runner, smoke_tracking_uri,
                                                        tmp_path, caplog):
    """`kedro run --pipeline amortize_own --params "own.classifier=DIR,own.texts=FILE"`: the smoke CoLA classifier
    (not the default SST-2 one) and a .txt file with a blank line and a text too short to rank."""
    from learned_attribution import StudentExplainer

    records = [json.loads(line) for line in (PROJECT_ROOT / "data/01_raw/external/example_rationales.jsonl")
               .read_text().splitlines()]
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join([" ".join(r["words"]) for r in records] + ["", "Hi"]) + "\n")
    classifier = smoke_crosstask_run / "06_models" / "classifier_cola"
    caplog.set_level(logging.WARNING)
    smoke_runner("amortize_own", smoke_tracking_uri,
                 {"own": {"classifier": str(classifier), "texts": str(texts)}})
    assert "skipped 1 blank line" in caplog.text
    reports = smoke_crosstask_run / "08_reporting" / "amortize"
    skipped = pd.read_csv(reports / "own_skipped_texts.csv")
    assert list(skipped["example_id"].astype(str)) == ["32"]  # "Hi": one real token, nothing to rank (line 32)
    train = pd.read_parquet(smoke_crosstask_run / "05_model_input" / "amortize" / "own_train_texts.parquet")
    fidelity = pd.read_csv(reports / "own_fidelity.csv")
    assert len(train) == 24 and (fidelity["n_examples"] == 6).all()  # 30 usable texts: a fifth held out
    assert pd.read_csv(reports / "own_table.csv")["auroc"].isna().all()  # no rationale test set
    card = json.loads((smoke_crosstask_run / "06_models" / "student_own" / "fold.json").read_text())
    assert Path(card["classifier"]) == classifier.resolve()
    logged = student_run(MlflowClient(tracking_uri=smoke_tracking_uri), "student_own")
    assert logged.info.status == "FINISHED" and "plausibility.student.auroc" not in logged.data.metrics
    assert logged.data.tags["registered_model"].startswith("models:/amortize-student_own/")
    explainer = StudentExplainer.from_folder(smoke_crosstask_run / "06_models" / "student_own")
    assert Path(explainer.classifier.path).resolve() == classifier.resolve()
    [result] = explainer.explain(["the book was read by me ."])
    assert set(result.word_scores) == {"student", "kernel_shap"}
