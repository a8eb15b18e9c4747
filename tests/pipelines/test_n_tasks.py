"""The cross-task protocol over N >= 3 tasks: a fourth task, added by its reader and its
configuration alone (tests/pipelines/conftest.py, docs/extending.md), gets its own fold, and every fold trains on
the other three tasks."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from learned_attribution.pipelines import ablation, crosstask
from learned_attribution.core.tasks import TASK_REGISTRY, TASKS

SYNTHETIC = "synthetic"  # the fourth task (tests/pipelines/conftest.py)
NAMES = [*TASKS, SYNTHETIC]


@pytest.fixture(scope="module")
def four_tasks(synthetic_task):
    """The registered tasks and the synthetic one, as a registry with a fourth entry would list them."""
    assert synthetic_task.name == SYNTHETIC
    return (*TASK_REGISTRY, synthetic_task)


def _node(pipeline, name: str):
    (found,) = [n for n in pipeline.nodes if n.name == name]
    return found


def test_a_fourth_task_gets_a_fold_and_an_ablation_trained_on_the_other_three(four_tasks):
    pipeline = crosstask.create_pipeline(four_tasks)
    candidates = ablation.create_pipeline(NAMES)
    reader = _node(pipeline, f"read_{SYNTHETIC}")
    assert reader.inputs == ["raw_synthetic_sentences", "params:data_processing.synthetic",
                             "params:data_processing.strict"]
    assert "params:classifiers.synthetic" in _node(pipeline, f"{SYNTHETIC}.parse_settings").inputs
    assert set(_node(pipeline, f"{SYNTHETIC}.train_classifier").inputs) >= {f"tokenized_{SYNTHETIC}",
                                                                            f"{SYNTHETIC}.settings"}
    for task in NAMES:
        others = [t for t in NAMES if t != task]
        fold = f"heldout_{task}"
        training = {f"{t}.attention_features" for t in others} | {f"{t}.explainer_signals" for t in others}
        reads = {name: set(_node(pipeline, f"{fold}.{name}").inputs) for name in ("train_expnet", "fit_expnet_plus")}
        reads["select_expnet_plus"] = set(_node(candidates, f"ablation_{task}.select_expnet_plus").inputs)
        assert {i for i in reads["train_expnet"] if i.endswith(".attention_features")} == \
            {f"{t}.attention_features" for t in others}
        settings = {f"ablation_{task}.{name}" for name in ("candidates", "train_on", "compute_settings")}
        assert {i for i in reads["select_expnet_plus"] if not i.startswith("params:")} == \
            {f"{t}.{signals}" for t in others for signals in ("explainer_signals", "gold_signals")} | \
            {f"{fold}.budget"} | settings
        # Gold-class signals of the training tasks only: the held-out task's labels choose no class to train on.
        assert {i for i in reads["fit_expnet_plus"] if i.endswith(".gold_signals")} == \
            {f"{t}.gold_signals" for t in others}
        assert {i for i in reads["fit_expnet_plus"] if i.endswith(".explainer_signals")} == \
            {f"{t}.explainer_signals" for t in NAMES}
        # The held-out task enters a fold's training only as its classifier's (unlabeled) signals.
        assert not {i for r in reads.values() for i in r if i.startswith(f"{task}.")} - \
            {f"{task}.classifier", f"{task}.explainer_signals"}
        assert f"{task}.explainer_signals" not in reads["select_expnet_plus"] | reads["train_expnet"]
        assert not training & set(_node(pipeline, f"{fold}.score_fold").inputs)
    assert _node(pipeline, "combine_folds").inputs == [f"heldout_{t}.{table}" for t in NAMES
                                                       for table in ("fold_metrics", "gold_metrics")]
    assert _node(pipeline, "combine_classifier_metrics").inputs == [f"{t}.classifier_metrics" for t in NAMES]


def test_the_default_tasks_keep_three_folds_of_two_training_tasks():
    folds = crosstask.create_folds()
    assert TASKS == ("hatexplain", "sst2", "cola")
    for task in TASKS:
        assert {i for i in _node(folds, f"heldout_{task}.fit_expnet_plus").inputs
                if i.endswith(".explainer_signals")} == {f"{t}.explainer_signals" for t in TASKS}
        select = _node(ablation.create_pipeline(), f"ablation_{task}.select_expnet_plus")
        assert {i for i in select.inputs if i.endswith(".explainer_signals")} == \
            {f"{t}.explainer_signals" for t in TASKS if t != task}


@pytest.mark.parametrize("tasks", [("sst2", "cola"), ("sst2", "cola", "sst2")])
def test_fewer_than_three_distinct_tasks_is_refused(tasks):
    with pytest.raises(ValueError, match="at least 3 distinct tasks"):
        crosstask.create_folds(tasks)


@pytest.mark.slow
def test_four_folds_run_each_trained_on_three_tasks(run_slice, fold_slice, four_tasks, synthetic_raw_file):
    """Every fold of four tasks and its ablation, from the fourth task's raw file to the cross-fold reports. Needs the
    ablation's selection over three training tasks (`models.learned.select_variant`: for each training task, fit on
    the other two, validate on it)."""
    raw = synthetic_raw_file()
    catalog = run_slice(fold_slice(four_tasks), NAMES, raw)
    report = catalog.load("data_report")
    assert set(report["task"]) == set(NAMES)
    assert report.loc[report["task"] == SYNTHETIC, "n_examples"].sum() == len(raw.lines()) - 1  # less the header
    assert set(catalog.load("classifier_metrics")["task"]) == set(NAMES)
    for task in NAMES:
        fold, others = f"heldout_{task}", sorted(t for t in NAMES if t != task)
        budget = catalog.load(f"{fold}.budget")
        assert sorted(k.removeprefix("density_") for k in budget if k.startswith("density_")) == others
        assert catalog.load(f"{fold}.expnet").context["training_tasks"] == others
        variants = catalog.load(f"ablation_{task}.expnet_plus_trained")
        assert variants and all(m.context["training_tasks"] == others for m in variants.values())
        selection = catalog.load(f"ablation_{task}.expnet_plus_selection")
        assert set(selection["variant"]) == set(variants)
        # one validation per left-out training task, plus the mean
        assert (selection[selection["direction"] != "mean"].groupby("variant").size() == len(others)).all()
        assert len(selection.loc[selection["selected"], "variant"].unique()) == 1
        for name, recipe in (("expnet_plus", "stack_self_training"),
                             ("expnet_plus_shape_free", "shape_free_stack_self_training")):
            model = catalog.load(f"{fold}.{name}")
            assert model.variant.name == recipe and model.context["training_tasks"] == others
        metrics = catalog.load(f"{fold}.fold_metrics")
        scores = catalog.load(f"{fold}.token_scores")
        for method in ("expnet_plus", "expnet_paper"):  # the table's AUROC, recomputed from the token scores
            rows = scores[scores["method"] == method]
            aurocs = [roc_auc_score(g, s) for g, s in zip(rows["gold"], rows["scores"]) if 0 < sum(g) < len(g)]
            row = metrics[(metrics["method"] == method) & (metrics["subset"] == "all") & (metrics["rule"] == "matched")]
            assert row["auroc"].item() == pytest.approx(np.mean(aurocs), abs=1e-9), (fold, method)
    assert list(catalog.load("crosstask_metrics")["fold"].unique()) == [f"heldout_{t}" for t in NAMES]
    assert set(catalog.load("expnet_plus_ablation")["fold"]) == {f"heldout_{t}" for t in NAMES}
