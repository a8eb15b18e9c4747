"""evaluate_external's nodes called directly, without Kedro (issue 11, failure 3): outputs (and the MLflow store)
checked before any work, the MLflow run logged only after the metrics are saved, all-zero and all-one rationale
files, and `max_examples` applied before prediction."""
from __future__ import annotations

import errno
import json
import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from learned_attribution.services.evaluation import rationale_test_examples
from learned_attribution.services.explain import load_classifier
from learned_attribution.pipelines.evaluate_external import create_pipeline, nodes
from learned_attribution.pipelines.evaluate_external.nodes import (ExternalRationaleError, check_external_outputs,
                                                                   log_external_run, metrics_partition_name,
                                                                   parse_external_rationales, predict_external,
                                                                   read_external_rationales, score_external)

PROJECT_ROOT = Path(__file__).resolve().parents[2]
WORDS = ["the", "movie", "is", "great", "fun"]


def settings_for(file: Path | str, **extra) -> dict:
    return {"file": str(file), "classifier_task": "sst2", "expnet_fold": "heldout_sst2", "batch_size": 4, **extra}


def write_jsonl(path: Path, rationales: list[list[int]]) -> Path:
    path.write_text("".join(json.dumps({"words": WORDS[:len(r)], "rationale": r, "label": i % 2}) + "\n"
                            for i, r in enumerate(rationales)))
    return path


@pytest.fixture
def classifier(tmp_path, classifier_writer):
    return load_classifier(classifier_writer(tmp_path / "classifier"))


# ---- writable outputs, checked first ------------------------------------------------------------------------------

def test_the_output_check_creates_missing_folders_and_names_an_unwritable_one(tmp_path, monkeypatch):
    checked = []
    monkeypatch.setattr("learned_attribution.services.tracking.check_store", checked.append)
    settings = settings_for("f.jsonl")
    out = [str(tmp_path / "08_reporting" / "external"), str(tmp_path / "08_reporting")]
    assert check_external_outputs(settings, out, {"tracking_uri": f"sqlite:///{tmp_path / 'm.db'}"}) == {
        **nodes.OPTIONAL_SETTINGS, **settings}
    assert Path(out[0]).is_dir() and list(Path(out[0]).iterdir()) == []  # made, and the probe cleaned up
    assert checked == [f"sqlite:///{tmp_path / 'm.db'}"]

    def refuse(folder):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(nodes, "probe_writable", refuse)
    with pytest.raises(OSError, match=rf"parameter external_outputs: cannot write in {out[0]} \(No space left on "
                                      r"device\): evaluate_external would fail at its last save"):
        check_external_outputs(settings, out, {})
    with pytest.raises(ValueError, match="evaluate_external.file"):
        check_external_outputs({}, out, {})


def test_the_check_runs_before_every_node_and_mlflow_is_logged_after_the_metrics_are_saved():
    pipe = create_pipeline()
    by_name = {n.name.split(".")[-1]: n for n in pipe.nodes}
    first = by_name["check_external_outputs"]
    for name, node in by_name.items():
        if name != "check_external_outputs":
            assert first.name in {n.name for n in pipe.to_nodes(node.name).nodes}, f"{name} may run before the check"
    saved = by_name["save_metrics"].outputs
    assert set(saved) <= set(by_name["log_external_run"].inputs)  # the run is logged once the CSV is on disk
    assert "params:external_outputs" in first.inputs


@pytest.mark.parametrize("env, root", [("base", "data"), ("smoke", "data/smoke")])
def test_the_output_folders_parameter_follows_the_environments_data_root(env, root):
    from kedro.config import OmegaConfigLoader

    from learned_attribution.settings import CONFIG_LOADER_ARGS

    params = OmegaConfigLoader(str(PROJECT_ROOT / "conf"), env=env, **CONFIG_LOADER_ARGS)["parameters"]
    assert params["external_outputs"] == [f"{root}/08_reporting/external", f"{root}/08_reporting"]


def test_the_mlflow_run_is_not_started_when_the_metrics_were_not_saved(monkeypatch):
    def no_store(uri):
        raise AssertionError("MLflow was reached")

    monkeypatch.setattr("learned_attribution.services.tracking.check_store", no_store)
    settings = settings_for("f.jsonl")
    with pytest.raises(RuntimeError, match=rf"{metrics_partition_name(settings)}.csv was not saved"):
        log_external_run(pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), {}, settings, {}, {}, 16,
                         pd.DataFrame(), {})


# ---- all-zero and all-one rationale files -------------------------------------------------------------------------

