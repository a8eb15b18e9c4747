"""One MLflow run in a temporary sqlite store: params, metrics (per layer as steps), text and figure artifacts."""
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.figure import Figure

from learned_attribution.services.tracking import default_artifact_location, flatten, log_run, numeric_metrics


def test_flatten_and_numeric_metrics():
    assert flatten({"a": {"b": 1, "c": {"d": "x"}}, "e": None}) == {"a.b": 1, "a.c.d": "x", "e": None}
    assert numeric_metrics({"r": 0.5, "n": 3, "name": "x", "gone": float("nan"), "none": None,
                            "claims": {"ok": True, "unknown": None}}) == {"r": 0.5, "n": 3.0, "claims.ok": 1.0}


def test_default_artifact_location(tmp_path):
    assert default_artifact_location(f"sqlite:///{tmp_path}/mlflow.db", "afn") == \
        (tmp_path / "mlartifacts/afn").as_uri()
    assert default_artifact_location("http://localhost:5000", "afn") is None


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One sqlite store for the module (creating its tables takes seconds); tests use their own experiments."""
    folder = tmp_path_factory.mktemp("mlflow")
    return folder, f"sqlite:///{folder}/mlflow.db"


def test_log_run(store):
    from mlflow.tracking import MlflowClient

    tmp_path, uri = store
    figure = Figure()
    figure.subplots().plot([0, 1], [1, 0])
    layers = pd.DataFrame({"layer": [0, 1, 2], "r_h_context": [0.2, 0.5, float("nan")], "is_afn_layer": [0, 1, 0]})
    run_id = log_run(uri, "afn-test", {"afn": {"layer": None, "percentile": 75}, "seed": 13},
                     {"r_h_context": 0.5, "claims": {"afn_layer_beats_next": False}}, layers,
                     {"afn_report.md": "# report\n"}, {"plots/curve.png": figure}, run_name="afn")
    client = MlflowClient(tracking_uri=uri)
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.data.params["afn.percentile"] == "75" and run.data.params["seed"] == "13"
    assert run.data.metrics["r_h_context"] == 0.5 and run.data.metrics["claims.afn_layer_beats_next"] == 0.0
    history = client.get_metric_history(run_id, "by_layer.r_h_context")
    assert sorted((m.step, m.value) for m in history) == [(0, 0.2), (1, 0.5)]  # NaN at layer 2 is left out
    artifacts = Path(run.info.artifact_uri.removeprefix("file://"))
    assert artifacts.is_relative_to(tmp_path)
    assert (artifacts / "afn_report.md").read_text() == "# report\n"
    assert (artifacts / "plots/curve.png").stat().st_size > 0
    # a second run goes into the same experiment
    assert client.get_run(log_run(uri, "afn-test", {}, {}, layers.iloc[:0], {}, {}, run_name="afn")).info.experiment_id == \
        run.info.experiment_id


def test_failed_logging_marks_the_run_failed(store):
    from mlflow.tracking import MlflowClient

    _, uri = store
    with pytest.raises(Exception):
        log_run(uri, "afn-failing", {}, {}, pd.DataFrame({"layer": [0]}), {}, {"bad.png": "not a figure"}, run_name="afn")
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("afn-failing")
    runs = client.search_runs([experiment.experiment_id])
    assert [r.info.status for r in runs] == ["FAILED"]


def test_the_afn_node_logs_to_the_one_mlflow_tracking_uri(store, monkeypatch):
    """`--pipeline afn` reads `mlflow.tracking_uri` like every pipeline (no `afn.mlflow.tracking_uri`)."""
    from mlflow.tracking import MlflowClient

    from learned_attribution.pipelines.afn import nodes

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    _, uri = store
    layers = pd.DataFrame({"layer": [0, 1], "r_h_context": [0.2, 0.5]})
    where = nodes.log_to_mlflow("# report\n", {"encoder": "tiny", "r_h_context": 0.5}, layers, {},
                                {"percentile": 75, "mlflow": {"experiment": "afn-node"}}, {"tracking_uri": uri},
                                {"name_or_path": "tiny"}, 64, 13)
    assert where["tracking_uri"] == uri and where["experiment"] == "afn-node"
    assert MlflowClient(uri).get_run(where["run_id"]).data.metrics["r_h_context"] == 0.5


def test_the_afn_parameters_have_no_tracking_uri_of_their_own():
    import yaml

    project = Path(__file__).resolve().parents[2]
    for env in ("base", "smoke"):
        afn = yaml.safe_load((project / "conf" / env / "parameters_afn.yml").read_text())["afn"]
        assert "tracking_uri" not in (afn.get("mlflow") or {}), env
    assert yaml.safe_load((project / "conf/base/parameters.yml").read_text())["mlflow"]["tracking_uri"]
