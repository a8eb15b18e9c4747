"""`fewshot --env smoke` in a real Kedro session on the smoke folds: k = 0 is each fold's chosen ExpNet+ and scores
exactly as its row of the fold's ablation, every k > 0 has its seeded draws, and the page, summary and chart are
written; each fold's choice is stored in its folder, and a user's `fit_rationales` on the examples of a draw
reproduces that draw's row."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from learned_attribution.services.evaluation.protocol import matched_baselines

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
                      & (metrics["subset"] == "all") & (metrics["mode"] == "predicted")].iloc[0]
        prior = shots[shots["k"] == 0].iloc[0]
        for metric, column in (("auroc", "auroc"), ("f1_matched", "f1")):
            assert prior[metric] == pytest.approx(own[column], abs=1e-4), (fold, metric)
        # and in gold mode, the fold's gold-mode row (each test example explained for its gold class)
        own_gold = metrics[(metrics["fold"] == fold) & (metrics["method"] == "expnet_plus")
                           & (metrics["rule"] == "matched") & (metrics["subset"] == "all")
                           & (metrics["mode"] == "gold")].iloc[0]
        assert prior["gold_auroc"] == pytest.approx(own_gold["auroc"], abs=1e-4), fold
        moved.append((shots.loc[shots["k"] == 8, "auroc"] != prior["auroc"]).any())
        # beside the draws, the suggestion rule's 8 examples of the same pool (services/fewshot/suggest.py), refit with the
        # k's prior and schedule and scored as a draw is
        suggested = rows[rows["role"] == "suggested"]
        assert list(suggested["k"]) == [8] and list(suggested["repeat"]) == [0]
        assert (suggested["n_train_examples"] == 8).all() and suggested["auroc"].between(0, 1).all()
        assert list(suggested["prior"]) == list(shots.loc[shots["k"] == 8, "prior"].iloc[:1])
        rows = rows[rows["role"] != "suggested"]
        # the reference rows: the best baseline by AUROC, and by matched F1 where that is another method
        baselines = matched_baselines(metrics[(metrics["fold"] == fold) & (metrics["mode"] == "predicted")])
        by_auroc, by_f1 = (baselines.sort_values(m, ascending=False, kind="stable")["method"].iloc[0]
                           for m in ("auroc", "f1"))
        assert list(rows.loc[rows["role"] == "best baseline", "method"]) == [by_auroc]
        assert list(rows.loc[rows["role"] == "best baseline (F1)", "method"]) == ([by_f1] if by_f1 != by_auroc else [])
        assert set(rows["role"]) - {"best baseline (F1)"} == {"few-shot", "best baseline", "saliency"}
    # the refits moved (a stack whose weights sit at a vertex of the simplex can keep its ranking on a fold)
    assert any(moved)
    summary = pd.read_csv(fewshot_run / "fewshot_summary.csv")
    assert len(summary) == 2 * len(FOLDS) and set(summary["draws"]) == {1, 2}
    page = (fewshot_run / "fewshot.md").read_text()
    assert all(f"## {fold}" in page for fold in FOLDS) and "Best baseline:" in page
    assert (fewshot_run / "fewshot.png").stat().st_size > 10_000
    # each fold chose its prior among the two smoke candidates, on both directions of its training tasks
    priors = pd.read_csv(fewshot_run / "fewshot_priors.csv")
    assert list(priors["fold"].drop_duplicates()) == list(FOLDS) and set(priors["k"]) == {8}
    assert (priors.groupby(["fold", "k"])["chosen"].sum() == 1).all() and (priors.groupby("fold").size() == 2).all()
    assert (priors["refits"] == 2).all()
    assert "## The refit's prior, chosen on the training tasks" in page


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


def test_a_users_fit_on_a_draws_examples_is_that_draws_refit(fewshot_run, tmp_path, monkeypatch):
    # Known answer: the examples of the curve's draw 0 at k = 8, written as a user's rationale file, refit with
    # `fit_rationales` (the fold's stored choice at k = 8: its prior and schedule, seeded as draw 0) and scored on the
    # fold's test set as the curve scores a draw, give that row's AUROC and matched F1.
    import json

    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    from learned_attribution.pipelines import token_table
    from learned_attribution.services import bundle as bundles
    from learned_attribution.services.config import compute_settings, scoring_settings
    from learned_attribution.services.config import fewshot_settings
    from learned_attribution.services.fewshot.choice import draw
    from learned_attribution.services.fewshot.curve import annotated_pool
    from learned_attribution.services.evaluation.protocol import scored_examples
    from learned_attribution.services.evaluation.learned_scores import learned_rationale_scores
    from learned_attribution.services.fewshot.refit import fit_rationales

    monkeypatch.chdir(PROJECT_ROOT)  # the catalog's paths are relative to the project
    bootstrap_project(PROJECT_ROOT)
    with KedroSession.create(project_path=PROJECT_ROOT, env="smoke") as session:
        context = session.load_context()
    catalog, params = context.catalog, context.params
    scoring = scoring_settings(params["crosstask"], params["explained_layer"], params["seed"],
                               compute_settings(params["compute"]))
    settings = fewshot_settings(params["fewshot"], params["seed"], params["expnet_plus_variants"])
    curves = pd.read_csv(fewshot_run / "fewshot_curves.csv")
    for fold in FOLDS:
        task = fold.removeprefix("heldout_")
        choice = bundles.read_fewshot_choice(SMOKE / "06_models" / fold / bundles.FEWSHOT)
        assert sorted(choice.refits) == [8] and set(choice.priors) == {r.prior for r in choice.refits.values()} - \
            {"fold"}
        predictions = catalog.load(f"{task}.rationale_predictions")
        test = scored_examples(predictions, scoring)
        pool = annotated_pool(predictions, settings.pool_roles, list(test["example_id"]))
        ids = draw(list(pool["example_id"]), 8, 0, choice.refits[8].schedule.seed)
        file = tmp_path / f"{task}.jsonl"
        file.write_text("".join(json.dumps({"id": i, "words": list(r.words), "label": int(r.label),
                                            "rationale": [int(x) for x in r.word_rationale]}) + "\n"
                                for i, r in predictions.set_index("example_id").loc[ids].iterrows()))
        refit = fit_rationales(fold, file, tmp_path / fold, models_dir=SMOKE / "06_models", device="cpu")
        card = refit.card["fewshot"]
        assert (card["k"], card["n_examples"], card["test_check"]) == (8, 8, True)
        assert card["variant"] == choice.refits[8].variant == refit.learned["expnet_plus"].variant.name
        scores = learned_rationale_scores(refit.learned["expnet_plus"], token_table(
            catalog.load(f"{task}.explainer_signals")), test, float(refit.card["rho"]), scoring)
        row = curves[(curves["fold"] == fold) & (curves["role"] == "few-shot") & (curves["k"] == 8)
                     & (curves["repeat"] == 0)].iloc[0]
        assert scores["auroc"] == pytest.approx(row["auroc"], abs=1e-6), fold
        assert scores["f1_matched"] == pytest.approx(row["f1_matched"], abs=1e-6), fold


def test_the_suggestion_rule_benchmark_never_reads_a_rationale_test_set(fewshot_run, monkeypatch):
    """`benchmarks/suggestion_rules.py` makes a choice (`suggest`'s rule), so it must not read what is scored: with
    every rationale test example's labels and marks inverted, each rule's and each random draw's refit scores the
    same on the validation examples, and the choice is the same; it would change if they were read (the known
    answer beside: inverting the validation examples' marks changes the scores)."""
    import sys

    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))
    import suggestion_rules

    monkeypatch.chdir(PROJECT_ROOT)
    bootstrap_project(PROJECT_ROOT)
    with KedroSession.create(project_path=PROJECT_ROOT, env="smoke") as session:
        context = session.load_context()
    catalog, params = context.catalog, context.params
    original = catalog.load

    def inverted(role):
        def load(name, *args, **kwargs):
            data = original(name, *args, **kwargs)
            if name.endswith(".rationale_predictions"):
                data = data.copy()
                rows = data["role"] == role
                data.loc[rows, "token_labels"] = data.loc[rows, "token_labels"].map(
                    lambda labels: [t if t == -100 else 1 - t for t in labels])
                data.loc[rows, "label"] = 1 - data.loc[rows, "label"]
                data.loc[rows, "correct"] = ~data.loc[rows, "correct"].astype(bool)
            return data
        return load

    rules = ["typical per cluster", "random per cluster"]
    plain = pd.DataFrame(suggestion_rules.fold_rows(catalog, params, "sst2", [8], rules))
    monkeypatch.setattr(catalog, "load", inverted("rationale_test"))
    poisoned = pd.DataFrame(suggestion_rules.fold_rows(catalog, params, "sst2", [8], rules))
    pd.testing.assert_frame_equal(plain, poisoned)
    assert suggestion_rules.choose(plain).equals(suggestion_rules.choose(poisoned))
    monkeypatch.setattr(catalog, "load", inverted("rationale_val"))
    read = pd.DataFrame(suggestion_rules.fold_rows(catalog, params, "sst2", [8], rules))
    assert not np.allclose(read["auroc"], plain["auroc"])
