"""`fewshot --env smoke` in a real Kedro session on the smoke folds: k = 0 is each fold's chosen ExpNet+ and scores
exactly as its row of the fold's ablation, every k > 0 has its seeded draws, and the page, summary and chart are
written."""
from pathlib import Path

import pandas as pd
import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SMOKE = PROJECT_ROOT / "data" / "smoke"
FOLDS = ("heldout_hatexplain", "heldout_sst2", "heldout_cola")

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def fewshot_run(smoke_crosstask_run, smoke_tracking_uri, smoke_runner):
    smoke_runner("fewshot", smoke_tracking_uri)
    return SMOKE / "08_reporting"


def test_k_zero_is_the_folds_explainer_and_every_k_has_its_draws(fewshot_run):
    curves = pd.read_csv(fewshot_run / "fewshot_curves.csv")
    metrics = pd.read_csv(fewshot_run / "crosstask_metrics.csv")
    assert list(curves["fold"].drop_duplicates()) == list(FOLDS)
    moved = []
    for fold in FOLDS:
        rows = curves[curves["fold"] == fold]
        shots = rows[rows["role"] == "few-shot"]
        assert sorted(shots["k"].unique()) == [0, 8]
        assert len(shots[shots["k"] == 0]) == 1 and list(shots.loc[shots["k"] == 8, "repeat"]) == [0, 1]
        assert (shots.loc[shots["k"] == 8, "n_train_examples"] == 8).all()
        # k = 0 is the fold's own ExpNet+ (scored from its signals here, from its own pass in the fold; the intervals
        # are each table's own bootstrap)
        own = metrics[(metrics["fold"] == fold) & (metrics["method"] == "expnet_plus") & (metrics["rule"] == "matched")
                      & (metrics["subset"] == "all")].iloc[0]
        prior = shots[shots["k"] == 0].iloc[0]
        for metric, column in (("auroc", "auroc"), ("f1_matched", "f1")):
            assert prior[metric] == pytest.approx(own[column], abs=1e-4), (fold, metric)
        moved.append((shots.loc[shots["k"] == 8, "auroc"] != prior["auroc"]).any())
        assert set(rows["role"]) == {"few-shot", "best baseline", "saliency"}
    # the refits moved (a stack whose weights sit at a vertex of the simplex can keep its ranking on a fold)
    assert any(moved)
    summary = pd.read_csv(fewshot_run / "fewshot_summary.csv")
    assert len(summary) == 2 * len(FOLDS) and set(summary["draws"]) == {1, 2}
    page = (fewshot_run / "fewshot.md").read_text()
    assert all(f"## {fold}" in page for fold in FOLDS) and "Best baseline:" in page
    assert (fewshot_run / "fewshot.png").stat().st_size > 10_000
    # each fold chose its schedule among the two smoke candidates, on both directions of its training tasks
    schedules = pd.read_csv(fewshot_run / "fewshot_schedules.csv")
    assert list(schedules["fold"].drop_duplicates()) == list(FOLDS)
    assert (schedules.groupby(["fold", "k"])["chosen"].sum() == 1).all() and set(schedules["k"]) == {8}
    assert (schedules["refits"] == 2).all()
    assert "## The refit's prior and schedule, chosen on the training tasks" in page


def test_the_results_document_and_readme_carry_the_curve(fewshot_run, tmp_path):
    from learned_attribution.adapters.cli import main

    readme = tmp_path / "README.md"
    readme.write_text("<!-- results:headline -->\n<!-- /results:headline -->\n"
                      "<!-- results:fewshot -->\n<!-- /results:fewshot -->\n")
    assert main(["results", "--reports", str(fewshot_run), "--base-reports", str(tmp_path / "none"),
                 "--output", str(tmp_path / "results.md"), "--readme", str(readme)]) == 0
    document = (tmp_path / "results.md").read_text()
    assert "## Few-shot in-task" in document and "### heldout_cola" in document
    assert (tmp_path / "images" / "fewshot.png").is_file()
    summary = pd.read_csv(fewshot_run / "fewshot_summary.csv")
    cola = summary[(summary["fold"] == "heldout_cola") & (summary["k"] == 8)].iloc[0]
    assert f"{cola['auroc']:.3f} / {cola['f1_matched']:.3f}" in readme.read_text()
    assert "| held-out task (best baseline AUROC / F1) | k = 0 | k = 8 |" in readme.read_text()
