"""docs/results.md and README's headline table come from a run's reports (services/reporting/results.py): known
answers on a small reports folder written here the way the pipeline writes it."""
from __future__ import annotations

import pandas as pd
import pytest

from learned_attribution.services.reporting.crosstask import headline_table
from learned_attribution.services.reporting.results import (Reports, ResultsError, fill_marked_blocks, results_document,
                                                            write_results)


def metric_row(method, family, rule, auroc, f1, n=100, subset="all", width=0.02):
    return {"fold": "heldout_sst2", "held_out_task": "sst2", "method": method, "family": family, "rule": rule,
            "subset": subset, "n_examples": n, "f1": f1, "f1_low": f1 - width, "f1_high": f1 + width, "auroc": auroc,
            "auroc_low": auroc - width, "auroc_high": auroc + width}


@pytest.fixture
def reports(tmp_path):
    folder = tmp_path / "08_reporting"
    (folder / "crosstask").mkdir(parents=True)
    (folder / "ablation").mkdir()
    rows = [metric_row("expnet_plus", "learned", "matched", 0.80, 0.45),
            metric_row("expnet_paper", "learned", "matched", 0.70, 0.40),
            metric_row("saliency", "gradient", "matched", 0.75, 0.46),
            metric_row("raw_attention", "attention", "matched", 0.68, 0.47),
            metric_row("lime", "perturbation", "matched", 0.90, 0.60, n=10),  # sample only: never the best baseline
            metric_row("all_tokens", "floor", "own", float("nan"), 0.41),
            metric_row("random", "floor", "own", 0.50, 0.30),
            metric_row("expnet_plus", "learned", "matched", 0.85, 0.5, n=60, subset="correct"),
            metric_row("expnet_plus", "learned", "matched", 0.60, 0.3, n=40, subset="incorrect")]
    pd.DataFrame(rows).to_csv(folder / "crosstask_metrics.csv", index=False)
    pd.DataFrame([{"fold": "heldout_sst2", "variant": "stack_self_training", "selected": True, "auroc": 0.80},
                  {"fold": "heldout_sst2", "variant": "cheap", "selected": False, "auroc": 0.82}]).to_csv(
        folder / "expnet_plus_ablation.csv", index=False)
    pd.DataFrame([{"variant": "stack_self_training", "direction": "a->b", "val_auroc": 0.70},
                  {"variant": "stack_self_training", "direction": "b->a", "val_auroc": 0.74},
                  {"variant": "stack_self_training", "direction": "mean", "val_auroc": 0.72},
                  {"variant": "cheap", "direction": "a->b", "val_auroc": 0.71},
                  {"variant": "cheap", "direction": "b->a", "val_auroc": 0.71},
                  {"variant": "cheap", "direction": "mean", "val_auroc": 0.71}]).to_csv(
        folder / "ablation" / "expnet_plus_selection_sst2.csv", index=False)
    pd.DataFrame([{"method": "forward", "ratio_to_forward": 1.0}, {"method": "expnet_plus", "ratio_to_forward": 0.45},
                  {"method": "expnet_paper", "ratio_to_forward": 0.95}, {"method": "saliency", "ratio_to_forward": 0.5},
                  {"method": "raw_attention", "ratio_to_forward": 0.9}, {"method": "lime", "ratio_to_forward": 0.003}]
                 ).to_csv(folder / "crosstask" / "explain_cost_sst2.csv", index=False)
    (folder / "node_timings").mkdir()  # each pipeline's own file; the main job's is crosstask.csv
    kernels = "torch CPU capability AVX2, oneDNN ISA AVX2, bf16 autocast off"
    pd.DataFrame([{"stage": "classifiers", "namespace": "sst2", "node": "a", "seconds": 90.0, "start_s": 0.0,
                   "end_s": 90.0, "kernels": kernels},
                  {"stage": "folds", "namespace": "heldout_sst2", "node": "b", "seconds": 30.0, "start_s": 170.0,
                   "end_s": 210.0, "kernels": kernels},  # 20 s after the node before it ended: loading its inputs
                  {"stage": "classifiers", "namespace": "cola", "node": "c", "seconds": 60.0, "start_s": 90.0,
                   "end_s": 150.0, "kernels": kernels}]).to_csv(folder / "node_timings" / "crosstask.csv", index=False)
    (folder / "crosstask_summary.md").write_text("# Cross-task results\n\n## heldout_sst2\n\ntext\n")
    return folder


