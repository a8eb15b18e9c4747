"""The AFN MLflow run, as the tracking hook logs it from the afn outputs in a temporary sqlite store: params, metrics
(per layer as steps), text and figure artifacts; the store checked before the first node, a leftover
`afn.mlflow.tracking_uri` refused by the pipeline's first node in one line."""
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml
from kedro.framework.hooks.manager import _create_hook_manager
from kedro.io import DataCatalog, MemoryDataset
from kedro.pipeline import node, pipeline
from kedro.runner import SequentialRunner
from matplotlib.figure import Figure
from mlflow.tracking import MlflowClient

from learned_attribution.adapters.hooks import MlflowRunsHook
from learned_attribution.core.data.schema import RawText
from learned_attribution.pipelines.afn.pipeline import create_pipeline
from learned_attribution.services.tracking.run import flatten, numeric_metrics
from learned_attribution.services.tracking.store import TrackingStoreError, default_artifact_location

PROJECT = Path(__file__).resolve().parents[2]


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


def _tracked_run(pipe, catalog: DataCatalog, params: dict) -> MlflowRunsHook:
    """`kedro run --pipeline afn` as the session drives it: the hook around a real runner."""
    hook = MlflowRunsHook()
    hook.after_context_created(SimpleNamespace(params=params))
    run_params = {"env": "local", "pipeline_names": ["afn"]}
    hook.before_pipeline_run(run_params=run_params, pipeline=pipe, catalog=catalog)
    manager = _create_hook_manager()
    manager.register(hook)
    try:
        result = SequentialRunner().run(pipe, catalog, manager)
    except Exception as error:
        hook.on_pipeline_error(error=error, run_params=run_params, pipeline=pipe, catalog=catalog)
        raise
    hook.after_pipeline_run(run_params=run_params, run_result=result, pipeline=pipe, catalog=catalog)
    return hook


def _runs(uri: str, experiment: str) -> list:
    client = MlflowClient(tracking_uri=uri)
    return client.search_runs([client.get_experiment_by_name(experiment).experiment_id])


def _outputs_pipeline():
    """Nodes in namespace afn that save what the real pipeline saves, with hand-made values."""
    def headline():
        return {"encoder": "tiny", "r_h_context": 0.5, "claims": {"afn_layer_beats_next": False}}

    def layers():
        return pd.DataFrame({"layer": [0, 1, 2], "r_h_context": [0.2, 0.5, float("nan")], "is_afn_layer": [0, 1, 0]})

    def figures():
        figure = Figure()
        figure.subplots().plot([0, 1], [1, 0])
        return figure, Figure(), Figure()

    return pipeline([node(headline, None, "headline", name="summarize"),
                     node(layers, None, "layer_comparison", name="compare_layers"),
                     node(lambda: "# report\n", None, "report", name="write_report"),
                     node(figures, None, ["strength_by_layer_plot", "rh_by_layer_plot", "shift_heatmaps_plot"],
                          name="make_plots")], namespace="afn")


@pytest.mark.slow
def test_the_afn_run_holds_parameters_metrics_report_table_and_plots(store, afn_params, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    tmp_path, uri = store
    params = afn_params(mlflow={"experiment": "afn-test", "artifact_location": None}, seed=13)
    params["mlflow"] = {"tracking_uri": uri, "experiment": "crosstask-test", "strict": True}
    _tracked_run(_outputs_pipeline(), DataCatalog(), params)
    [run] = _runs(uri, "afn-test")
    assert run.info.status == "FINISHED" and run.info.run_name == "afn"
    assert run.data.params["afn.percentile"] == "75" and run.data.params["seed"] == "13"
    assert run.data.params["encoder.name_or_path"] == "packaged:all-MiniLM-L6-v2"
    assert run.data.params["afn.corpus.user_sentences_file"] == "None"
    assert not any(key.startswith("afn.mlflow") for key in run.data.params)
    assert run.data.metrics["r_h_context"] == 0.5 and run.data.metrics["claims.afn_layer_beats_next"] == 0.0
    assert "encoder" not in run.data.metrics
    history = MlflowClient(uri).get_metric_history(run.info.run_id, "by_layer.r_h_context")
    assert sorted((m.step, m.value) for m in history) == [(0, 0.2), (1, 0.5)]  # NaN at layer 2 is left out
    artifacts = Path(run.info.artifact_uri.removeprefix("file://"))
    assert artifacts.is_relative_to(tmp_path / "mlartifacts/afn-test")  # beside the store
    assert (artifacts / "afn_report.md").read_text() == "# report\n"
    assert (artifacts / "layer_comparison.csv").read_text().splitlines()[0] == "layer,r_h_context,is_afn_layer"
    for name in ("strength_by_layer", "rh_by_layer", "shift_heatmaps"):
        assert (artifacts / f"plots/{name}.png").stat().st_size > 0


def test_the_afn_pipeline_checks_the_one_tracking_uri_at_its_start(tmp_path, afn_params, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    uri = f"sqlite:///{tmp_path}/no/such/dir/mlflow.db"
    params = {**afn_params(), "mlflow": {"tracking_uri": uri, "experiment": "crosstask", "strict": False}}

    def slow_work():
        raise AssertionError("the store check must stop the run before any node")

    with pytest.raises(TrackingStoreError) as error:
        _tracked_run(pipeline([node(slow_work, None, "headline", name="summarize")], namespace="afn"), DataCatalog(),
                     params)
    assert str(error.value).startswith(f"mlflow.tracking_uri={uri}:") and "\n" not in str(error.value)


def test_a_leftover_afn_tracking_uri_stops_the_afn_pipeline_in_one_line(store, afn_params, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    _, uri = store
    params = afn_params(mlflow={"experiment": "afn-leftover", "artifact_location": None,
                                "tracking_uri": "sqlite:///other.db"})
    params["mlflow"] = {"tracking_uri": uri, "experiment": "crosstask-test", "strict": False}
    afn = create_pipeline()
    catalog = DataCatalog({name: MemoryDataset(RawText(name, "")) for name in afn.inputs()
                           if not name.startswith("params:")})
    for name in ("afn", "encoder", "max_length", "seed", "compute"):
        catalog[f"params:{name}"] = params[name]
    with pytest.raises(ValueError, match=r"^parameter afn.mlflow.tracking_uri=sqlite:///other.db is not read") as error:
        _tracked_run(afn, catalog, params)
    assert "\n" not in str(error.value)
    assert afn.nodes[0].name == "afn.parse_settings"  # the first node: nothing else ran
    assert [run.info.status for run in _runs(uri, "afn-leftover")] == ["FAILED"]


def test_the_afn_parameters_have_no_tracking_uri_of_their_own():
    for env in ("base", "smoke"):
        afn = yaml.safe_load((PROJECT / "conf" / env / "parameters_afn.yml").read_text())["afn"]
        assert "tracking_uri" not in (afn.get("mlflow") or {}), env
    assert yaml.safe_load((PROJECT / "conf/base/parameters.yml").read_text())["mlflow"]["tracking_uri"]
