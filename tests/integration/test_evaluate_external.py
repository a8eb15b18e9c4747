"""evaluate_external: the JSONL format's validation (file and line in every error), the settings and the run-time
parameters (in the parameters and in the catalog, base and smoke), the fold check, the prediction step on a hand-set
classifier, and `kedro run --pipeline evaluate_external --env smoke` end to end after a smoke crosstask run (the
metrics table, the MLflow run, the main job's node timings left intact)."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from kedro.io import DatasetError

from learned_attribution.adapters.hooks.runs import metric_entries
from learned_attribution.core.data.rationales import RationaleFileError, parse_rationale_lines
from learned_attribution.core.models.features import feature_names
from learned_attribution.core.tasks import FOLDS
from learned_attribution.services.bundle import Bundle
from learned_attribution.services.config import ComputeSettings, ScoringSettings
from learned_attribution.services.config import ExternalSettings, external_settings
from learned_attribution.services.evaluation import external
from learned_attribution.services.evaluation.protocol import METRIC_COLUMNS

PROJECT_ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_FILE = PROJECT_ROOT / "data" / "01_raw" / "external" / "example_rationales.jsonl"
GOOD = {"words": ["a", "good", "film"], "rationale": [0, 1, 0], "label": 1}
DEFAULTS = {"max_examples": None, "batch_size": 64, "mlflow_experiment": "external"}
CPU = ComputeSettings(torch.device("cpu"), False)


def _jsonl(*records) -> str:
    return "\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n"


def _settings(**values) -> ExternalSettings:
    return external_settings({"file": "f.jsonl", "classifier_task": "sst2", "expnet_fold": "heldout_sst2",
                                       **DEFAULTS, **values})


def _scoring(**values) -> ScoringSettings:
    return ScoringSettings(**{"baselines": {}, "expensive": (), "expensive_sample_size": None,
                              "max_test_examples": None, "batch_size": 8, "n_boot": 10, "boot_seed": 0,
                              "faithfulness_fractions": (0.5,), "faithfulness_batch_size": 8, "layer": -1, "seed": 0,
                              **values})


# ---- the file format --------------------------------------------------------------------------------------------

def test_a_valid_file_becomes_schema_rows_with_default_ids_and_blank_lines_skipped():
    text = _jsonl(GOOD, "", {**GOOD, "id": "x7", "label": 0}, {"words": ["bad"], "rationale": [0], "label": 0})
    frame = parse_rationale_lines(text, "my.jsonl")
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
    with pytest.raises(RationaleFileError) as error:
        parse_rationale_lines(_jsonl(GOOD, bad_line), "data/mine.jsonl")
    assert str(error.value).startswith("data/mine.jsonl, line 2: ")
    assert expected in str(error.value)


def test_an_empty_file_and_a_missing_file_are_reported(tmp_path):
    from learned_attribution.adapters.kedro_datasets import RationaleFileDataset

    with pytest.raises(RationaleFileError, match="empty.jsonl: no examples"):
        parse_rationale_lines("\n  \n", "empty.jsonl")
    dataset = RationaleFileDataset(str(tmp_path / "absent.jsonl"), parameter="evaluate_external.file")
    with pytest.raises(DatasetError, match=r"parameter evaluate_external.file='.*absent.jsonl': no such file \(working directory ") as error:
        dataset.load()
    assert isinstance(error.value.__cause__, RationaleFileError)
    assert dataset.is_raw_input and dataset.path == tmp_path / "absent.jsonl"  # hashed by the MLflow hook


def test_the_shipped_example_file_is_valid():
    frame = parse_rationale_lines(EXAMPLE_FILE.read_text(encoding="utf-8"), str(EXAMPLE_FILE))
    assert len(frame) == 30 and frame["example_id"].is_unique
    assert frame["example_id"].str.startswith("sst2:test:tree").all()
    assert set(frame["label"]) == {0, 1}
    assert frame["word_rationale"].map(sum).gt(0).all()


# ---- settings and run-time parameters ---------------------------------------------------------------------------

def test_settings_are_parsed_and_missing_or_unknown_ones_are_named():
    settings = _settings(file="f.jsonl", classifier_task="cola", expnet_fold="heldout_cola")
    assert settings.batch_size == 64 and settings.max_examples is None and settings.mlflow_experiment == "external"
    assert settings.partition == "metrics_f_cola_heldout_cola"
    assert settings.held_out_task == "cola"
    with pytest.raises(ValueError, match="evaluate_external.classifier_task, evaluate_external.expnet_fold not set"):
        _settings(classifier_task=None, expnet_fold="")
    with pytest.raises(ValueError, match=r"evaluate_external.max_examples, evaluate_external.batch_size, "
                                         r"evaluate_external.mlflow_experiment missing"):
        external_settings({"file": "f.jsonl", "classifier_task": "sst2", "expnet_fold": "heldout_sst2"})
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) evaluate_external.max_example;"):
        _settings(max_example=3)
    with pytest.raises(ValueError, match="expnet_fold must be one of"):
        _settings(expnet_fold="sst2")
    with pytest.raises(ValueError, match="classifier_task must be one of"):
        _settings(classifier_task="imdb")
    with pytest.raises(ValueError, match="evaluate_external.max_examples=0"):
        _settings(max_examples=0)
    capped = external.capped(_scoring(max_test_examples=None), _settings(max_examples=5))
    assert capped.max_test_examples == 5 and capped.seed == 0


def _config(env: str, runtime_params: dict | None = None):
    from kedro.config import OmegaConfigLoader

    from learned_attribution.settings import CONFIG_LOADER_ARGS

    return OmegaConfigLoader(str(PROJECT_ROOT / "conf"), env=env, runtime_params=runtime_params or {},
                             **CONFIG_LOADER_ARGS)


def _catalog_paths(catalog: dict) -> dict[str, str]:
    return {name: catalog[name].get("filepath") or catalog[name].get("path") for name in
            ("external_rationales", "evaluate_external.task_classifier", "evaluate_external.fold_bundle",
             "evaluate_external.fold_budget")}


@pytest.mark.parametrize("env, root", [("base", "data"), ("smoke", "data/smoke")])
@pytest.mark.parametrize("chosen", [{}, {"file": "mine/rationales.jsonl", "classifier_task": "cola",
                                         "expnet_fold": "heldout_hatexplain"}])
def test_the_run_time_parameters_reach_the_catalog_and_the_parameters_alike(env, root, chosen):
    config = _config(env, {"evaluate_external": chosen} if chosen else None)
    settings = external_settings(config["parameters"]["evaluate_external"])  # every default in the YAML
    task, fold = settings.classifier_task, settings.expnet_fold
    assert _catalog_paths(config["catalog"]) == {
        "external_rationales": settings.file,
        "evaluate_external.task_classifier": f"{root}/06_models/classifier_{task}",
        "evaluate_external.fold_bundle": f"{root}/06_models/{fold}",
        "evaluate_external.fold_budget": f"{root}/07_model_output/budget_{settings.held_out_task}.json"}
    if chosen:
        assert (settings.file, task, fold) == ("mine/rationales.jsonl", "cola", "heldout_hatexplain")
        assert settings.batch_size == 64  # --params merges deeply: the other settings keep their defaults


def test_every_fold_has_its_budget_file_in_the_catalog():
    for fold in FOLDS:
        path = _catalog_paths(_config("base", {"evaluate_external": {"expnet_fold": fold}})["catalog"])[
            "evaluate_external.fold_budget"]
        assert path == f"data/07_model_output/budget_{fold.removeprefix('heldout_')}.json"


# ---- the fold and the classifier --------------------------------------------------------------------------------

class _Fake:
    """Stands in for a loaded TrainedClassifier / LearnedModel: only the attributes the check reads."""

    def __init__(self, **attributes):
        self.__dict__.update(attributes)


def _classifier(task: str, n_heads: int = 2):
    return _Fake(model=_Fake(config=_Fake(num_attention_heads=n_heads)), path=Path(f"06_models/classifier_{task}"))


def _bundle(fold: str, n_features: int = 4, calibrated: float = 0.125) -> Bundle:
    paper = _Fake(columns=feature_names(n_features // 2), threshold=0.5, calibrated_threshold=calibrated, name="paper")
    return Bundle({"fold": fold, "rho": 0.3}, {"expnet_plus": _Fake(name="plus"), "expnet_paper": paper})


BUDGET = {"rho": 0.3, "threshold": 0.5, "calibrated_threshold": 0.125, "density_hatexplain": 0.4,
          "density_cola": 0.2, "n_train_tokens": 100, "n_val_tokens": 50}


def test_the_fold_and_classifier_are_checked_and_the_budget_combines_the_fold_and_its_expnet(caplog):
    settings = _settings(classifier_task="cola", expnet_fold="heldout_sst2")
    learned, budget = external.check_fold(_classifier("cola"), _bundle("heldout_sst2"), BUDGET, settings)
    assert [m.name for m in learned.values()] == ["plus", "paper"] and list(learned) == ["expnet_plus",
                                                                                         "expnet_paper"]
    assert budget == BUDGET
    assert "The cola classifier is not heldout_sst2's held-out classifier (sst2)" in caplog.text
    # the saved ExpNet's calibrated threshold wins over the budget file's
    _, budget = external.check_fold(_classifier("cola"), _bundle("heldout_sst2", calibrated=0.25), BUDGET, settings)
    assert budget == {**BUDGET, "calibrated_threshold": 0.25}
    assert "budget json says calibrated threshold 0.125, the saved ExpNet 0.25" in caplog.text
    with pytest.raises(ValueError, match="reads 4 attention features but the cola classifier has 12 heads"):
        external.check_fold(_classifier("cola", n_heads=12), _bundle("heldout_sst2"), BUDGET, settings)
    with pytest.raises(ValueError, match="the fold loaded is heldout_cola but parameter evaluate_external.expnet_fold"):
        external.check_fold(_classifier("cola"), _bundle("heldout_cola"), BUDGET, settings)
    with pytest.raises(ValueError, match="classifier_sst2 but parameter evaluate_external.classifier_task is cola"):
        external.check_fold(_classifier("sst2"), _bundle("heldout_sst2"), BUDGET, settings)


def test_prediction_on_a_classifier_whose_bias_always_picks_class_one(tiny_bert_classifier):
    from learned_attribution.core.models.loading import PACKAGED_ENCODER, TrainedClassifier, load_tokenizer

    tokenizer = load_tokenizer(PACKAGED_ENCODER)
    model = tiny_bert_classifier(vocab_size=tokenizer.vocab_size, max_position_embeddings=16)
    with torch.no_grad():
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.tensor([0.0, 2.0]))  # p(1) = 1 / (1 + e^-2) whatever the input
    examples = parse_rationale_lines(_jsonl(GOOD, {"words": ["bad"], "rationale": [1], "label": 0}), "f.jsonl")
    settings = _settings(batch_size=1)
    predicted = external.predict(examples, TrainedClassifier(model, tokenizer), 16, settings, _scoring(), CPU)
    assert predicted["predicted"].tolist() == [1, 1]
    assert predicted["correct"].tolist() == [True, False]
    np.testing.assert_allclose(predicted["probability"], 1 / (1 + np.exp(-2.0)), rtol=1e-6)
    # "a good film" -> [CLS] a good film [SEP]: the word labels land on their subwords
    assert list(predicted["token_labels"].iloc[0]) == [-100, 0, 1, 0, -100]
    with pytest.raises(RationaleFileError, match="has label 2 but the sst2 classifier has 2 classes"):
        three = parse_rationale_lines(_jsonl({**GOOD, "label": 2}), "f.jsonl", n_classes=3)
        external.predict(three, TrainedClassifier(model, tokenizer), 16, settings, _scoring(), CPU)


# ---- kedro run --pipeline evaluate_external --env smoke ----------------------------------------------------------

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
    with pytest.raises(Exception, match=r"bad.jsonl, line 2: 'rationale' has 1 entries") as error:
        _run_evaluate_external({"evaluate_external": {"file": str(bad), "classifier_task": "sst2",
                                                      "expnet_fold": "heldout_sst2"},
                                "mlflow": {"tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}"}})
    causes, cause = [], error.value
    while cause is not None:  # Kedro wraps the parser's error in its load errors
        causes.append(cause)
        cause = cause.__cause__
    assert any(isinstance(cause, RationaleFileError) for cause in causes)


@pytest.fixture(scope="module")
def external_run(smoke_crosstask_run, tmp_path_factory):
    """`kedro run --pipeline evaluate_external --env smoke` on a copy of the shipped file after the smoke crosstask
    run: its metrics table, MLflow store and settings, and the main job's node timings before the run."""
    folder = tmp_path_factory.mktemp("external")
    source = folder / "pytest_external_rationales.jsonl"
    shutil.copy(EXAMPLE_FILE, source)
    timings = smoke_crosstask_run / "08_reporting" / "node_timings"
    main_timings = (timings / "crosstask.csv").read_bytes()
    settings = {"file": str(source), "classifier_task": "sst2", "expnet_fold": "heldout_sst2", "max_examples": 12}
    output = smoke_crosstask_run / "08_reporting" / "external" / f"{_settings(**settings).partition}.csv"
    tracking_uri = f"sqlite:///{folder / 'mlflow.db'}"
    before = Path.cwd()
    os.chdir(PROJECT_ROOT)  # the catalog's data/... paths are relative to the working directory
    try:
        _run_evaluate_external({"evaluate_external": settings, "mlflow": {"tracking_uri": tracking_uri},
                                "crosstask": {"expensive_sample_size": 3}})
        metrics = pd.read_csv(output)
    finally:
        os.chdir(before)
        output.unlink(missing_ok=True)
    return {"metrics": metrics, "tracking_uri": tracking_uri, "source": source, "timings": timings,
            "main_timings": main_timings}


