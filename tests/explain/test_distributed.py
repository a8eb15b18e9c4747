"""Distributed attribution on a real 2-worker Dask LocalCluster (services/distributed.py): the same scores as in
process, in example order, the classifier loaded once per worker from its folder, failures listed per example, and
the fold's explain/faithfulness functions switched to Dask by `compute.dask`."""
from __future__ import annotations

import importlib

import numpy as np
import pandas as pd
import pytest

from learned_attribution.core.explainers import build_method
from learned_attribution.core.explainers.apply import explain_examples
from learned_attribution.core.models import artifacts
from learned_attribution.core.models.faithfulness import faithfulness
from learned_attribution.core.models.loading import load_classifier
from learned_attribution.services.config import compute_settings, dask_settings, scoring_settings
from learned_attribution.services.distributed import (DaskSettings, dask_client, explain_on_dask, faithfulness_on_dask,
                                                      worker_classifier)
from learned_attribution.services.evaluation.protocol import explain_rationale_set, sample_faithfulness

METHODS = {"lime": {"n_samples": 30, "seed": 0}, "kernel_shap": {"n_samples": 30, "seed": 1},
           "integrated_gradients": {"n_steps": 4}, "occlusion": {}, "saliency": {}}
TEXTS = [["the", "movie", "is", "great"], ["a", "bad", "film"], ["so", "boring", "and", "slow", "."],
         ["fun", "story"], ["this", "plot", "was", "very", "dull"], ["love", "it", "!"],
         ["not", "good", ",", "not", "funny"], ["the", "actors", "are", "sharp", "and", "funny"],
         ["sad", "end"], ["it", "is", "a", "slow", "but", "good", "story"], ["hate", "this"],
         ["very", "fun", "movie"]]


@pytest.fixture(scope="module")
def cluster():
    settings = DaskSettings("local", n_workers=2, threads_per_worker=1, methods=None, batches_per_task=1, retries=0,
                            device="cpu")
    with dask_client(settings) as client:
        yield client, settings


@pytest.fixture
def classifier(classifier_writer, tmp_path):
    return load_classifier(classifier_writer(tmp_path / "classifier", seed=3))


@pytest.fixture
def examples(classifier, rationale_rows):
    return rationale_rows(classifier.tokenizer, TEXTS)


def test_settings_are_off_by_default_and_checked(project_root):
    import yaml

    # The defaults live in conf/base only: the shipped `compute.dask` block runs everything in process.
    shipped = yaml.safe_load((project_root / "conf" / "base" / "parameters.yml").read_text())["compute"]["dask"]
    assert dask_settings(shipped) is None and dask_settings({**shipped, "address": None}) is None
    parsed = dask_settings({**shipped, "address": "tcp://10.0.0.5:8786", "methods": ["lime"]})
    assert parsed.address == "tcp://10.0.0.5:8786" and parsed.methods == ("lime",) and parsed.n_workers == 2
    assert parsed.device == "auto"
    assert dask_settings({**shipped, "address": "local"}, "cuda:1").device == "cuda:1"
    assert compute_settings({"device": "cpu", "bf16": False, "dask": {**shipped, "address": "local"}}).dask.device \
        == "cpu"
    for bad, message in (({"address": "nowhere"}, "compute.dask.address"), ({"address": "local", "n_workers": 0},
                         "compute.dask.n_workers"), ({"address": "local", "retries": -1}, "compute.dask.retries"),
                         ({"address": "local", "workers": 2}, r"unknown parameter\(s\) compute.dask.workers")):
        with pytest.raises(ValueError, match=message):
            dask_settings({**shipped, **bad})
    without_retries = {key: value for key, value in shipped.items() if key != "retries"}
    with pytest.raises(ValueError, match=r"parameter\(s\) compute.dask.retries missing"):
        dask_settings({**without_retries, "address": "local"})


@pytest.mark.slow  # a 2-worker LocalCluster
def test_two_workers_give_the_in_process_scores_in_example_order(cluster, classifier, examples):
    client, settings = cluster
    local = explain_examples(classifier.model, classifier.tokenizer, examples,
                             {name: build_method(name, **s) for name, s in METHODS.items()}, batch_size=3)
    remote = explain_on_dask(client, classifier, examples, METHODS, 3, settings)
    assert local.failures.empty and remote.failures.empty
    assert list(zip(remote.scores["method"], remote.scores["example_id"])) == \
        list(zip(local.scores["method"], local.scores["example_id"]))
    for mine, theirs in zip(local.scores["scores"], remote.scores["scores"]):
        np.testing.assert_allclose(theirs, mine, rtol=1e-5, atol=1e-6)
    assert set(remote.seconds) == set(METHODS)
    # Each worker loaded the classifier once, from its folder (not a copy shipped with every task).
    loaded = client.run(lambda: [key[0] for key in importlib.import_module("learned_attribution.services.distributed")
                                 ._WORKER_CLASSIFIERS])
    assert len(loaded) == 2
    for paths in loaded.values():
        assert paths.count(str(classifier.path.resolve())) == 1