def test_the_headline_row_has_the_numbers_of_the_reports(reports):
    table = headline_table(pd.read_csv(reports / "crosstask_metrics.csv"))
    header, rule, row = table.splitlines()
    assert row == ("| sst2 (n = 100) | predicted | **0.800 [0.780, 0.820]** | 0.700 [0.680, 0.720] | "
                   "saliency 0.750 [0.730, 0.770] | **0.450 [0.430, 0.470]** | 0.400 [0.380, 0.420] | "
                   "raw_attention 0.470 [0.450, 0.490] | 0.500, 0.410 | AUROC above, intervals apart; "
                   "F1 below (intervals overlap) |")


def test_the_document_names_its_sources_and_what_is_missing(reports):
    document = results_document(Reports.read(reports))
    assert "*From the `crosstask` run whose identity is unknown (no runs/crosstask.json in " in document
    # raw_attention is dominated by the paper's ExpNet (slower and less plausible); saliency is cheaper than
    # ExpNet+ (0.50x > 0.45x) but less plausible (0.75 < 0.80), so no baseline beats ExpNet+ on both.
    assert "| sst2 | expnet_paper (0.95x, 0.700), saliency (0.50x, 0.750), expnet_plus (0.45x, 0.800) | " \
           "0.45x, 0.800 | none |" in document
    # each stage's share of the wall time (a node's runs from the end of the one before it) beside its nodes' own
    # times, and the kernels it ran on
    assert "Kernels: torch CPU capability AVX2, oneDNN ISA AVX2, bf16 autocast off." in document
    assert "| classifiers | 2.5 | 2.5 |" in document and "| folds | 1.0 | 0.5 |" in document
    assert "| **total** | 3.5 | 3.0 |" in document
    assert "| sst2 | incorrectly predicted | 40 | 0.600 [0.580, 0.620] |" in document
    assert "### heldout_sst2" in document  # the included summary's headings nest one level down... twice
    # the selection rules on the one fold: the mean picks stack_self_training (0.72), the worst direction cheap (0.71)
    assert "| heldout_sst2 | mean_validation | -1.00 | stack_self_training | 0.800 | cheap | 0.820 | 0.020 |" \
        in document
    assert "| heldout_sst2 | worst_direction | +1.00 | cheap | 0.820 | cheap | 0.820 | 0.000 |" in document
    assert "Not in these reports (their sections left out): afn_report.md, attribution_throughput.csv, " \
           "classifier_metrics.csv, explain_cost_cola.csv, explain_cost_hatexplain.csv, expnet_plus_ablation.md, " \
           "expnet_plus_selection_cola.csv, expnet_plus_selection_hatexplain.csv, serving_load.csv." in document