@pytest.mark.integration
def test_evaluate_external_on_smoke_writes_the_metrics_table_and_one_mlflow_run(external_run):
    from mlflow.tracking import MlflowClient

    metrics, source = external_run["metrics"], external_run["source"]
    crosstask = _config("smoke")["parameters"]["crosstask"]  # parameters merge softly: smoke names what differs
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
    # Known answers of the all-tokens floor: constant scores rank at chance, and its precision and AUPRC are both the
    # rationale density (on examples where AUROC is defined: both classes present).
    assert all_tokens["recall"] == 1.0 and all_tokens["auroc"] == 0.5
    assert all_tokens["n_constant_scores"] == 12 and all_tokens["n_auroc_undefined"] == 0
    assert all_tokens["precision"] == pytest.approx(all_tokens["auprc"])
    assert cheap["auroc"].between(0, 1).all() and cheap["f1"].between(0, 1).all()

    client = MlflowClient(tracking_uri=external_run["tracking_uri"])
    experiment = client.get_experiment_by_name("external")
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 1
    run = runs[0]
    assert run.info.status == "FINISHED"
    assert run.info.run_name == "pytest_external_rationales.jsonl: sst2 classifier, heldout_sst2 ExpNet"  # its chart's title
    params = run.data.params
    assert params["file"] == str(source) and params["file_resolved"] == str(source.resolve())
    assert params["classifier_task"] == "sst2" and params["expnet_fold"] == "heldout_sst2"
    assert params["fold_held_out_task"] == "sst2" and params["classifier_is_folds_held_out"] == "True"
    assert params["max_examples"] == "12" and params["crosstask.expensive_sample_size"] == "3"
    assert {"max_length", "explained_layer", "crosstask.expensive", "crosstask.bootstrap.n_boot"} <= set(params)
    assert {key: run.data.tags[key] for key in ("file", "classifier_task", "expnet_fold")} == {
        "file": str(source), "classifier_task": "sst2", "expnet_fold": "heldout_sst2"}
    expected = metric_entries(metrics)
    assert set(expected) <= set(run.data.metrics)
    for key in ("predicted/expnet_plus/matched/all/auroc", "predicted/expnet_paper/own/all/f1", "predicted/gae/own/all/f1",
                "predicted/all_tokens/own/all/f1", "gold/expnet_plus/matched/all/auroc"):  # the file gives classes
        assert run.data.metrics[key] == pytest.approx(expected[key])
    numbers = run.data.metrics
    assert numbers["examples/in_file"] == 30 and numbers["examples/with_rationale_words"] == 30
    assert numbers["examples/scored"] == 12 and numbers["examples/explain_failures"] == 0
    assert {"examples/truncated", "examples/all_tokens_rationale", "classifier/accuracy_scored", "budget/rho",
            "budget/threshold", "budget/calibrated_threshold", "budget/n_train_tokens"} <= set(numbers)
    budget = json.loads((PROJECT_ROOT / "data/smoke/07_model_output/budget_sst2.json").read_text())
    assert numbers["budget/rho"] == pytest.approx(budget["rho"])
    assert len(run.data.tags["mlflow.source.git.commit"]) == 40
    [logged] = client.get_run(run.info.run_id).inputs.dataset_inputs
    assert logged.dataset.name == "external_rationales" and str(source.resolve()) in logged.dataset.source
    assert {"external_metrics.csv", "metrics.png", "explain_failures.csv", "explain_cost.csv"} <= {
        artifact.path for artifact in client.list_artifacts(run.info.run_id)}


@pytest.mark.integration
def test_evaluate_external_keeps_the_main_jobs_node_timings(external_run):
    timings = external_run["timings"]
    assert (timings / "crosstask.csv").read_bytes() == external_run["main_timings"]
    own = pd.read_csv(timings / "evaluate_external.csv")
    assert set(own["stage"]) == {"evaluate_external"} and set(own["namespace"]) == {"evaluate_external"}
    assert "evaluate_external.explain_external" in set(own["node"])
    main = pd.read_csv(timings / "crosstask.csv")
    assert not main["node"].str.startswith("evaluate_external.").any()
