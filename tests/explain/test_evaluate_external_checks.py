"""evaluate_external's pieces called directly, without Kedro: settings and outputs checked
before any work, what the MLflow hook logs of the run, all-zero and all-one rationale files, and `max_examples`
applied before prediction."""
from __future__ import annotations

import errno
import json
import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from learned_attribution.adapters.hooks.runs import EXTERNAL, kind_of
from learned_attribution.core.data import rationales
from learned_attribution.core.data.rationales import RationaleFileError, parse_rationale_lines, read_rationale_file
from learned_attribution.core.models.loading import load_classifier
from learned_attribution.pipelines.evaluate_external import create_pipeline
from learned_attribution.pipelines.evaluate_external.nodes import parse_settings
from learned_attribution.services.config import ComputeSettings, ScoringSettings
from learned_attribution.services.config import ExternalSettings, RunParameters, external_settings
from learned_attribution.services.evaluation import external
from learned_attribution.services.evaluation.protocol import rationale_test_examples

PROJECT_ROOT = Path(__file__).resolve().parents[2]
WORDS = ["the", "movie", "is", "great", "fun"]
CPU = ComputeSettings(torch.device("cpu"), False)


def settings_for(file: Path | str, **extra) -> ExternalSettings:
    return external_settings({"file": str(file), "classifier_task": "sst2", "expnet_fold": "heldout_sst2",
                                       "max_examples": None, "batch_size": 4, "mlflow_experiment": "external",
                                       **extra})


def scoring_for(settings: ExternalSettings, seed: int = 0) -> ScoringSettings:
    scoring = ScoringSettings(baselines={}, expensive=(), expensive_sample_size=None, max_test_examples=None,
                              batch_size=8, n_boot=10, boot_seed=0, faithfulness_fractions=(0.5,),
                              faithfulness_batch_size=8, layer=-1, seed=seed)
    return external.capped(scoring, settings)


def write_jsonl(path: Path, rationales: list[list[int]]) -> Path:
    path.write_text("".join(json.dumps({"words": WORDS[:len(r)], "rationale": r, "label": i % 2}) + "\n"
                            for i, r in enumerate(rationales)))
    return path


@pytest.fixture
def classifier(tmp_path, classifier_writer):
    return load_classifier(classifier_writer(tmp_path / "classifier"))


def _parameters(env: str = "base") -> dict:
    from kedro.config import OmegaConfigLoader

    from learned_attribution.settings import CONFIG_LOADER_ARGS

    return OmegaConfigLoader(str(PROJECT_ROOT / "conf"), env=env, **CONFIG_LOADER_ARGS)["parameters"]


# ---- settings and writable outputs, checked first -----------------------------------------------------------------

def test_the_output_check_creates_missing_folders_and_names_an_unwritable_one(tmp_path, monkeypatch):
    out = [str(tmp_path / "08_reporting" / "external"), str(tmp_path / "08_reporting" / "node_timings")]
    external.check_writable(out)
    for folder in out:
        assert Path(folder).is_dir() and list(Path(folder).iterdir()) == []  # made, and the probe cleaned up

    def refuse(folder):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(external, "probe_writable", refuse)
    with pytest.raises(OSError, match=rf"parameter external_outputs: cannot write in {out[0]} \(No space left on "
                                      r"device\): evaluate_external would fail at its last save"):
        external.check_writable(out)


def test_the_first_node_parses_every_block_and_checks_the_outputs(tmp_path, monkeypatch):
    params = _parameters()
    probed = []
    monkeypatch.setattr(external, "check_writable", probed.append)
    block = {**params["evaluate_external"], "max_examples": 7}
    settings, scoring, compute = parse_settings(block, params["crosstask"], params["explained_layer"], 3,
                                                {**params["compute"], "device": "cpu"}, ["out"])
    assert settings == external_settings(block) and probed == [["out"]]
    assert scoring.max_test_examples == 7 and scoring.seed == 3 and scoring.layer == params["explained_layer"]
    assert compute.device == torch.device("cpu")
    with pytest.raises(ValueError, match="evaluate_external.file"):
        parse_settings({**block, "file": None}, params["crosstask"], -1, 0, params["compute"], [])
    assert probed == [["out"]]  # a bad setting stops before the probe