@pytest.mark.slow  # a 2-worker LocalCluster
def test_faithfulness_on_workers_matches_in_process(cluster, classifier, examples):
    client, settings = cluster
    rng = np.random.default_rng(0)
    ids = [list(i) for i in examples["input_ids"]]
    scores = [rng.random(len(i) - 2) for i in ids]
    target = examples["predicted"].tolist()
    local = faithfulness(classifier.model, ids, scores, target, fractions=(0.2, 0.5), batch_size=4,
                         pad_token_id=classifier.tokenizer.pad_token_id)
    remote = faithfulness_on_dask(client, classifier, ids, scores, target, (0.2, 0.5), 4, settings)
    assert list(remote["example"]) == list(range(len(ids)))
    pd.testing.assert_frame_equal(remote, local, rtol=1e-5, atol=1e-6)


@pytest.mark.slow  # a 2-worker LocalCluster
def test_a_failing_example_is_listed_and_the_others_are_explained(cluster, classifier, examples):
    client, settings = cluster
    broken = examples.copy()
    broken.at[4, "input_ids"] = [*broken.at[4, "input_ids"][:-1], 999, broken.at[4, "input_ids"][-1]]  # off the vocabulary
    broken.at[4, "token_labels"] = [*broken.at[4, "token_labels"][:-1], 0, -100]
    local = explain_examples(classifier.model, classifier.tokenizer, broken, {"occlusion": build_method("occlusion")},
                             batch_size=3)
    remote = explain_on_dask(client, classifier, broken, {"occlusion": {}}, 3, settings)
    assert remote.failures["example_id"].tolist() == local.failures["example_id"].tolist() == ["x4"]
    assert "IndexError" in remote.failures["error"].iloc[0]
    assert sorted(remote.scores["example_id"]) == sorted(set(examples["example_id"]) - {"x4"})


@pytest.mark.slow  # a 2-worker LocalCluster
def test_a_fold_with_dask_set_scores_every_example_like_in_process(tiny_models_dir, rationale_rows):
    classifier = load_classifier(tiny_models_dir / "classifier_sst2")
    predictions = rationale_rows(classifier.tokenizer, TEXTS[:6])
    fold = tiny_models_dir / "heldout_sst2"
    paper, plus = artifacts.load_learned(fold / "expnet_paper"), artifacts.load_learned(fold / "expnet_plus")
    crosstask = {"batch_size": 2, "max_test_examples": None, "expensive": ["lime"], "expensive_sample_size": None,
                 "baselines": {"raw_attention": {}, "lime": {"n_samples": 20, "seed": 0}},
                 "bootstrap": {"n_boot": 10, "seed": 0}, "faithfulness": {"fractions": [0.5], "batch_size": 4}}
    dask = {"address": "local", "n_workers": 2, "threads_per_worker": 1, "methods": None, "batches_per_task": 1,
            "retries": 1}
    in_process = compute_settings({"device": "cpu", "bf16": False, "dask": {**dask, "address": None}})
    compute = compute_settings({"device": "cpu", "bf16": False, "dask": dask})
    scoring = scoring_settings(crosstask, layer=-1, seed=0, compute=compute)
    learned = {"expnet_plus": plus, "expnet_paper": paper}
    local, _, _ = explain_rationale_set(classifier, predictions, learned, scoring, in_process)
    remote, failures, cost = explain_rationale_set(classifier, predictions, learned, scoring, compute)
    assert failures.empty and remote["in_sample"].all()
    assert remote.groupby("method")["example_id"].nunique().to_dict() == {"expnet_plus": 6, "expnet_paper": 6,
                                                                          "raw_attention": 6, "lime": 6}
    assert cost.set_index("method").at["lime", "ran"] == "dask LocalCluster 2x1"
    assert cost.set_index("method").at["raw_attention", "ran"] == "in process (cpu)"
    key = ["method", "example_id"]
    merged = local.merge(remote, on=key, suffixes=("_local", "_dask"))
    assert len(merged) == len(local) == len(remote)
    for mine, theirs in zip(merged["scores_local"], merged["scores_dask"]):
        np.testing.assert_allclose(theirs, mine, rtol=1e-5, atol=1e-6)
    here = sample_faithfulness(classifier, remote, predictions, scoring, in_process)
    on_dask = sample_faithfulness(classifier, remote, predictions, scoring, compute)
    pd.testing.assert_frame_equal(on_dask.drop(columns="example"), here.drop(columns="example"),
                                  rtol=1e-5, atol=1e-6)
    # Dask methods must be baselines (the learned explainers run in process): refused when the settings are parsed,
    # before any work.
    with pytest.raises(ValueError, match="compute.dask.methods names .*expnet_plus"):
        scoring_settings(crosstask, layer=-1, seed=0,
                         compute=compute_settings({"device": "cpu", "bf16": False,
                                                   "dask": {**dask, "methods": ["expnet_plus"]}}))


def test_worker_classifier_is_cached_per_folder_and_device(classifier):
    first = worker_classifier(str(classifier.path), "cpu")
    assert worker_classifier(str(classifier.path), "cpu") is first