def test_marked_blocks_are_rewritten_in_place_and_a_block_without_its_table_is_refused(reports, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- results:headline -->\nold table\n<!-- /results:headline -->\nend\n")
    (reports / "afn").mkdir()
    (reports / "afn" / "rh_by_layer.png").write_bytes(b"png")
    (reports / "afn_report.md").write_text("# AFN report\n\n![R_H by layer](afn/rh_by_layer.png)\n")
    written = write_results(reports, tmp_path / "results.md", [readme])
    assert written == [tmp_path / "images" / "afn_rh_by_layer.png", tmp_path / "results.md", readme]
    assert "![R_H by layer](images/afn_rh_by_layer.png)" in (tmp_path / "results.md").read_text()
    text = readme.read_text()
    assert text.startswith("intro\n<!-- results:headline -->\n*From the `crosstask` run whose identity is unknown")
    assert "\n\n| held-out task |" in text and "old table" not in text and text.endswith("<!-- /results:headline -->\nend\n")
    assert write_results(reports, None, [readme]) == [readme] and readme.read_text() == text  # idempotent
    readme.write_text(text + "<!-- results:serving_load -->\nstale\n<!-- /results:serving_load -->\n")
    with pytest.raises(ResultsError, match=r"README.md: block `serving_load` has no table in the reports read"):
        write_results(reports, None, [readme])


def test_a_rewrite_keeps_no_section_of_the_document_it_replaces(reports, tmp_path):
    output = tmp_path / "results.md"
    output.write_text("# Results\n\nold intro\n\n## AFN (`afn_report.md`)\n\nold afn table\n")
    write_results(reports, output, [])
    document = output.read_text()
    assert "old intro" not in document and "old afn table" not in document and "## AFN" not in document
    assert "afn_report.md" in document.splitlines()[-1]


def test_bad_inputs_name_the_file(reports, tmp_path):
    with pytest.raises(ResultsError, match="has no <!-- results:NAME -->"):
        fill_marked_blocks("no markers here", {}, "README.md")
    with pytest.raises(ResultsError, match=r"crosstask_metrics.csv does not exist: run `kedro run --pipeline crosstask`"):
        Reports.read(tmp_path / "empty")


def test_readme_is_a_front_door_that_quotes_no_number_by_hand():
    """README: a few screens, the set-up commands that .ci/run runs, and no result typed in by hand (a decimal
    number outside the generated blocks would be one). The base-size block (classifiers, cross-task table,
    transfer, AFN) adds about 35 generated lines to the default run's, the students' and the few-shot blocks 5 each."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text()
    assert len(readme.splitlines()) <= 188
    assert "python3 -m venv .venv && .venv/bin/pip install -e ." in readme and "kedro run --pipeline crosstask" in readme
    assert "python3 -m venv .venv && .venv/bin/pip install -e ." in (root / ".ci" / "run").read_text()
    tests = 'apt-get install -y chromium && .venv/bin/pip install -e ".[dev]" && pytest'  # the explorer's browser too
    assert tests in readme and tests in (root / ".ci" / "run").read_text()
    outside = re.sub(r"<!-- results:(\w+) -->.*?<!-- /results:\1 -->", "", readme, flags=re.DOTALL)
    assert outside != readme, "README has no generated headline block"
    assert not re.findall(r"\b0\.\d{2,}\b|\b\d+\.\d+x\b|\b\d+ min\b", outside)  # scores, cost ratios, run times


def test_the_base_size_tables_have_the_numbers_of_both_runs():
    from learned_attribution.services.reporting.afn import afn_comparison_table
    from learned_attribution.services.reporting.crosstask import transfer_table
    from learned_attribution.services.reporting.results import throughput_comparison_table

    def head(layer, layers, r_h, holds):
        return {"afn_layer": layer, "n_layers": layers, "share_high_context": 0.25, "r_h_context": r_h,
                "r_h_context_unchanged": 0.1, "r_h_prompt": 0.2, "high_content_share": 0.9,
                "content_function_ratio": 1.1, "content_function_ratio_next": 1.2,
                "claims": {"content_words_rank_highest": holds, "afn_layer_beats_next": False}}

    table = afn_comparison_table(head(4, 6, 0.322, True), head(8, 12, 0.5, False))
    assert "default run (layer 4 of 6) | base size (layer 8 of 12)" in table
    assert "| R_H: share of the context shift carried by HIGH tokens | about 76% | 32.2% | 50.0% |" in table
    assert "| content words rank highest | none |" in table

    def transferred(fold, auroc, saliency):
        rows = [{"fold": fold, "method": "sf (transferred)", "role": "transferred", "source_classifier": "bert 6L/12H",
                 "target_classifier": "mpnet 12L/12H", "auroc": auroc, "auroc_low": auroc - 0.01,
                 "auroc_high": auroc + 0.01, "f1_matched": 0.4, "f1_matched_low": 0.39, "f1_matched_high": 0.41}]
        for method, value in (("saliency", saliency), ("expnet_plus", 0.8)):
            rows.append({"fold": fold, "method": method, "role": "this fold's own", "auroc": value,
                         "auroc_low": value - 0.01, "auroc_high": value + 0.01})
        return pd.DataFrame(rows)

    rows = transfer_table(pd.concat([transferred("heldout_sst2", 0.75, 0.70), transferred("heldout_cola", 0.6, 0.7)]),
                          None).splitlines()
    assert rows[2].startswith("| sst2 | bert 6L/12H -> mpnet 12L/12H | 0.750 [0.740, 0.760] | 0.700") and \
        rows[2].endswith("| yes |")
    assert rows[3].startswith("| cola |") and rows[3].endswith("| no |")
    small = pd.DataFrame({"method": ["forward_all", "saliency"], "ratio_to_forward": [1.0, 0.5],
                          "examples_per_s": [100.0, 50.0]})
    base = pd.DataFrame({"method": ["forward_all", "saliency"], "ratio_to_forward": [1.0, 0.4],
                         "examples_per_s": [14.0, 5.6]})
    table = throughput_comparison_table(small, base)
    assert "MiniLM 100.0 examples/s, MPNet-base 14.0 examples/s" in table and "| saliency | 0.500 | 0.400 |" in table


def test_the_students_section_reads_the_amortize_reports(reports):
    from learned_attribution.services.reporting.amortize import students_table
    from learned_attribution.services.reporting.results import marked_blocks

    folder = reports / "amortize"
    folder.mkdir()

    def interval(method, **values):
        row = {"method": method, "n_examples": 10}
        for metric, value in values.items():
            row.update({metric: value, f"{metric}_low": value - 0.1, f"{metric}_high": value + 0.1})
        return row

    pd.DataFrame({"variant": ["student_gradient", "student_forward"], "train_spearman": [0.75, 0.5],
                  "val_spearman": [0.7, 0.45], "n_train": [40, 40], "n_val": [8, 8], "best_epoch": [12, 3],
                  "selected": [True, False]}).to_csv(folder / "sst2_variants.csv", index=False)
    pd.DataFrame([interval("student", spearman=0.7), interval("teacher (kernel_shap)", spearman=0.6)]).to_csv(
        folder / "sst2_fidelity.csv", index=False)
    pd.DataFrame([interval("student", comprehensiveness=0.3), interval("teacher (kernel_shap)", comprehensiveness=0.32),
                  interval("saliency", comprehensiveness=0.2)]).to_csv(folder / "sst2_faithfulness.csv", index=False)
    pd.DataFrame({"method": ["forward", "student", "teacher (kernel_shap)"], "ratio_to_forward": [1.0, 0.95, 0.003]}
                 ).to_csv(folder / "sst2_cost.csv", index=False)
    pd.DataFrame([metric_row("student", "amortized", "matched", 0.7, 0.4), metric_row("saliency", "gradient",
                                                                                       "matched", 0.75, 0.46)]
                 ).to_csv(folder / "sst2_plausibility.csv", index=False)
    read = Reports.read(reports)
    assert list(read.students) == ["sst2"]
    row = students_table(read.students).splitlines()[2]
    assert row.startswith("| sst2 (48, n = 10) | 0.700 [0.600, 0.800] | 0.600 [0.500, 0.700] | yes | 0.750 | 0.300 [0.200, 0.400] "
                          "| 0.320 [0.220, 0.420] | 0.200 [0.100, 0.300] | yes |")  # 0.300 >= 0.9 x 0.320, > 0.200
    assert "| 0.950 | 0.0030 | 0.700 [0.680, 0.720] | 0.750 [0.730, 0.770] |  |" in row
    document = results_document(read)
    assert "## Amortized students" in document
    assert "| sst2 | student_gradient | 0.750 | 0.700 | 12 | yes |\n| sst2 | student_forward | 0.500 | 0.450 | 3 |  |" \
        in document  # every variant, from variants.csv
    assert marked_blocks(read)["students"].endswith("\n\n" + students_table(read.students))
    weaker = pd.read_csv(folder / "sst2_faithfulness.csv")
    weaker.loc[weaker["method"] == "student", "comprehensiveness"] = 0.28  # under 0.9 x the teacher's 0.32
    weaker.to_csv(folder / "sst2_faithfulness.csv", index=False)
    assert "| 0.200 [0.100, 0.300] | no |" in students_table(Reports.read(reports).students)


def test_the_students_say_how_long_their_run_took_and_the_learning_curve_names_its_run(tmp_path):
    from learned_attribution.services.record.parts import RecordError
    from learned_attribution.services.record.runs import RecordedRun, write_benchmark_run
    from learned_attribution.services.reporting.amortize import learning_curve_table
    from learned_attribution.services.reporting.results import amortize_wall_time, benchmark_source

    run = RecordedRun(pipeline="amortize", commit="0123456789abcdef", started="2026-01-02T03:04:05Z",
                      finished="2026-01-02T04:16:35Z", kernels="AVX2", params={"compute.bf16": False})
    assert run.minutes == pytest.approx(72.5)
    said = amortize_wall_time(run)
    assert said.startswith("The run took 72 minutes from start to end")
    assert "within 90 minutes" in said
    assert "an unknown time" in amortize_wall_time(RecordedRun("amortize", None, "", "", ""))
    curve = pd.DataFrame({"task": ["sst2", "sst2"], "fraction": [0.5, 1.0], "n_texts": [340, 680],
                          "variant": ["student_forward", "student_encoder"], "train_spearman": [0.8, 0.9],
                          "val_spearman": [0.6, 0.65], "spearman": [0.62, 0.66], "spearman_low": [0.58, 0.61],
                          "spearman_high": [0.66, 0.7]})
    lines = learning_curve_table(curve).splitlines()
    assert lines[2:] == ["| sst2 | 340 | student_forward | 0.800 | 0.600 | 0.620 [0.580, 0.660] |  |",
                         "| sst2 | 680 | student_encoder | 0.900 | 0.650 | 0.660 [0.610, 0.700] | +0.040 |"]
    assert "rerun it to record them" in benchmark_source(tmp_path, "student_learning_curve")
    curve.to_csv(tmp_path / "student_learning_curve.csv", index=False)
    identity = {key: value for key, value in run.__dict__.items() if key not in ("finished", "files")}
    write_benchmark_run(tmp_path, "student_learning_curve", {**identity, "pipeline": "student_learning_curve"},
                        ["student_learning_curve.csv"])
    assert benchmark_source(tmp_path, "student_learning_curve").startswith(
        "*From the `student_learning_curve` run of ")
    (tmp_path / "student_learning_curve.csv").write_text(curve.assign(val_spearman=0.9).to_csv(index=False))
    with pytest.raises(RecordError, match="student_learning_curve.csv: its bytes differ .*edited by hand"):
        benchmark_source(tmp_path, "student_learning_curve")
    (tmp_path / "student_learning_curve.csv").unlink()
    with pytest.raises(RecordError, match="student_learning_curve.csv: listed by .* but missing"):
        benchmark_source(tmp_path, "student_learning_curve")


def test_a_students_row_without_a_rationale_test_set_leaves_its_auroc_cells_empty():
    from learned_attribution.services.reporting.amortize import students_table

    def interval(method, metric, value):
        return {"method": method, "n_examples": 5, metric: value, f"{metric}_low": value - 0.1,
                f"{metric}_high": value + 0.1}

    tables = {"variants": pd.DataFrame({"variant": ["student_encoder"], "train_spearman": [0.8], "val_spearman": [0.6],
                                        "n_train": [20], "n_val": [4], "best_epoch": [5], "selected": [True]}),
              "fidelity": pd.DataFrame([interval("student", "spearman", 0.6), interval("teacher (x)", "spearman", 0.5)]),
              "faithfulness": pd.DataFrame([interval(m, "comprehensiveness", v) for m, v in
                                            (("student", 0.3), ("teacher (x)", 0.3), ("saliency", 0.1))]),
              "cost": pd.DataFrame({"method": ["student", "teacher (x)"], "ratio_to_forward": [0.5, 0.01]})}
    row = students_table({"own": tables}).splitlines()[2]
    assert row.startswith("| own (24, n = 5) | 0.600 [0.500, 0.700] | 0.500 [0.400, 0.600] | yes |")
    assert row.endswith("| 0.500 | 0.0100 |  |  |  |")
