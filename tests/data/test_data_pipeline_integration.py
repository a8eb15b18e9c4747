"""The data_processing pipeline in a real Kedro session on the shipped raw data (smoke environment).

It writes the smoke environment's data outputs (wherever its catalog puts them under data/): smoke-sized
tokenized tables and report; the examples_* tables are never capped.
"""
from __future__ import annotations

import pytest

from learned_attribution.core.data.schema import EXAMPLE_COLUMNS

TASKS = ("hatexplain", "sst2", "cola")
# Counts of the shipped data (data/01_raw/README.md): examples per role before any cap.
EXPECTED_ROLE_COUNTS = {
    "hatexplain": {"classifier_train": 5514, "rationale_train": 3295, "classifier_val": 1922,
                   "rationale_val": 1141, "classifier_test": 1924, "rationale_test": 1142},
    "sst2": {"classifier_train": 67349, "classifier_val": 872, "classifier_test": 1821,
             "rationale_train": 6920, "rationale_val": 872, "rationale_test": 1821},
}
COLA_TRAIN_LINES, COLA_DEV_LINES = 8551, 527


@pytest.fixture(scope="module")
def smoke_run(project_root):
    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    bootstrap_project(project_root)
    with KedroSession.create(project_path=project_root, env="smoke") as session:
        session.run(pipeline_names=["data_processing"])
        # Read the outputs back through the smoke environment's catalog (wherever it puts them).
        context = session.load_context()
        catalog = context.catalog
        return {
            "max_per_role": context.params["data_processing"]["max_per_role"],
            "report": catalog.load("data_report"),
            "examples": {t: catalog.load(f"examples_{t}") for t in TASKS},
            "tokenized": {t: catalog.load(f"tokenized_{t}") for t in TASKS},
            "skipped": {t: catalog.load(f"skipped_{t}") for t in TASKS},
        }


@pytest.mark.integration
def test_uncapped_examples_have_the_shipped_counts(smoke_run):
    examples = smoke_run["examples"]
    for task, expected in EXPECTED_ROLE_COUNTS.items():
        assert list(examples[task].columns) == EXAMPLE_COLUMNS
        assert examples[task]["role"].value_counts().to_dict() == expected, task
    cola = examples["cola"]
    counts = cola["role"].value_counts()
    assert counts["rationale_test"] >= 500
    assert counts["classifier_test"] == COLA_DEV_LINES
    # Train sentences: fitted on once, or held out with their rationale_test group (as sentence or partner).
    fit_ids = set(cola.loc[cola["role"].isin(["classifier_train", "classifier_val"]), "example_id"])
    test_ids = set(cola.loc[cola["role"] == "rationale_test", "example_id"])
    assert not fit_ids & test_ids
    assert len(fit_ids) == counts["classifier_train"] + counts["classifier_val"]
    # Held out: each train rationale_test sentence, and at most one partner each.
    n_test_train = ((cola["role"] == "rationale_test") & (cola["split"] == "train")).sum()
    assert COLA_TRAIN_LINES - 2 * n_test_train <= len(fit_ids) <= COLA_TRAIN_LINES - n_test_train
    assert all(frame.empty for frame in smoke_run["skipped"].values())


@pytest.mark.integration
def test_tokenized_tables_are_capped_and_aligned(smoke_run):
    cap = smoke_run["max_per_role"]
    for task in TASKS:
        full = smoke_run["examples"][task]["role"].value_counts()
        tokenized = smoke_run["tokenized"][task]
        assert tokenized["role"].value_counts().to_dict() == {role: min(n, cap) for role, n in full.items()}, task
        for ids, word_ids, labels in zip(tokenized["input_ids"], tokenized["word_ids"], tokenized["token_labels"]):
            assert len(ids) == len(word_ids) <= 128
            assert word_ids[0] == word_ids[-1] == -1
            if labels is not None:
                assert len(labels) == len(ids) and labels[0] == labels[-1] == -100


@pytest.mark.integration
def test_data_report_of_the_smoke_run(smoke_run):
    report, cap = smoke_run["report"], smoke_run["max_per_role"]
    full = {t: smoke_run["examples"][t]["role"].value_counts() for t in TASKS}
    per_role = report.groupby(["task", "role"])["n_examples"].sum()
    assert per_role.to_dict() == {(t, role): min(n, cap) for t in TASKS for role, n in full[t].items()}
    assert (report["n_skipped"] == 0).all()
    rationale = report[report["role"].str.startswith("rationale")].set_index(["task", "split"])
    # Every HateXplain rationale post is toxic with at least one marked word.
    hatexplain = rationale.loc["hatexplain"]
    assert (hatexplain["n_with_rationale"] == hatexplain["n_examples"]).all()
    assert 0.3 < rationale.loc[("hatexplain", "test"), "rationale_density"] < 0.45
    assert 0.15 < rationale.loc[("sst2", "test"), "rationale_density"] < 0.3
    assert report.loc[report["role"].str.startswith("classifier"), "rationale_density"].isna().all()
