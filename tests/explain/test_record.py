"""The record's baseline parts (services/record) on a tiny classifier, without Kedro: every example in parts, both
modes (gold rows for the mispredicted examples only), a stopped run resumes without recomputing a finished part, a
part of other settings is recomputed, a part edited by hand or of another run fails the report naming the file, and
a second run at once refuses, naming the first. The real pipeline, killed twice, is in
tests/integration/test_record_pipeline.py."""
from __future__ import annotations

import math
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest
import torch

from learned_attribution.core.explainers.apply import explain_examples, resolve_method
from learned_attribution.core.metrics.plausibility import evaluate
from learned_attribution.core.models.loading import load_classifier
from learned_attribution.core.models.signals import token_vocabulary
from learned_attribution.services.config import ComputeSettings
from learned_attribution.services.evaluation.protocol import gold_labels, method_masks
from learned_attribution.services.record.baselines import (MAIN_JOB, RecordFold, main_job_part, part_path,
                                                           record_fold)
from learned_attribution.services.record.parts import RecordBusy, RecordError, read_meta, record_lock
from learned_attribution.services.record.report import read_record, record_table

WORDS = [["the", "film", "was", "good", "fun"], ["a", "dull", "slow", "plot"], ["not", "bad", "at", "all", "really"],
         ["good", "film"], ["the", "plot", "was", "very", "dull", "indeed"], ["fun", "and", "good"], ["bad", "plot"]]
METHODS = {"occlusion": {"batch_size": 8}, "integrated_gradients": {"n_steps": 4, "internal_batch_size": 8}}
CPU = ComputeSettings(torch.device("cpu"), False)


@pytest.fixture
def fold(tmp_path, classifier_writer, rationale_rows):
    classifier = load_classifier(classifier_writer(tmp_path / "classifier"))
    return RecordFold("sst2", classifier, rationale_rows(classifier.tokenizer, WORDS), rho=0.4)


def run(fold, folder, methods=METHODS, deadline=math.inf):
    return record_fold(fold, folder, methods, part_size=3, layer=-1, batch_size=4, compute=CPU, deadline=deadline,
                       progress=False)


def main_job_scores(fold):
    """Token scores as the main job writes them, of one full-coverage method, in both modes."""
    method = resolve_method("saliency", layer=-1, vocabulary=token_vocabulary(fold.classifier.tokenizer))
    predicted = explain_examples(fold.classifier.model, fold.classifier.tokenizer, fold.examples,
                                 {"saliency": method}, 4).scores
    gold_rows = fold.examples.assign(explained=fold.examples["label"])
    gold = explain_examples(fold.classifier.model, fold.classifier.tokenizer, gold_rows, {"saliency": method}, 4).scores
    return predicted, gold


def test_every_example_in_parts_in_both_modes_with_the_metrics_of_its_explanation(fold, tmp_path):
    progress = run(fold, tmp_path / "record")
    assert (progress.parts, progress.finished, progress.computed) == (6, 6, 6)  # 7 examples in parts of 3, 2 methods
    main_job_part(fold, tmp_path / "record", *main_job_scores(fold))
    rows, parts = read_record(tmp_path / "record")
    wrong = set(fold.examples.loc[~fold.examples["correct"], "example_id"])
    for method in METHODS:
        own = rows[rows["method"] == method]
        assert sorted(own.loc[own["mode"] == "predicted", "example_id"]) == sorted(fold.examples["example_id"])
        assert set(own.loc[own["mode"] == "gold", "example_id"]) == wrong
    # Known answer: a row's metrics are those of the method's explanation of that example for that mode's class.
    example = fold.examples[fold.examples["example_id"] == "x2"]  # mispredicted: predicted 0, label 1
    method = resolve_method("occlusion", layer=-1, vocabulary=token_vocabulary(fold.classifier.tokenizer),
                            settings=METHODS["occlusion"])
    for mode, explained in (("predicted", 0), ("gold", 1)):
        scores = explain_examples(fold.classifier.model, fold.classifier.tokenizer,
                                  example.assign(explained=explained), {"occlusion": method}, 4).scores["scores"]
        scores = [np.asarray(scores.iloc[0], dtype=float)]
        gold = [gold_labels(example["token_labels"].iloc[0])]
        want = evaluate(scores, gold, method_masks(scores, 0.4)).per_example.iloc[0]
        got = rows[(rows["method"] == "occlusion") & (rows["mode"] == mode) & (rows["example_id"] == "x2")].iloc[0]
        assert got["auroc"] == pytest.approx(want["auroc"], abs=1e-4) and got["f1"] == pytest.approx(want["f1"],
                                                                                                       abs=1e-4)
    table = record_table(rows, parts, n_boot=50)
    assert set(table["method"]) == {"saliency", *METHODS} and (table["coverage"] == 1).all()
    assert table.loc[table["method"] == "saliency", "seconds_per_explanation"].isna().all()
    assert (table.loc[table["method"] != "saliency", "seconds_per_explanation"] > 0).all()


