"""The iteration loop: after a change to a learned-explainer setting, `kedro run --only-missing-outputs` reruns the
folds' learned explainers and what reads them, and nothing upstream (the classifiers, their signals); with the
settings unchanged it reruns nothing. The settings fingerprints (adapters/hooks/fingerprints.py) set the stale outputs
aside."""
from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.integration

CHANGED = {"crosstask": {"expnet_plus": {"training": {"max_epochs": 3}}}}


def _mtimes(smoke) -> dict[str, int]:
    paths = {"classifier": smoke / "06_models" / "classifier_cola" / "config.json",
             "signals": smoke / "04_feature" / "explainer_signals_cola",
             "expnet_paper": smoke / "06_models" / "fold_training" / "heldout_cola" / "expnet_paper" / "config.json",
             "expnet_plus": smoke / "06_models" / "fold_training" / "heldout_cola" / "expnet_plus" / "config.json",
             "fold_metrics": smoke / "08_reporting" / "crosstask" / "fold_metrics_cola.csv",
             "summary": smoke / "08_reporting" / "crosstask_summary.md"}
    return {name: path.stat().st_mtime_ns for name, path in paths.items()}


def test_a_learned_explainer_setting_reruns_what_depends_on_it_and_nothing_else(smoke_crosstask_run,
                                                                                 smoke_tracking_uri, smoke_runner):
    smoke = smoke_crosstask_run
    fingerprints = json.loads((smoke / "08_reporting" / "output_fingerprints.json").read_text())
    assert {"cola.classifier", "heldout_cola.expnet_plus", "heldout_cola.fold_metrics"} <= set(fingerprints)
    before = _mtimes(smoke)
    smoke_runner("crosstask", smoke_tracking_uri, only_missing_outputs=True)  # nothing changed: nothing reruns
    assert _mtimes(smoke) == before
    try:
        smoke_runner("crosstask", smoke_tracking_uri, CHANGED, only_missing_outputs=True)
        after = _mtimes(smoke)
        assert after["classifier"] == before["classifier"] and after["signals"] == before["signals"]
        assert after["expnet_paper"] == before["expnet_paper"]  # the paper's ExpNet reads no ExpNet+ setting
        for name in ("expnet_plus", "fold_metrics", "summary"):
            assert after[name] > before[name], name
        assert (smoke / "08_reporting" / "crosstask" / "fold_metrics_cola.csv.stale").is_file()
        changed = json.loads((smoke / "08_reporting" / "output_fingerprints.json").read_text())
        assert changed["cola.classifier"] == fingerprints["cola.classifier"]
        assert changed["heldout_cola.expnet_plus"] != fingerprints["heldout_cola.expnet_plus"]
    finally:  # the default settings' outputs back, for the tests that read them
        smoke_runner("crosstask", smoke_tracking_uri, only_missing_outputs=True)
    restored = json.loads((smoke / "08_reporting" / "output_fingerprints.json").read_text())
    assert restored == fingerprints
