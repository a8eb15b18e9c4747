"""evaluate_external: the JSONL format's validation (file and line in every error), the fold selection, the
prediction step on a hand-set classifier, and `kedro run --pipeline evaluate_external --env smoke` end to end."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from learned_attribution.services.evaluation import METRIC_COLUMNS
from learned_attribution.adapters.hooks import fold_metric_entries
from learned_attribution.core.models.features import feature_names
from learned_attribution.pipelines.evaluate_external.nodes import (ExternalRationaleError, external_settings,
                                                                   fold_held_out_task, metrics_partition_name,
                                                                   parse_external_rationales, predict_external,
                                                                   read_external_rationales, select_fold_artifacts)

PROJECT_ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_FILE = PROJECT_ROOT / "data" / "01_raw" / "external" / "example_rationales.jsonl"
GOOD = {"words": ["a", "good", "film"], "rationale": [0, 1, 0], "label": 1}


def _jsonl(*records) -> str:
    return "\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n"


def test_a_valid_file_becomes_schema_rows_with_default_ids_and_blank_lines_skipped():
    text = _jsonl(GOOD, "", {**GOOD, "id": "x7", "label": 0}, {"words": ["bad"], "rationale": [0], "label": 0})
    frame = parse_external_rationales(text, "my.jsonl")
    assert frame["example_id"].tolist() == ["line1", "x7", "line4"]  # line 2 is blank
    assert frame["label"].tolist() == [1, 0, 0]
    assert frame["word_rationale"].tolist() == [[0, 1, 0], [0, 1, 0], [0]]
    assert frame["text"].iloc[0] == "a good film"
    assert set(frame["role"]) == {"rationale_test"}


@pytest.mark.parametrize("bad_line, expected", [
    ('{"words": ["a"], "rationale": [1], "label": 1', "line 2: not valid JSON"),
    ({**GOOD, "rationale": [0, 1]}, "line 2: 'rationale' has 2 entries but 'words' has 3"),
    ({**GOOD, "label": 2}, "line 2: 'label' must be an integer class in 0..1, got 2"),
    ({**GOOD, "label": True}, "line 2: 'label' must be an integer class in 0..1, got True"),
    ({**GOOD, "label": "1"}, "line 2: 'label' must be an integer class in 0..1"),
    ({"words": [], "rationale": [], "label": 0}, "line 2: 'words' must be a non-empty list of strings"),
    ({**GOOD, "words": ["a", "", "film"]}, "line 2: 'words' entries at positions [1]"),
    ({**GOOD, "rationale": [0, 2, 0]}, "line 2: 'rationale' entries must be 0 or 1 (positions [1]"),
    ({"words": ["a"], "label": 0}, "line 2: missing key(s) ['rationale']"),
    ([1, 2], "line 2: expected a JSON object, got list"),
    ({**GOOD, "id": "line1"}, "line 2: id 'line1' already used on line 1"),
])
def test_each_bad_line_is_reported_with_the_file_and_line(bad_line, expected):
    with pytest.raises(ExternalRationaleError) as error:
        parse_external_rationales(_jsonl(GOOD, bad_line), "data/mine.jsonl")
    assert str(error.value).startswith("data/mine.jsonl, line 2: ")
    assert expected in str(error.value)


def test_an_empty_file_and_a_missing_file_are_reported(tmp_path):
    with pytest.raises(ExternalRationaleError, match="empty.jsonl: no examples"):
        parse_external_rationales("\n  \n", "empty.jsonl")
    settings = {"file": str(tmp_path / "absent.jsonl"), "classifier_task": "sst2", "expnet_fold": "heldout_sst2"}
    with pytest.raises(FileNotFoundError, match="evaluate_external.file: no such file .*absent.jsonl"):
        read_external_rationales(settings)


def test_settings_get_defaults_and_missing_required_ones_are_named():
    settings = external_settings({"file": "f.jsonl", "classifier_task": "cola", "expnet_fold": "heldout_cola"})
    assert settings["batch_size"] == 64 and settings["max_examples"] is None
    assert settings["mlflow_experiment"] == "external"
    with pytest.raises(ValueError, match="evaluate_external.classifier_task, evaluate_external.expnet_fold not set"):
        external_settings({"file": "f.jsonl"})
    assert metrics_partition_name(settings) == "metrics_f_cola_heldout_cola"
    assert fold_held_out_task("heldout_hatexplain") == "hatexplain"
    with pytest.raises(ValueError, match="expnet_fold must be one of"):
        fold_held_out_task("sst2")


def test_the_shipped_example_file_is_valid():
    frame = parse_external_rationales(EXAMPLE_FILE.read_text(encoding="utf-8"), str(EXAMPLE_FILE))
    assert len(frame) == 30 and frame["example_id"].is_unique
    assert frame["example_id"].str.startswith("sst2:test:tree").all()
    assert set(frame["label"]) == {0, 1}
    assert frame["word_rationale"].map(sum).gt(0).all()


class _Fake:
    """Stands in for a loaded TrainedClassifier / LearnedExplainer: only the attributes the selection reads."""

    def __init__(self, **attributes):
        self.__dict__.update(attributes)


def _artifacts(n_heads_by_task: dict[str, int], n_features: int):
    artifacts = {}
    for task in ("hatexplain", "sst2", "cola"):
        config = _Fake(num_attention_heads=n_heads_by_task.get(task, 2))
        artifacts[f"classifier_{task}"] = _Fake(model=_Fake(config=config), task=task)
        artifacts[f"expnet_heldout_{task}"] = _Fake(columns=feature_names(n_features // 2), calibrated_threshold=0.125,
                                                    fold=task)
        artifacts[f"expnet_plus_heldout_{task}"] = _Fake(fold=task)
        artifacts[f"budget_heldout_{task}"] = {"rho": {"hatexplain": 0.4, "sst2": 0.3, "cola": 0.2}[task],
                                               "threshold": 0.5, "calibrated_threshold": 0.125}
    return artifacts


def test_the_chosen_classifier_and_fold_are_selected_and_encoders_must_match():
    settings = {"file": "f.jsonl", "classifier_task": "cola", "expnet_fold": "heldout_sst2"}
    classifier, expnet, expnet_plus, budget = select_fold_artifacts(settings, **_artifacts({}, n_features=4))
    assert classifier.task == "cola" and expnet.fold == "sst2" and expnet_plus.fold == "sst2"
    assert budget == {"rho": 0.3, "threshold": 0.5, "calibrated_threshold": 0.125}
    with pytest.raises(ValueError, match="reads 4 attention features but the cola classifier has 12 heads"):
        select_fold_artifacts(settings, **_artifacts({"cola": 12}, n_features=4))
    with pytest.raises(ValueError, match="classifier_task must be one of"):
        select_fold_artifacts({**settings, "classifier_task": "imdb"}, **_artifacts({}, n_features=4))


def test_prediction_on_a_classifier_whose_bias_always_picks_class_one(tiny_bert_classifier):
    from learned_attribution.adapters.kedro_datasets import TrainedClassifier
    from learned_attribution.core.models.encoder import PACKAGED_ENCODER, load_tokenizer

    tokenizer = load_tokenizer(PACKAGED_ENCODER)
    model = tiny_bert_classifier(vocab_size=tokenizer.vocab_size, max_position_embeddings=16)
    with torch.no_grad():
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.tensor([0.0, 2.0]))  # p(1) = 1 / (1 + e^-2) whatever the input
    examples = parse_external_rationales(_jsonl(GOOD, {"words": ["bad"], "rationale": [1], "label": 0}), "f.jsonl")
    settings = {"file": "f.jsonl", "classifier_task": "sst2", "expnet_fold": "heldout_sst2", "batch_size": 1}
    predicted = predict_external(examples, TrainedClassifier(model, tokenizer), 16, settings)
    assert predicted["predicted"].tolist() == [1, 1]
    assert predicted["correct"].tolist() == [True, False]
    np.testing.assert_allclose(predicted["probability"], 1 / (1 + np.exp(-2.0)), rtol=1e-6)
    # "a good film" -> [CLS] a good film [SEP]: the word labels land on their subwords
    assert list(predicted["token_labels"].iloc[0]) == [-100, 0, 1, 0, -100]
    with pytest.raises(ExternalRationaleError, match="has label 2 but the sst2 classifier has 2 classes"):
        three = parse_external_rationales(_jsonl({**GOOD, "label": 2}), "f.jsonl", n_classes=3)
        predict_external(three, TrainedClassifier(model, tokenizer), 16, settings)


def _run_evaluate_external(runtime_params: dict) -> None:
    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    bootstrap_project(PROJECT_ROOT)
    with KedroSession.create(project_path=PROJECT_ROOT, env="smoke", runtime_params=runtime_params) as session:
        session.run(pipeline_name="evaluate_external")


@pytest.mark.integration
def test_a_bad_file_stops_the_pipeline_naming_the_file_and_line(smoke_crosstask_run, tmp_path, monkeypatch):
    monkeypatch.chdir(PROJECT_ROOT)  # the catalog's data/... paths are relative to the working directory
    bad = tmp_path / "bad.jsonl"
    bad.write_text(_jsonl(GOOD, {**GOOD, "rationale": [1]}), encoding="utf-8")
    with pytest.raises(ExternalRationaleError, match=r"bad.jsonl, line 2: 'rationale' has 1 entries"):
        _run_evaluate_external({"evaluate_external": {"file": str(bad), "classifier_task": "sst2",
                                                      "expnet_fold": "heldout_sst2"},
                                "mlflow": {"tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}"}})


@pytest.mark.integration
def test_evaluate_external_on_smoke_writes_the_metrics_table_and_one_mlflow_run(smoke_crosstask_run, tmp_path,
                                                                                 monkeypatch):
    monkeypatch.chdir(PROJECT_ROOT)
    from mlflow.tracking import MlflowClient

    source = tmp_path / "pytest_external_rationales.jsonl"
    shutil.copy(EXAMPLE_FILE, source)
    tracking_uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    settings = {"file": str(source), "classifier_task": "sst2", "expnet_fold": "heldout_sst2", "max_examples": 12}
    output = smoke_crosstask_run / "08_reporting" / "external" / f"{metrics_partition_name(settings)}.csv"
    try:
        _run_evaluate_external({"evaluate_external": settings, "mlflow": {"tracking_uri": tracking_uri},
                                "crosstask": {"expensive_sample_size": 3}})
        metrics = pd.read_csv(output)
    finally:
        output.unlink(missing_ok=True)

    from kedro.config import OmegaConfigLoader

    from learned_attribution.settings import CONFIG_LOADER_ARGS

    # The project's loader settings: parameters merge softly (smoke names only what differs).
    smoke_params = OmegaConfigLoader(str(PROJECT_ROOT / "conf"), env="smoke", **CONFIG_LOADER_ARGS)["parameters"]
    crosstask = smoke_params["crosstask"]
    assert metrics.columns.tolist() == [*METRIC_COLUMNS, "classifier_task", "file"]
    assert set(metrics["fold"]) == {"heldout_sst2"} and set(metrics["held_out_task"]) == {"external"}
    assert set(metrics["classifier_task"]) == {"sst2"} and set(metrics["file"]) == {str(source)}
    scored = metrics[metrics["family"] != "floor"]
    assert set(scored["method"]) == {"expnet_plus", "expnet_paper", *crosstask["baselines"]}
    assert set(metrics.loc[metrics["family"] == "floor", "method"]) == {"all_tokens", "random"}
    for learned in ("expnet_plus", "expnet_paper"):
        assert set(metrics.loc[metrics["method"] == learned, "rule"]) == {"matched", "own", "own_calibrated"}
    everything = metrics[metrics["subset"] == "all"]
    cheap = everything[~everything["method"].isin(crosstask["expensive"])]
    assert (cheap["n_examples"] == 12).all()  # max_examples: every example of the file has a rationale
    assert (everything.loc[everything["method"].isin(crosstask["expensive"]), "n_examples"] == 3).all()
    all_tokens = everything[everything["method"] == "all_tokens"].iloc[0]
    assert all_tokens["recall"] == 1.0
    assert cheap["auroc"].between(0, 1).all() and cheap["f1"].between(0, 1).all()

    client = MlflowClient(tracking_uri=tracking_uri)
    experiment = client.get_experiment_by_name("external")
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 1
    run = runs[0]
    assert run.info.status == "FINISHED"
    assert run.data.params["file"] == str(source) and run.data.params["classifier_task"] == "sst2"
    assert run.data.params["expnet_fold"] == "heldout_sst2"
    expected = fold_metric_entries(metrics)
    assert set(expected) <= set(run.data.metrics)
    for key in ("expnet_plus/matched/all/auroc", "expnet_paper/own/all/f1", "gae/own/all/f1", "all_tokens/own/all/f1"):
        assert run.data.metrics[key] == pytest.approx(expected[key])
    assert run.data.metrics["examples/in_file"] == 30
    assert len(run.data.tags["mlflow.source.git.commit"]) == 40
    [logged] = client.get_run(run.info.run_id).inputs.dataset_inputs
    assert logged.dataset.name == "external_rationales" and str(source.resolve()) in logged.dataset.source
    assert {"external_metrics.csv", "metrics.png", "explain_failures.csv", "explain_cost.csv"} <= {
        artifact.path for artifact in client.list_artifacts(run.info.run_id)}