def test_a_stopped_run_resumes_without_recomputing_and_other_settings_are_recomputed(fold, tmp_path):
    folder = tmp_path / "record"
    stopped = run(fold, folder, deadline=time.time() - 1)
    assert (stopped.finished, stopped.computed) == (0, 0)
    first = run(fold, folder, methods={"occlusion": METHODS["occlusion"]})
    kept = {p: (p.stat().st_mtime_ns, read_meta(p).fingerprint) for p in folder.rglob("part-*.csv")}
    resumed = run(fold, folder)
    assert (first.computed, resumed.computed, resumed.finished) == (3, 3, 6)  # only integrated gradients' parts
    assert all((p.stat().st_mtime_ns, read_meta(p).fingerprint) == v for p, v in kept.items())
    # A cut-short part (its sidecar never written) and a part of other settings are recomputed.
    part_path(folder, "sst2", "occlusion", 1).with_suffix(".json").unlink()
    changed = run(fold, folder, methods={"occlusion": METHODS["occlusion"],
                                         "integrated_gradients": {"n_steps": 6, "internal_batch_size": 8}})
    assert changed.computed == 1 + 3


def test_an_edited_part_or_one_of_another_run_fails_the_report_naming_the_file(fold, tmp_path):
    folder = tmp_path / "record"
    run(fold, folder, methods={"occlusion": METHODS["occlusion"]})
    main_job_part(fold, folder, *main_job_scores(fold))
    read_record(folder)
    part = part_path(folder, "sst2", "occlusion", 2)
    original = part.read_text()
    part.write_text(original.replace("0.", "0.9", 1))
    with pytest.raises(RecordError, match=r"part-002\.csv: its bytes differ from the checksum"):
        read_record(folder)
    part.write_text(original)
    other = RecordFold("sst2", fold.classifier, fold.examples, rho=0.3)  # another run's budget
    main_job_part(other, folder, *main_job_scores(fold))
    with pytest.raises(RecordError, match=r"occlusion/part-000\.csv: computed for another run of the fold"):
        read_record(folder)
    assert (folder / "sst2" / MAIN_JOB / "part-000.csv").is_file()


def test_an_example_held_twice_fails_the_report(fold, tmp_path):
    import shutil

    folder = tmp_path / "record"
    run(fold, folder, methods={"occlusion": METHODS["occlusion"]})
    main_job_part(fold, folder, *main_job_scores(fold))
    part = part_path(folder, "sst2", "occlusion", 0)
    for suffix in (".csv", ".json"):  # a copy under another part's name: every row twice
        shutil.copyfile(part.with_suffix(suffix), part.with_name("part-099").with_suffix(suffix))
    with pytest.raises(RecordError, match=r"sst2: 10 rows hold an example twice \(e\.g\. occlusion on x\d, predicted mode\)"):
        read_record(folder)


def test_a_second_run_at_once_refuses_naming_the_first(tmp_path):
    with record_lock(tmp_path, "the first run"):
        code = ("import sys; from pathlib import Path; from learned_attribution.services.record.parts import "
                f"record_lock\nwith record_lock(Path({str(tmp_path)!r}), 'second'): pass")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert done.returncode != 0
        assert "RecordBusy: another record run holds" in done.stderr and "the first run" in done.stderr
    with record_lock(tmp_path, "after the first"):  # released when the first ended
        pass
    with pytest.raises(RecordBusy):  # and within one process, a second holder is refused too
        with record_lock(tmp_path, "one"), record_lock(tmp_path, "two"):
            pass


def test_the_coverage_line_counts_a_fold_without_rows_as_none_and_the_summary_shows_each_difference():
    from learned_attribution.services.record.report import TABLE_COLUMNS, coverage_line, record_summary

    def row(task, mode, method, coverage, diff=np.nan):
        return {**dict.fromkeys(TABLE_COLUMNS, np.nan), "task": task, "mode": mode, "method": method,
                "coverage": coverage, "auroc": 0.8, "auroc_low": 0.7, "auroc_high": 0.9, "expnet_plus_minus_auroc": diff,
                "expnet_plus_minus_auroc_low": diff - 0.01, "expnet_plus_minus_auroc_high": diff + 0.01}
    table = pd.DataFrame([row(task, mode, "expnet_plus", 1.0) for task in ("a", "b") for mode in ("predicted", "gold")]
                         + [row("a", mode, "lime", 1.0, 0.1) for mode in ("predicted", "gold")]
                         + [row("b", "predicted", "lime", 0.5, 0.2)])
    assert coverage_line(table) == ("Methods on every example of all 2 folds in both modes: 1 of 2 "
                                    "(below 100%: lime 0%).")
    parts = pd.DataFrame([{"task": "a", "method": "lime", "explanations": 10, "seconds": 1.0, "kernels": "k"}])
    summary = record_summary(table, parts).splitlines()
    assert summary[0] == "| fold | mode | ExpNet+ AUROC | minus lime |"
    assert summary[2] == "| a | predicted | 0.800 [0.700, 0.900] | +0.100 [+0.090, +0.110] (100%) |"
    assert summary[5] == "| b | gold | 0.800 [0.700, 0.900] |  |"
