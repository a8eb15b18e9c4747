"""The poisoning test at the pipeline level: one fold's slice run twice by Kedro, from the raw
files on, once with the held-out task's rationale file inverted (every word's mark flipped). Nothing a fold or its
ablation trains or selects may read the held-out task's rationales, so the ablation's selection table and every
trained weight (the paper's ExpNet, ExpNet+'s recipe and shape-free variant, every candidate) are identical; the held-out scores read them, so they differ."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from learned_attribution.core.tasks import TASK_REGISTRY

SYNTHETIC = "synthetic"  # the held-out task, read from its raw file (tests/pipelines/conftest.py)
FOLD, ABLATION = f"heldout_{SYNTHETIC}", f"ablation_{SYNTHETIC}"


@pytest.fixture(scope="module")
def clean_and_poisoned(run_slice, fold_slice, synthetic_task, synthetic_raw_file):
    """The fold's slice (and its ablation's) from the raw files, run with the held-out task's rationale file as it is, then inverted."""
    tasks = [*(task for task in TASK_REGISTRY if task.name in ("sst2", "cola")), synthetic_task]
    pipeline = fold_slice(tasks, held_out=[SYNTHETIC])
    assert {n.namespace for n in pipeline.nodes if n.namespace and n.namespace.startswith(("heldout_", "ablation_"))} \
        == {FOLD, ABLATION}
    names = [task.name for task in tasks]
    return (run_slice(pipeline, names, synthetic_raw_file()),
            run_slice(pipeline, names, synthetic_raw_file(invert_rationales=True)))


def _token_labels(catalog) -> list[list[int]]:
    tokenized = catalog.load(f"tokenized_{SYNTHETIC}")
    return [list(labels) for labels in tokenized.loc[tokenized["role"].str.startswith("rationale"), "token_labels"]]


def _assert_same_tensors(state: dict, twin: dict, what: str) -> None:
    assert state.keys() == twin.keys(), what
    for key, value in state.items():
        assert torch.equal(value, twin[key]), f"{what}: {key} differs"


@pytest.mark.slow
def test_the_inverted_rationale_file_reaches_the_fold(clean_and_poisoned):
    clean, poisoned = clean_and_poisoned
    labels, inverted = _token_labels(clean), _token_labels(poisoned)
    assert labels and all(sum(1 for x in example if x == 1) > 0 for example in labels)
    assert inverted == [[x if x == -100 else 1 - x for x in example] for example in labels]
    signals = {name: pd.concat([load() for load in catalog.load(f"{SYNTHETIC}.explainer_signals").values()])
               for name, catalog in (("clean", clean), ("poisoned", poisoned))}
    np.testing.assert_array_equal(signals["poisoned"]["token_label"], 1 - signals["clean"]["token_label"])


def test_held_out_rationales_change_no_selection_and_no_trained_weight(clean_and_poisoned):
    clean, poisoned = clean_and_poisoned
    pd.testing.assert_frame_equal(clean.load(f"{ABLATION}.expnet_plus_selection"),
                                  poisoned.load(f"{ABLATION}.expnet_plus_selection"))
    assert clean.load(f"{FOLD}.budget") == poisoned.load(f"{FOLD}.budget")

    variants, twins = clean.load(f"{ABLATION}.expnet_plus_trained"), poisoned.load(f"{ABLATION}.expnet_plus_trained")
    assert variants.keys() == twins.keys() and len(variants) >= 2
    for name in ("expnet", "expnet_plus", "expnet_plus_shape_free"):
        variants[name], twins[name] = clean.load(f"{FOLD}.{name}"), poisoned.load(f"{FOLD}.{name}")
    for name, model in variants.items():  # every candidate, the paper's ExpNet and the two ExpNet+ the fold keeps
        twin = twins[name]
        assert model.variant == twin.variant, name
        _assert_same_tensors(model.net.state_dict(), twin.net.state_dict(), name)
        assert model.inputs.config() == twin.inputs.config(), name  # the fitted input pipeline (statistics)
        assert (model.calibrated_threshold, model.n_pseudo_examples, model.history) == \
            (twin.calibrated_threshold, twin.n_pseudo_examples, twin.history), name
    # Self-training trained on the held-out classifier's signals: the one way held-out data enters a fold's training.
    assert any(model.n_pseudo_examples > 0 for model in variants.values())


def test_the_held_out_scores_read_the_inverted_rationales(clean_and_poisoned):
    clean, poisoned = clean_and_poisoned
    key = ["method", "rule", "subset"]
    metrics = clean.load(f"{FOLD}.fold_metrics").merge(poisoned.load(f"{FOLD}.fold_metrics"), on=key,
                                                       suffixes=("", "_poisoned"))
    learned = metrics[metrics["method"].isin(["expnet_plus", "expnet_paper"]) & (metrics["subset"] == "all")
                      & (metrics["rule"] == "matched")]
    assert len(learned) == 2
    assert (learned["auroc"] - learned["auroc_poisoned"]).abs().min() > 1e-3
    ablation = clean.load(f"{ABLATION}.expnet_plus_ablation").merge(
        poisoned.load(f"{ABLATION}.expnet_plus_ablation"), on="variant", suffixes=("", "_poisoned"))
    variants = ablation[ablation["val_auroc"].notna()]
    assert len(variants) >= 2
    np.testing.assert_array_equal(variants["val_auroc"], variants["val_auroc_poisoned"])
    assert (variants["auroc"] - variants["auroc_poisoned"]).abs().min() > 1e-3
