"""A run's reports in the record (services/record/runs.py): copied with the run's identity and checksums, replaced
whole by the pipeline's next run, refused when edited, without an identity, or from uncommitted code; `results`
names each table's run and refuses a table mixing two runs."""
from __future__ import annotations

import json
import subprocess
from datetime import datetime, timezone

import pandas as pd
import pytest

from learned_attribution.services.record.parts import RecordError
from learned_attribution.services.record.runs import (RecordedRun, add_run, pipeline_of, recorded_runs,
                                                      run_identity)
from learned_attribution.services.reporting.results import Reports, ResultsError, marked_blocks

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def identity(pipeline: str, **changes) -> dict:
    return {"pipeline": pipeline, "env": "local", "commit": COMMIT, "tracked_files_changed": False,
            "started": "2026-01-02T03:04:05Z", "finished": "2026-01-02T04:05:06Z",
            "kernels": "torch CPU capability AVX2, oneDNN ISA AVX2, bf16 autocast off", "partial": {}, **changes}


@pytest.fixture
def run_reports(tmp_path):
    reports = tmp_path / "08_reporting"
    (reports / "runs").mkdir(parents=True)
    (reports / "crosstask").mkdir()
    pd.DataFrame([{"fold": "heldout_sst2", "held_out_task": "sst2", "method": "expnet_plus", "family": "learned",
                   "rule": "matched", "subset": "all", "n_examples": 10, "f1": 0.5, "f1_low": 0.4, "f1_high": 0.6,
                   "auroc": 0.8, "auroc_low": 0.7, "auroc_high": 0.9}]).to_csv(reports / "crosstask_metrics.csv",
                                                                              index=False)
    (reports / "crosstask" / "explain_cost_sst2.csv").write_text("method,ratio_to_forward\nforward,1.0\n")
    (reports / "crosstask" / "heatmaps_sst2.html").write_text("<html></html>")  # an output, not a table: not kept
    (reports / "fewshot_summary.csv").write_text("a\n1\n")
    (reports / "runs" / "crosstask.json").write_text(json.dumps(identity("crosstask")))
    return reports


def test_a_run_is_recorded_with_its_identity_and_checksums_and_named_by_it(run_reports, tmp_path):
    record = tmp_path / "record"
    run = add_run(run_reports, record, "crosstask")
    assert sorted(run.files) == ["crosstask/explain_cost_sst2.csv", "crosstask_metrics.csv"]
    assert not (record / "crosstask" / "heatmaps_sst2.html").exists() and not (record / "fewshot_summary.csv").exists()
    assert recorded_runs(record)["crosstask"] == run
    assert run.label == ("`crosstask` run of 2026-01-02 04:05 UTC at commit 0123456789ab; torch CPU capability AVX2, "
                         "oneDNN ISA AVX2, bf16 autocast off")
    block = marked_blocks(Reports.read(record))["headline"]
    assert block.startswith(f"*From the {run.label}.* ExpNet+'s recipe was chosen after held-out")
    assert "not untouched test numbers.\n\n| held-out task |" in block


def test_the_next_run_of_a_pipeline_replaces_the_previous_one_whole(run_reports, tmp_path):
    record = tmp_path / "record"
    add_run(run_reports, record, "crosstask")
    (run_reports / "crosstask" / "explain_cost_sst2.csv").unlink()  # the next run has no such report
    (run_reports / "runs" / "crosstask.json").write_text(json.dumps(identity("crosstask", finished="2026-02-01T00:00:00Z")))
    add_run(run_reports, record, "crosstask")
    assert not (record / "crosstask" / "explain_cost_sst2.csv").exists()
    assert recorded_runs(record)["crosstask"].finished == "2026-02-01T00:00:00Z"


def test_an_edited_or_missing_recorded_file_fails_naming_it(run_reports, tmp_path):
    record = tmp_path / "record"
    add_run(run_reports, record, "crosstask")
    table = record / "crosstask_metrics.csv"
    table.write_text(table.read_text().replace("0.8", "0.9"))
    with pytest.raises(RecordError, match=r"crosstask_metrics.csv: its bytes differ from those recorded"):
        recorded_runs(record)
    with pytest.raises(ResultsError, match=r"crosstask_metrics.csv: its bytes differ"):
        Reports.read(record)
    table.unlink()
    with pytest.raises(RecordError, match=r"crosstask_metrics.csv: listed by the crosstask run's identity but missing"):
        recorded_runs(record)


def test_runs_without_identity_or_with_uncommitted_changes_are_refused(run_reports, tmp_path):
    (run_reports / "runs" / "crosstask.json").write_text(json.dumps(identity("crosstask", tracked_files_changed=True)))
    with pytest.raises(RecordError, match="uncommitted changes to tracked files, so commit 0123456789ab is not what ran"):
        add_run(run_reports, tmp_path / "record", "crosstask")
    with pytest.raises(RecordError, match=r"runs/fewshot.json does not exist: the fewshot run"):
        add_run(run_reports, tmp_path / "record", "fewshot")
    with pytest.raises(RecordError, match=r"pipeline 'nope': the record keeps the reports of"):
        add_run(run_reports, tmp_path / "record", "nope")


def test_a_table_of_two_runs_is_refused_and_each_report_belongs_to_one_pipeline(run_reports):
    reports = Reports.read(run_reports)
    assert reports.source("crosstask_metrics.csv").startswith("*From the `crosstask` run of 2026-01-02")
    with pytest.raises(ResultsError, match="would mix the reports of the crosstask and fewshot runs"):
        reports.source("crosstask_metrics.csv", "fewshot_summary.csv")
    assert pipeline_of("amortize/sst2_fidelity.csv") == "amortize" and pipeline_of("crosstask/heatmaps_sst2.html") is None


def test_a_partial_run_and_its_command_line_parameters_are_named(tmp_path):
    (tmp_path / "r.json").write_text(json.dumps(identity("fewshot", partial={"only_missing_outputs": True},
                                                         params={"compute": {"bf16": False}, "a": 1})))  # as Kedro nests them
    assert RecordedRun.from_json(tmp_path / "r.json").label == (
        "`fewshot` run of 2026-01-02 04:05 UTC at commit 0123456789ab, resumed or partial (only_missing_outputs); "
        "--params a=1,compute.bf16=False; torch CPU capability AVX2, oneDNN ISA AVX2, bf16 autocast off")


def test_the_identity_names_the_checkout_commit_and_changes_to_its_code(tmp_path):
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)
    git("init", "-q")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "code.py").write_text("a")
    (tmp_path / "notes.md").write_text("a")
    git("add", "src/code.py", "notes.md")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    started = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    clean = run_identity("crosstask", started, "k", tmp_path, partial={"node_names": ["x"]}, params={"seed": 1})
    assert clean["commit"] == head and clean["tracked_files_changed"] is False and clean["params"] == {"seed": 1}
    assert clean["started"] == "2026-01-02T03:04:05Z" and clean["partial"] == {"node_names": ["x"]}
    (tmp_path / "src" / "untracked.py").write_text("u")
    (tmp_path / "notes.md").write_text("docs do not change what a run computes")
    assert run_identity("crosstask", started, "k", tmp_path)["tracked_files_changed"] is False
    (tmp_path / "src" / "code.py").write_text("changed")
    assert run_identity("crosstask", started, "k", tmp_path)["tracked_files_changed"] is True
    outside = run_identity("crosstask", started, "k", tmp_path / "nowhere")
    assert outside["commit"] is None
