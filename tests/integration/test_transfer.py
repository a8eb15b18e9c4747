"""`transfer --env smoke` in a real Kedro session: every smoke fold's shape-free ExpNet+ applied to the
smoke classifiers (`globals.transfer_source: data/smoke`: the same encoder, so the wiring is checked against a known
answer, the fold's own shape-free explainer scored on its own classifier's signals), and the base-size section of
`learned-attribution results`."""
from pathlib import Path

import pandas as pd
import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SMOKE = PROJECT_ROOT / "data" / "smoke"
FOLDS = ("heldout_hatexplain", "heldout_sst2", "heldout_cola")

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def transfer_run(smoke_crosstask_run, smoke_tracking_uri, smoke_runner):
    smoke_runner("transfer", smoke_tracking_uri)
    return SMOKE / "08_reporting"


def _own_scores(catalog, fold: str, scoring) -> dict:
    """The fold's shape-free explainer scored on its own classifier's signals and rationale test examples."""
    from learned_attribution.pipelines import token_table
    from learned_attribution.services.evaluation.protocol import scored_examples
    from learned_attribution.services.evaluation.learned_scores import learned_rationale_scores

    task = fold.removeprefix("heldout_")
    model = catalog.load(f"{fold}.expnet_plus_shape_free")
    examples = scored_examples(catalog.load(f"{task}.rationale_predictions"), scoring)
    return learned_rationale_scores(model, token_table(catalog.load(f"{task}.explainer_signals")), examples,
                                    catalog.load(f"{fold}.budget")["rho"], scoring)


def test_a_transferred_shape_free_variant_scores_as_on_its_own_fold(transfer_run):
    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    from learned_attribution.services.config import scoring_settings

    table = pd.read_csv(transfer_run / "transfer_metrics.csv")
    assert list(table["fold"].drop_duplicates()) == list(FOLDS)
    bootstrap_project(PROJECT_ROOT)
    with KedroSession.create(project_path=PROJECT_ROOT, env="smoke") as session:
        context = session.load_context()
        catalog, params = context.catalog, context.params
        scoring = scoring_settings(params["crosstask"], params["explained_layer"], params["seed"])
        for fold in FOLDS:
            rows = table[table["fold"] == fold]
            transferred = rows[rows["role"] == "transferred"].iloc[0]
            assert transferred["method"] == "shape_free_stack_self_training (transferred)"
            own = _own_scores(catalog, fold, scoring)
            # The same explainer on the same classifier's signals and examples: the same numbers exactly.
            for metric in ("auroc", "auroc_low", "auroc_high", "f1_matched"):
                assert transferred[metric] == pytest.approx(own[metric], abs=1e-12), (fold, metric)
    assert {"expnet_plus", "expnet_paper", "saliency", "random", "all_tokens"} <= set(rows["method"])
    page = (transfer_run / "transfer.md").read_text()
    assert all(f"## {fold}" in page for fold in FOLDS) and "saliency's by" in page


def test_the_results_document_has_a_base_size_section_when_a_base_size_run_is_there(transfer_run, tmp_path):
    """The smoke reports stand in for a base-size run here: the section's tables read that folder's files."""
    from learned_attribution.adapters.cli import main

    readme = tmp_path / "README.md"
    readme.write_text("<!-- results:headline -->\n<!-- /results:headline -->\n"
                      "<!-- results:base_size -->\n<!-- /results:base_size -->\n")
    assert main(["results", "--reports", str(transfer_run), "--base-reports", str(transfer_run),
                 "--output", str(tmp_path / "results.md"), "--readme", str(readme)]) == 0
    document = (tmp_path / "results.md").read_text()
    assert "## Base size: all-mpnet-base-v2" in document and "### Cross-task headline at base size" in document
    assert "### MiniLM-trained folds on the base-size classifiers" in document
    classifiers = pd.read_csv(transfer_run / "classifier_metrics.csv")
    cola = classifiers[(classifiers["task"] == "cola") & (classifiers["eval_set"] == "test")].iloc[0]
    met = "yes" if cola["mcc"] >= 0.45 else "no"
    assert f"| cola | mcc | >= 0.45 | {cola['mcc']:.3f} | {cola['mcc']:.3f} | {met} |" in document
    assert "| cola | mcc | >= 0.45 |" in readme.read_text()
    missing = tmp_path / "no_base_run"
    assert main(["results", "--reports", str(transfer_run), "--base-reports", str(missing),
                 "--output", str(tmp_path / "plain.md"), "--readme", "none"]) == 0
    assert "## Base size" not in (tmp_path / "plain.md").read_text()
