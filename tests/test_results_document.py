"""docs/results.md and README's headline table come from a run's reports (results.py): known answers on a small
reports folder written here the way the pipeline writes it."""
from __future__ import annotations

import pandas as pd
import pytest

from learned_attribution.results import (Reports, ResultsError, fill_marked_blocks, headline_table,
                                         results_document, write_results)


def metric_row(method, family, rule, auroc, f1, n=100, subset="all", width=0.02):
    return {"fold": "heldout_sst2", "held_out_task": "sst2", "method": method, "family": family, "rule": rule,
            "subset": subset, "n_examples": n, "f1": f1, "f1_low": f1 - width, "f1_high": f1 + width, "auroc": auroc,
            "auroc_low": auroc - width, "auroc_high": auroc + width}


@pytest.fixture
def reports(tmp_path):
    folder = tmp_path / "08_reporting"
    (folder / "crosstask").mkdir(parents=True)
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
    pd.DataFrame([{"fold": "heldout_sst2", "variant": "stack_self_training", "selected": True},
                  {"fold": "heldout_sst2", "variant": "cheap", "selected": False}]).to_csv(
        folder / "expnet_plus_ablation.csv", index=False)
    pd.DataFrame([{"method": "forward", "ratio_to_forward": 1.0}, {"method": "expnet_plus", "ratio_to_forward": 0.45},
                  {"method": "expnet_paper", "ratio_to_forward": 0.95}, {"method": "saliency", "ratio_to_forward": 0.5},
                  {"method": "raw_attention", "ratio_to_forward": 0.9}, {"method": "lime", "ratio_to_forward": 0.003}]
                 ).to_csv(folder / "crosstask" / "explain_cost_sst2.csv", index=False)
    pd.DataFrame([{"stage": "classifiers", "namespace": "sst2", "node": "a", "seconds": 90.0},
                  {"stage": "folds", "namespace": "heldout_sst2", "node": "b", "seconds": 30.0}]).to_csv(
        folder / "node_timings.csv", index=False)
    (folder / "crosstask_summary.md").write_text("# Cross-task results\n\n## heldout_sst2\n\ntext\n")
    return folder


def test_the_headline_row_has_the_numbers_of_the_reports(reports):
    table = headline_table(pd.read_csv(reports / "crosstask_metrics.csv"), pd.read_csv(reports / "expnet_plus_ablation.csv"))
    header, rule, row = table.splitlines()
    assert row == ("| sst2 (n = 100) | **0.800 [0.780, 0.820]** (stack_self_training) | 0.700 [0.680, 0.720] | "
                   "saliency 0.750 [0.730, 0.770] | **0.450 [0.430, 0.470]** | 0.400 [0.380, 0.420] | "
                   "raw_attention 0.470 [0.450, 0.490] | 0.500, 0.410 | AUROC above, intervals apart; "
                   "F1 below (intervals overlap) |")


def test_the_document_names_its_sources_and_what_is_missing(reports):
    document = results_document(Reports.read(reports), commit="abc1234")
    assert "generated at commit abc1234" in document
    # raw_attention is dominated by the paper's ExpNet (slower and less plausible); saliency is cheaper than
    # ExpNet+ (0.50x > 0.45x) but less plausible (0.75 < 0.80), so no baseline beats ExpNet+ on both.
    assert "| sst2 | expnet_paper (0.95x, 0.700), saliency (0.50x, 0.750), expnet_plus (0.45x, 0.800) | " \
           "0.45x, 0.800 | none |" in document
    assert "| folds | 0.5 |" in document and "| **total (sum of node times)** | 2.0 |" in document
    assert "| sst2 | incorrectly predicted | 40 | 0.600 [0.580, 0.620] |" in document
    assert "### heldout_sst2" in document  # the included summary's headings nest one level down... twice
    assert "Not in this run's reports (sections left out): afn_report.md, attribution_throughput.csv, " \
           "classifier_metrics.csv, explain_cost_cola.csv, explain_cost_hatexplain.csv, expnet_plus_ablation.md, " \
           "serving_load.csv." in document


def test_marked_blocks_are_rewritten_in_place_and_the_rest_is_kept(reports, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- results:headline -->\nold table\n<!-- /results:headline -->\n"
                      "<!-- results:serving_load -->\nkept: no serving report\n<!-- /results:serving_load -->\nend\n")
    (reports / "afn").mkdir()
    (reports / "afn" / "rh_by_layer.png").write_bytes(b"png")
    (reports / "afn_report.md").write_text("# AFN report\n\n![R_H by layer](afn/rh_by_layer.png)\n")
    written = write_results(reports, tmp_path / "results.md", [readme])
    assert written == [tmp_path / "images" / "afn_rh_by_layer.png", tmp_path / "results.md", readme]
    assert "![R_H by layer](images/afn_rh_by_layer.png)" in (tmp_path / "results.md").read_text()
    text = readme.read_text()
    assert text.startswith("intro\n<!-- results:headline -->\n| held-out task |") and "old table" not in text
    assert "kept: no serving report" in text and text.endswith("<!-- /results:serving_load -->\nend\n")
    assert write_results(reports, None, [readme]) == [readme] and readme.read_text() == text  # idempotent


def test_bad_inputs_name_the_file(reports, tmp_path):
    with pytest.raises(ResultsError, match="has no <!-- results:NAME -->"):
        fill_marked_blocks("no markers here", {}, "README.md")
    with pytest.raises(ResultsError, match=r"crosstask_metrics.csv does not exist: run `kedro run --pipeline crosstask`"):
        Reports.read(tmp_path / "empty")


def test_readme_is_a_front_door_that_quotes_no_number_by_hand():
    """README: a screen or two, the set-up commands that .ci/run runs, and no result typed in by hand (a decimal
    number outside the generated headline block would be one)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text()
    assert len(readme.splitlines()) <= 130
    assert "python3 -m venv .venv && .venv/bin/pip install -e ." in readme and "kedro run --pipeline crosstask" in readme
    assert "python3 -m venv .venv && .venv/bin/pip install -e ." in (root / ".ci" / "run").read_text()
    outside = re.sub(r"<!-- results:(\w+) -->.*?<!-- /results:\1 -->", "", readme, flags=re.DOTALL)
    assert outside != readme, "README has no generated headline block"
    assert not re.findall(r"\b0\.\d{2,}\b|\b\d+\.\d+x\b|\b\d+ min\b", outside)  # scores, cost ratios, run times