def test_an_all_zero_file_stops_with_counts_and_no_key_error(tmp_path):
    source = write_jsonl(tmp_path / "zeros.jsonl", [[0, 0, 0], [0, 0]])
    with pytest.raises(ExternalRationaleError, match=r"zeros.jsonl: none of the 2 examples marks a rationale word"):
        read_external_rationales(settings_for(source))


def test_examples_without_rationale_words_are_counted_as_skipped(tmp_path, caplog):
    source = write_jsonl(tmp_path / "some.jsonl", [[0, 0, 0], [0, 1], [1, 0, 0]])
    with caplog.at_level(logging.INFO, logger=nodes.__name__):
        examples = read_external_rationales(settings_for(source))
    assert len(examples) == 3
    assert "1 of 3 examples have no rationale word: skipped (not scored, SPEC §1)" in caplog.text


def test_rationales_cut_off_by_truncation_stop_the_run_naming_max_length(tmp_path, classifier):
    examples = parse_external_rationales(json.dumps({"words": WORDS, "rationale": [0, 0, 0, 0, 1], "label": 1}),
                                         "late.jsonl")
    with pytest.raises(ExternalRationaleError, match=r"late.jsonl: none of the 1 examples keeps a rationale token "
                                                     r"within max_length=4"):
        predict_external(examples, classifier, 4, settings_for("late.jsonl"))


def test_an_all_one_file_warns_that_auroc_is_undefined_and_scores_without_error(tmp_path, classifier, caplog):
    source = write_jsonl(tmp_path / "ones.jsonl", [[1, 1, 1], [1, 1], [1, 1, 1, 1]])
    settings = settings_for(source)
    examples = read_external_rationales(settings)
    with caplog.at_level(logging.WARNING, logger=nodes.__name__):
        predictions = predict_external(examples, classifier, 16, settings)
    assert "3 of 3 scored examples mark every token as rationale: their per-example AUROC and AUPRC are undefined" \
        in caplog.text
    token_scores = predictions[["example_id", "label", "predicted", "correct"]].assign(
        method="saliency", family="gradient", model_calls=1, in_sample=True,
        scores=[list(np.linspace(0, 1, len(t) - 2)) for t in predictions["token_labels"]],
        gold=[[1] * (len(t) - 2) for t in predictions["token_labels"]])
    faithfulness = pd.DataFrame({"method": "saliency", "example_id": predictions["example_id"],
                                 "comprehensiveness": 0.1, "sufficiency": 0.2})

    class Plus:
        calibrated_threshold = 0.5

    metrics = score_external(token_scores, predictions, faithfulness, {"rho": 0.4, "threshold": 0.5,
                                                                       "calibrated_threshold": 0.5}, Plus(),
                             {"bootstrap": {"n_boot": 10, "seed": 0}}, settings, 0)
    row = metrics[(metrics["method"] == "saliency") & (metrics["rule"] == "matched") & (metrics["subset"] == "all")]
    assert row["n_auroc_undefined"].iloc[0] == 3 and np.isnan(row["auroc"].iloc[0])
    assert row["recall"].iloc[0] > 0


# ---- max_examples bounds the work ---------------------------------------------------------------------------------

def test_max_examples_is_applied_before_prediction_with_a_progress_bar(tmp_path, classifier, monkeypatch):
    rationales = [[int(i % 3 == j) for j in range(5)] for i in range(12)]
    rationales[4] = [0, 0, 0, 0, 0]  # never scored: not predicted either
    source = write_jsonl(tmp_path / "many.jsonl", rationales)
    settings = settings_for(source, max_examples=5)
    examples = read_external_rationales(settings)
    calls = []
    real = nodes.predict_proba

    def counting(model, ids, *args, **kwargs):
        calls.append((len(ids), kwargs.get("desc")))
        return real(model, ids, *args, **kwargs)

    monkeypatch.setattr(nodes, "predict_proba", counting)
    predictions = predict_external(examples, classifier, 16, settings, None, 13)
    assert [n for n, _ in calls] == [5] and calls[0][1]  # 5 texts predicted, not 12, with a progress bar
    assert len(predictions) == 5 and "line5" not in set(predictions["example_id"])
    # The downstream nodes' own seeded cap keeps the same examples.
    assert rationale_test_examples(predictions, max_examples=5, seed=13)["example_id"].tolist() == \
        predictions["example_id"].tolist()
    again = predict_external(examples, classifier, 16, settings, None, 13)
    assert again["example_id"].tolist() == predictions["example_id"].tolist()  # seeded
