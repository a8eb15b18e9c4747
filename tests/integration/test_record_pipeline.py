"""`kedro run --pipeline record --env smoke` (the smoke main job's folds), killed twice (SIGKILL, no clean-up): once
right after a part landed, once between a part's table and its sidecar. The resumed runs recompute no finished part
(their files untouched), recompute the cut-short one, and end with every example of every fold in the record; the
record's occlusion rows on the main job's sample are the main job's own numbers for those examples."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from learned_attribution.core.metrics.plausibility import evaluate
from learned_attribution.services.evaluation.protocol import gold_labels, method_masks
from learned_attribution.services.record.report import read_record

pytestmark = pytest.mark.integration

PROJECT_ROOT = Path(__file__).resolve().parents[2]
RECORD = PROJECT_ROOT / "data" / "smoke" / "record" / "baselines"
KILLER = textwrap.dedent('''
    import os, signal, sys
    point, count, uri = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    calls = []

    def maybe_die():
        calls.append(1)
        if len(calls) == count:
            os.kill(os.getpid(), signal.SIGKILL)

    from learned_attribution.services.record import baselines, parts
    if point == "after_part":  # right after the count-th part of this process landed (table and sidecar)
        original = baselines.write_part
        def write_part(*args, **kwargs):
            meta = original(*args, **kwargs)
            maybe_die()
            return meta
        baselines.write_part = write_part
    elif point != "none":  # between the count-th part's table and its sidecar
        original = parts.PartMeta.to_json
        def to_json(self):
            maybe_die()
            return original(self)
        parts.PartMeta.to_json = to_json

    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project
    root = os.getcwd()
    bootstrap_project(root)
    params = {"mlflow": {"tracking_uri": uri, "experiment": "crosstask-smoke"}}
    with KedroSession.create(project_path=root, env="smoke", runtime_params=params) as session:
        session.run(pipeline_name="record")
''')


def run_record(point: str, count: int, tracking_uri: str, smoke_env: dict) -> subprocess.CompletedProcess:
    env = {**smoke_env, "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-c", KILLER, point, str(count), tracking_uri], cwd=PROJECT_ROOT, env=env,
                          capture_output=True, text=True, timeout=900)


def finished_parts() -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in RECORD.rglob("part-*.csv") if p.with_suffix(".json").is_file()}


def test_a_record_run_killed_twice_resumes_without_recomputing_a_finished_part(smoke_crosstask_run,
                                                                               smoke_tracking_uri, smoke_env, tmp_path):
    import shutil

    shutil.rmtree(RECORD.parent, ignore_errors=True)
    first = run_record("after_part", 3, smoke_tracking_uri, smoke_env)
    assert first.returncode == -9, first.stderr[-2000:]
    kept = finished_parts()
    assert len(kept) == 3  # the first fold's main-job part and two occlusion parts
    second = run_record("before_sidecar", 4, smoke_tracking_uri, smoke_env)
    assert second.returncode == -9, second.stderr[-2000:]
    cut_short = [p for p in RECORD.rglob("part-*.csv") if not p.with_suffix(".json").is_file()]
    assert len(cut_short) == 1  # its table landed, its sidecar never did: not a finished part
    assert {p: finished_parts()[p] for p in kept} == kept
    kept = finished_parts()
    last = run_record("none", 0, smoke_tracking_uri, smoke_env)
    assert last.returncode == 0, last.stderr[-3000:]
    assert {p: finished_parts()[p] for p in kept} == kept  # nothing finished was recomputed
    assert cut_short[0] in finished_parts()
    rows, parts = read_record(RECORD)
    smoke = smoke_crosstask_run
    for task in ("hatexplain", "sst2", "cola"):
        predictions = pd.read_parquet(smoke / "07_model_output" / f"rationale_predictions_{task}.parquet")
        fold_rows = rows[(rows["task"] == task) & (rows["mode"] == "predicted")]
        n_examples = fold_rows.loc[fold_rows["method"] == "expnet_plus", "example_id"].nunique()
        # The smoke record's method, occlusion, on every example.
        assert fold_rows.loc[fold_rows["method"] == "occlusion", "example_id"].nunique() == n_examples
        # The main job ran occlusion on its sample: the record's rows there are its numbers.
        scores = pd.read_parquet(smoke / "07_model_output" / f"token_scores_{task}.parquet")
        sampled = scores[scores["method"] == "occlusion"].set_index("example_id")
        gold = predictions.set_index("example_id")["token_labels"]
        rho = float(pd.read_json(smoke / "07_model_output" / f"budget_{task}.json", typ="series")["rho"])
        ids = list(sampled.index)
        token_scores = [np.asarray(sampled.at[i, "scores"], dtype=float) for i in ids]
        want = evaluate(token_scores, [gold_labels(gold[i]) for i in ids], method_masks(token_scores, rho)).per_example
        got = fold_rows[fold_rows["method"] == "occlusion"].set_index("example_id").loc[ids]
        np.testing.assert_allclose(got["auroc"].to_numpy(float), want["auroc"].to_numpy(float), atol=2e-3)
    table = pd.read_csv(smoke / "08_reporting" / "record" / "baselines.csv")
    assert set(table["mode"]) == {"predicted", "gold"} and (table["coverage"] == 1).all()
    assert len(parts) == 3 + len(parts[parts["method"] == "occlusion"])  # a main-job part per fold
    # The results document's record section: ExpNet+ and the record's methods, every fold, both modes.
    from learned_attribution.services.reporting.results import write_results

    document = tmp_path / "results.md"
    write_results(smoke / "08_reporting", document, [], record=RECORD.parent)
    section = document.read_text().split("## Every baseline on every example")[1].split("\n## ")[0]
    cells = [line.split(" | ") for line in section.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert {(c[0][2:], c[1], c[2]) for c in cells} == {
        (task, mode, method) for task in ("hatexplain", "sst2", "cola") for mode in ("predicted", "gold")
        for method in ("expnet_plus", "occlusion")}
    assert all("(100%)" in c[3] for c in cells)
