"""The run hooks that decide what a `kedro run` may start from, on real Kedro pipelines and file datasets in tmp_path:
a pipeline whose upstream inputs are missing stops in one line naming them and the pipeline that writes them
(`UpstreamInputsHook`), and `--only-missing-outputs` sets aside exactly the outputs a settings change made stale
(`StaleOutputsHook`)."""
from __future__ import annotations

import json

import pandas as pd
import pytest
from kedro.io import DataCatalog, MemoryDataset
from kedro.pipeline import node, pipeline

from learned_attribution.adapters.hooks.fingerprints import ENTRY, StaleOutputsHook, expected_fingerprints
from learned_attribution.adapters.hooks.inputs import missing_upstream_inputs, producer
from learned_attribution.adapters.kedro_datasets import AtomicCSVDataset, AtomicJSONDataset


def _table(value: float) -> pd.DataFrame:
    return pd.DataFrame({"x": [value]})


def _scaled(frame: pd.DataFrame, factor: float) -> pd.DataFrame:
    return frame * factor


def _parsed(settings: dict) -> float:
    return float(settings["factor"])


MAIN = pipeline([node(_table, "params:start", "features", name="features"),
                 node(_parsed, "params:model", "model_settings", name="parse_model"),
                 node(_scaled, ["features", "model_settings"], "model", name="model"),
                 node(_scaled, ["model", "params:report_factor"], "report", name="report")])
ABLATION = pipeline([node(_scaled, ["model", "params:report_factor"], "ablation", name="ablation")])


def _catalog(tmp_path, params: dict) -> DataCatalog:
    catalog = DataCatalog({name: AtomicCSVDataset(filepath=str(tmp_path / f"{name}.csv"), save_args={"index": False})
                           for name in ("features", "model", "report", "ablation")}
                          | {ENTRY: AtomicJSONDataset(filepath=str(tmp_path / "fingerprints.json")),
                             "model_settings": MemoryDataset()})
    for key, value in params.items():
        catalog[f"params:{key}"] = MemoryDataset(value)
    return catalog


PARAMS = {"start": 1.0, "model": {"factor": 2.0}, "report_factor": 3.0}


def _run(tmp_path, params: dict, only_missing: bool = False) -> StaleOutputsHook:
    """The hook around a plain in-process run of MAIN (every node, or the ones Kedro's rule would rerun)."""
    catalog, hook = _catalog(tmp_path, params), StaleOutputsHook()
    hook.before_pipeline_run({"only_missing_outputs": only_missing}, MAIN, catalog)
    for current in MAIN.nodes:
        outputs, persisted = current.outputs, [o for o in current.outputs if o != "model_settings"]
        if only_missing and persisted and all(catalog.exists(o) for o in persisted):
            continue  # Kedro's rule: a node with every persisted output present is skipped
        result = current.run({name: catalog.load(name) for name in current.inputs})
        for name in outputs:
            catalog.save(name, result[name])
            hook.after_dataset_saved(name)
    return hook


def test_only_the_outputs_a_changed_setting_reads_are_set_aside(tmp_path):
    _run(tmp_path, PARAMS)
    first = json.loads((tmp_path / "fingerprints.json").read_text())
    assert set(first) == {"features", "model", "report"}  # persisted outputs only (model_settings is in memory)
    _run(tmp_path, PARAMS, only_missing=True)
    assert not list(tmp_path.glob("*.stale"))  # the same settings: nothing is stale
    assert json.loads((tmp_path / "fingerprints.json").read_text()) == first

    _run(tmp_path, PARAMS | {"model": {"factor": 5.0}}, only_missing=True)
    assert sorted(p.name for p in tmp_path.glob("*.stale")) == ["model.csv.stale", "report.csv.stale"]
    assert pd.read_csv(tmp_path / "report.csv")["x"].item() == 15.0  # rerun downstream of the change, not beside it
    changed = json.loads((tmp_path / "fingerprints.json").read_text())
    assert changed["features"] == first["features"] and changed["model"] != first["model"]


def test_a_downstream_setting_leaves_the_upstream_outputs(tmp_path):
    _run(tmp_path, PARAMS)
    catalog = _catalog(tmp_path, PARAMS | {"report_factor": 4.0})
    recorded = json.loads((tmp_path / "fingerprints.json").read_text())
    expected = expected_fingerprints(MAIN, catalog, recorded)
    assert [name for name in ("features", "model", "report") if expected[name] != recorded[name]] == ["report"]


def test_outputs_without_recorded_fingerprints_are_trusted_then_recorded(tmp_path):
    catalog = _catalog(tmp_path, PARAMS)
    catalog.save("features", _table(1.0))
    StaleOutputsHook().before_pipeline_run({"only_missing_outputs": True}, MAIN, catalog)
    assert (tmp_path / "features.csv").is_file() and not list(tmp_path.glob("*.stale"))
    assert set(json.loads((tmp_path / "fingerprints.json").read_text())) == {"features"}
    # ... so that the next change of what they read is seen
    StaleOutputsHook().before_pipeline_run({"only_missing_outputs": True}, MAIN,
                                           _catalog(tmp_path, PARAMS | {"start": 2.0}))
    assert [p.name for p in tmp_path.glob("*.stale")] == ["features.csv.stale"]


def test_missing_upstream_inputs_name_the_pipeline_that_writes_them(tmp_path):
    registry = {"__default__": MAIN, "crosstask": MAIN, "ablation": ABLATION, "report_only": MAIN.only_nodes("report")}
    catalog = _catalog(tmp_path, PARAMS)
    assert missing_upstream_inputs(ABLATION, catalog, registry) == ["model"]
    assert producer({"model"}, registry) == "crosstask"  # the main job is named first
    catalog.save("model", _table(2.0))
    assert missing_upstream_inputs(ABLATION, catalog, registry) == []
    # raw inputs and parameters are no pipeline's outputs: never reported here
    assert missing_upstream_inputs(MAIN, _catalog(tmp_path / "elsewhere", PARAMS), registry) == []


def test_the_ablation_before_the_main_job_stops_in_one_line(tmp_path, monkeypatch):
    from kedro.framework import project

    from learned_attribution.adapters.hooks import UpstreamInputsHook
    from learned_attribution.adapters.hooks.inputs import MissingUpstreamInputsError

    monkeypatch.setattr(project, "pipelines", {"__default__": MAIN, "crosstask": MAIN, "ablation": ABLATION})
    with pytest.raises(MissingUpstreamInputsError) as error:
        UpstreamInputsHook().before_pipeline_run({"pipeline_names": ["ablation"], "env": "smoke"}, ABLATION,
                                                 _catalog(tmp_path, PARAMS))
    message = str(error.value)
    assert "\n" not in message
    assert message == ("pipeline ablation: 1 input(s) another pipeline writes are missing (model): run "
                       "`kedro run --pipeline crosstask --env smoke` first")