def test_the_first_node_runs_before_every_other_node():
    pipe = create_pipeline()
    by_name = {n.name.split(".")[-1]: n for n in pipe.nodes}
    first = by_name["parse_settings"]
    for name, node in by_name.items():
        if name != "parse_settings":
            assert first.name in {n.name for n in pipe.to_nodes(node.name).nodes}, f"{name} may run before the check"
    assert "params:external_outputs" in first.inputs


@pytest.mark.parametrize("env, root", [("base", "data"), ("smoke", "data/smoke")])
def test_the_output_folders_parameter_follows_the_environments_data_root(env, root):
    assert _parameters(env)["external_outputs"] == [f"{root}/08_reporting/external",
                                                    f"{root}/08_reporting/node_timings"]


def test_the_mlflow_hook_logs_the_pipelines_outputs_with_the_runs_parameters():
    pipe = create_pipeline()
    outputs = {name.removeprefix("evaluate_external.") for name in pipe.all_outputs()}
    assert kind_of("evaluate_external") is EXTERNAL
    assert set(EXTERNAL.outputs) == {"metrics_table", "explain_failures", "explain_cost", "counts", "metrics_plot"}
    assert set(EXTERNAL.outputs) <= outputs
    params = {**_parameters(), "evaluate_external": {**_parameters()["evaluate_external"], "file": "x/mine.jsonl",
                                                     "classifier_task": "cola"}}
    params = RunParameters(params)
    logged = EXTERNAL.params("evaluate_external", params)
    assert {key: logged[key] for key in ("file", "classifier_task", "expnet_fold", "fold_held_out_task",
                                         "classifier_is_folds_held_out", "max_examples")} == {
        "file": "x/mine.jsonl", "classifier_task": "cola", "expnet_fold": "heldout_sst2",
        "fold_held_out_task": "sst2", "classifier_is_folds_held_out": False, "max_examples": None}
    assert logged["file_resolved"] == str(Path("x/mine.jsonl").resolve())
    assert set(logged["crosstask"]) == {"baselines", "expensive", "expensive_sample_size", "bootstrap"}
    # the run's title is its metrics chart's (`ExternalSettings.title`): one title for both
    assert EXTERNAL.run_name("evaluate_external", params) == "mine.jsonl: cola classifier, heldout_sst2 ExpNet"
    assert EXTERNAL.tags("evaluate_external", params) == {"file": "x/mine.jsonl", "classifier_task": "cola",
                                                          "expnet_fold": "heldout_sst2"}
    assert EXTERNAL.experiment(params) == "external"


def test_the_run_counts_are_the_numbers_the_run_logs():
    examples = parse_rationale_lines("".join(json.dumps({"words": WORDS[:3], "rationale": r, "label": 1}) + "\n"
                                             for r in ([0, 1, 0], [0, 0, 0], [1, 1, 1])), "f.jsonl")
    predictions = pd.DataFrame({"token_labels": [[-100, 0, 1, 0, -100], [-100, 1, 1, 1, -100]],
                                "truncated": [False, True], "correct": [True, False]})
    counts = external.run_counts(external.file_counts(examples), predictions, pd.DataFrame({"method": ["lime"]}),
                                 {"rho": 0.25, "threshold": 0.5, "n_train_tokens": 10, "note": "text"})
    assert counts == {"budget/rho": 0.25, "budget/threshold": 0.5, "budget/n_train_tokens": 10.0,
                      "examples/in_file": 3.0, "examples/with_rationale_words": 2.0, "examples/scored": 2.0,
                      "examples/truncated": 1.0, "examples/all_tokens_rationale": 1.0,
                      "examples/explain_failures": 1.0, "classifier/accuracy_scored": 0.5}


# ---- all-zero and all-one rationale files -------------------------------------------------------------------------

def test_an_all_zero_file_stops_with_counts_and_no_key_error(tmp_path):
    source = write_jsonl(tmp_path / "zeros.jsonl", [[0, 0, 0], [0, 0]])
    with pytest.raises(RationaleFileError, match=r"zeros.jsonl: none of the 2 examples marks a rationale word"):
        read_rationale_file(source)


def test_examples_without_rationale_words_are_counted_as_skipped(tmp_path, caplog):
    source = write_jsonl(tmp_path / "some.jsonl", [[0, 0, 0], [0, 1], [1, 0, 0]])
    with caplog.at_level(logging.INFO, logger=rationales.__name__):
        examples = read_rationale_file(source)
    assert len(examples) == 3
    assert "1 of 3 examples have no rationale word: skipped (not scored, SPEC §1)" in caplog.text


