"""The learned explainers' input pipeline: fitted once during training, saved in the artifact and
applied unchanged at prediction. A variant of every kind of transform is trained, saved and loaded; the loaded
pipeline's inputs and the loaded explainer's scores equal the trained ones bit for bit."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from learned_attribution.core.models.artifacts import load_learned, save_learned
from learned_attribution.core.models.learned import InputPipeline, Variant, fit_variant
from learned_attribution.core.models.signals import columns_for

SETS = ("attention", "attention_x_gradient", "layer_gradient", "saliency")
COLUMNS = columns_for(SETS, n_heads=2, n_layers=2)
FAST = {"hidden": 4, "batch_size": 8, "max_epochs": 3, "patience": 2, "seeds": 2, "learning_rate": 1e-2}
VARIANTS = [
    Variant("per_task_magnitude_anchor", feature_sets=SETS, standardise="per_task", objective="pairwise",
            signs="magnitude", anchor="embedding_grad_norm", self_training=True, balance=True),
    Variant("example_z_self_training", feature_sets=SETS, example_z=True, objective="focal+pairwise",
            self_training=True, pseudo="agreement"),
    Variant("stack", feature_sets=SETS, network="simplex", objective="listwise", learning_rate=1e-2),
    Variant("paper", stopping="token_auroc"),
]


def signal_rows(task: str, n_examples: int, seed: int) -> pd.DataFrame:
    """Signal rows of `n_examples` examples (4-9 tokens) whose rationale follows the first column, on a task-specific
    scale (so per-task statistics differ)."""
    rng = np.random.default_rng(seed)
    rows = []
    for example in range(n_examples):
        n = int(rng.integers(4, 10))
        values = rng.normal(size=(n, len(COLUMNS))) * (1 + seed) + seed
        labels = (values[:, 0] > np.median(values[:, 0])).astype(float)
        for position in range(n):
            rows.append({"task": task, "example_id": f"{task}{example}", "token_label": labels[position],
                         **dict(zip(COLUMNS, values[position].astype(np.float32)))})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def tables():
    a, b, target = signal_rows("a", 30, 0), signal_rows("b", 30, 1), signal_rows("t", 20, 2)
    return a, b, target


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
def test_a_saved_explainer_transforms_and_scores_bit_for_bit_as_trained(variant, tables, tmp_path, training_settings):
    a, b, target = tables
    train = pd.concat([a[a["example_id"].str[1:].astype(int) < 20], b[b["example_id"].str[1:].astype(int) < 20]])
    val = pd.concat([a[a["example_id"].str[1:].astype(int) >= 20], b[b["example_id"].str[1:].astype(int) >= 20]])
    unlabeled = {"a": a.drop(columns="token_label"), "b": b.drop(columns="token_label"),
                 "t": target.drop(columns="token_label")}
    columns = columns_for(variant.feature_sets, 2, 2)
    trained = fit_variant(variant, train.reset_index(drop=True), val.reset_index(drop=True), target=unlabeled["t"],
                          stats_tables=unlabeled, columns=columns, rho=0.3, settings=training_settings(**FAST))
    save_learned(trained, tmp_path / "explainer")
    loaded = load_learned(tmp_path / "explainer")
    features, ids = target[columns].to_numpy(np.float32), target["example_id"].to_numpy()

    trained_inputs, trained_offsets = trained.inputs.transform(features, ids)
    loaded_inputs, loaded_offsets = loaded.inputs.transform(features, ids)
    assert loaded.inputs.config() == trained.inputs.config()
    assert np.array_equal(trained_inputs, loaded_inputs)
    assert (trained_offsets is None and loaded_offsets is None) or np.array_equal(trained_offsets, loaded_offsets)
    assert np.array_equal(trained.predict(features, ids), loaded.predict(features, ids))
    for member in range(trained.n_members):
        assert np.array_equal(trained.predict(features, ids, member), loaded.predict(features, ids, member))
    # The fitted statistics are the target's own (per task) or the training tokens' (global); ranks fit none.
    if variant.network == "simplex":
        assert np.array_equal(trained.inputs.mean, np.zeros(len(columns), np.float32))
    elif variant.standardise == "per_task":
        target_statistics = trained.inputs.fitted_statistics(features, ids)
        assert np.array_equal(trained.inputs.mean, target_statistics[0])
    else:
        assert np.array_equal(trained.inputs.mean, trained.inputs.fitted_statistics(
            train[columns].to_numpy(np.float32), train["example_id"].to_numpy())[0])


def test_within_example_steps_see_each_example_whole_whatever_else_is_transformed(tables):
    """Transforming a subset of examples gives those examples' rows of the whole table's transform: one example's
    inputs never depend on another (so a training batch, a pseudo-labelled subset and a served text agree)."""
    _, _, target = tables
    pipeline = InputPipeline(COLUMNS, magnitudes=True, anchor="embedding_grad_norm", example_z=True,
                             mean=np.full(len(COLUMNS), 0.5, np.float32), std=np.full(len(COLUMNS), 2.0, np.float32))
    features, ids = target[COLUMNS].to_numpy(np.float32), target["example_id"].to_numpy()
    whole, whole_offsets = pipeline.transform(features, ids)
    subset = np.isin(ids, ["t3", "t7"])
    part, part_offsets = pipeline.transform(features[subset], ids[subset])
    assert np.array_equal(part, whole[subset]) and np.array_equal(part_offsets, whole_offsets[subset])
    with pytest.raises(ValueError, match="reads whole examples: pass example_ids"):
        pipeline.transform(features)
    with pytest.raises(ValueError, match=rf"expected features of shape \[N, {len(COLUMNS)}\]"):
        pipeline.transform(features[:, :3], ids)