def test_rationales_cut_off_by_truncation_stop_the_run_naming_max_length(tmp_path, classifier):
    examples = parse_rationale_lines(json.dumps({"words": WORDS, "rationale": [0, 0, 0, 0, 1], "label": 1}),
                                     "late.jsonl")
    settings = settings_for("late.jsonl")
    with pytest.raises(RationaleFileError, match=r"late.jsonl: none of the 1 examples keeps a rationale token "
                                                 r"within max_length=4"):
        external.predict(examples, classifier, 4, settings, scoring_for(settings), CPU)


def test_an_all_one_file_warns_that_auroc_is_undefined_and_scores_without_error(tmp_path, classifier, caplog):
    source = write_jsonl(tmp_path / "ones.jsonl", [[1, 1, 1], [1, 1], [1, 1, 1, 1]])
    settings = settings_for(source)
    examples = read_rationale_file(source)
    with caplog.at_level(logging.WARNING, logger=external.__name__):
        predictions = external.predict(examples, classifier, 16, settings, scoring_for(settings), CPU)
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

    metrics = external.metrics_table(token_scores, token_scores.iloc[:0], predictions, faithfulness,
                                     {"rho": 0.4, "threshold": 0.5, "calibrated_threshold": 0.5}, Plus(),
                                     scoring_for(settings), settings)
    row = metrics[(metrics["method"] == "saliency") & (metrics["rule"] == "matched") & (metrics["subset"] == "all")]
    assert row["n_auroc_undefined"].iloc[0] == 3 and np.isnan(row["auroc"].iloc[0])
    assert row["recall"].iloc[0] > 0
    assert set(metrics["file"]) == {str(source)} and set(metrics["classifier_task"]) == {"sst2"}
    assert external.run_counts(external.file_counts(examples), predictions, pd.DataFrame(), {})[
        "examples/all_tokens_rationale"] == 3


def test_the_file_read_must_be_the_file_the_parameters_name(tmp_path, classifier, monkeypatch):
    source = write_jsonl(tmp_path / "read.jsonl", [[0, 1, 0]])
    examples = read_rationale_file(source)
    assert examples.attrs["file"] == str(source)
    monkeypatch.chdir(tmp_path)  # the catalog reads an absolute path; the parameter may be relative to the root
    same = settings_for("read.jsonl")
    assert len(external.predict(examples, classifier, 16, same, scoring_for(same), CPU)) == 1
    settings = settings_for(tmp_path / "other.jsonl")
    with pytest.raises(ValueError, match=r"the rationale file read is .*read.jsonl but parameter "
                                         r"evaluate_external.file is .*other.jsonl \(.*other.jsonl\): set it with --params"):
        external.predict(examples, classifier, 16, settings, scoring_for(settings), CPU)


# ---- max_examples bounds the work ---------------------------------------------------------------------------------

def test_max_examples_is_applied_before_prediction_with_a_progress_bar(tmp_path, classifier, monkeypatch):
    rationales_ = [[int(i % 3 == j) for j in range(5)] for i in range(12)]
    rationales_[4] = [0, 0, 0, 0, 0]  # never scored: not predicted either
    source = write_jsonl(tmp_path / "many.jsonl", rationales_)
    settings = settings_for(source, max_examples=5)
    examples = read_rationale_file(source)
    calls = []
    real = external.predict_proba

    def counting(model, ids, *args, **kwargs):
        calls.append((len(ids), kwargs.get("desc")))
        return real(model, ids, *args, **kwargs)

    monkeypatch.setattr(external, "predict_proba", counting)
    predictions = external.predict(examples, classifier, 16, settings, scoring_for(settings, 13), CPU)
    assert [n for n, _ in calls] == [5] and calls[0][1]  # 5 texts predicted, not 12, with a progress bar
    assert len(predictions) == 5 and "line5" not in set(predictions["example_id"])
    # The downstream nodes' own seeded cap keeps the same examples.
    assert rationale_test_examples(predictions, max_examples=5, seed=13)["example_id"].tolist() == \
        predictions["example_id"].tolist()
    again = external.predict(examples, classifier, 16, settings, scoring_for(settings, 13), CPU)
    assert again["example_id"].tolist() == predictions["example_id"].tolist()  # seeded
