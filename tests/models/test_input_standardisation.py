"""Standardisation of near-constant columns (`core/models/learned/inputs.py`): a column constant up to float
rounding is fitted as constant and enters the network as exactly 0, in training and at prediction, so rounding that
differs between devices or batch shapes is not magnified into the network's inputs; a small column that does vary
keeps its z-scores; explainers saved before (stds floored at 1e-6, never 0) transform as they did."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from learned_attribution.core.models.learned import InputPipeline, MLPSettings, Variant
from learned_attribution.core.models.learned.inputs import constant_columns, statistics, within_example_ranks
from learned_attribution.core.models.signals import model_columns, signal_rows

EPS = float(np.finfo(np.float32).eps)
COLUMNS = ["afn_norm_l0", "embedding_grad_norm", "embedding_grad_x_input", "layer_grad_norm", "layer_grad_x_input",
           "relative_position"]
AFN, NORM, NOISE, SMALL_NORM, SMALL, POSITION = range(len(COLUMNS))
PIPELINES = {"global": Variant("global"), "example_z": Variant("example_z", example_z=True, signs="magnitude"),
             "ranks": Variant("ranks", network="simplex")}


def rows(n_examples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Raw signal rows [N, COLUMNS] of examples of 4-8 tokens and their example ids: a hidden-state norm of 4 up to
    rounding (AFN), a gradient norm (NORM) whose gradient . input is 0 up to rounding (NOISE: eps * ||g||, as at
    DeBERTa's word embeddings), a small gradient (1e-5..1e-4) whose gradient . input (1e-6..1e-5) varies for real,
    and a position."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(4, 9, n_examples)
    n = int(sizes.sum())
    values = np.empty((n, len(COLUMNS)), np.float64)
    values[:, AFN] = 4.0 * (1 + EPS * rng.normal(size=n))
    values[:, NORM] = rng.uniform(0.1, 0.5, n)
    values[:, NOISE] = EPS * values[:, NORM] * rng.normal(size=n)
    values[:, SMALL_NORM] = rng.uniform(1e-5, 1e-4, n)
    values[:, SMALL] = rng.uniform(1e-6, 1e-5, n) * rng.choice([-1, 1], n)
    values[:, POSITION] = np.concatenate([np.linspace(0, 1, size) for size in sizes])
    return values.astype(np.float32), np.repeat([f"e{seed}_{i}" for i in range(n_examples)], sizes)


def fitted(name: str, features: np.ndarray, ids: np.ndarray) -> InputPipeline:
    pipeline = InputPipeline.for_variant(PIPELINES[name], COLUMNS)
    pipeline.mean, pipeline.std = pipeline.fitted_statistics(features, ids)
    return pipeline


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_a_column_constant_up_to_rounding_enters_as_0_and_a_small_varying_one_keeps_its_z_scores(name):
    features, ids = rows(30, 0)
    pipeline = fitted(name, features, ids)
    constant = [AFN, NOISE]
    assert pipeline.std[constant].tolist() == [0.0, 0.0] and pipeline.mean[constant].tolist() == [0.0, 0.0]
    assert (pipeline.std[[NORM, SMALL_NORM, SMALL, POSITION]] > 0).all()
    inputs, _ = pipeline.transform(features, ids)
    assert (inputs[:, constant] == 0).all()
    if name == "global":  # z-scores over the training rows (population std, + 1e-6), the small columns' too
        for column in (NORM, SMALL_NORM, SMALL, POSITION):
            x = features[:, column].astype(np.float64)
            np.testing.assert_allclose(inputs[:, column], (x - x.mean()) / (x.std() + 1e-6), rtol=1e-5, atol=1e-5)
        assert np.corrcoef(inputs[:, SMALL], features[:, SMALL])[0, 1] > 0.999  # not squashed to noise
    elif name == "ranks":
        np.testing.assert_array_equal(inputs[:, [NORM, SMALL]], within_example_ranks(features[:, [NORM, SMALL]], ids))
    else:  # within-example z-scores of the magnitudes, standardised: the small signed column still ranks its tokens
        for example in np.unique(ids):
            mine = ids == example
            assert (np.argsort(inputs[mine, SMALL], kind="stable")
                    == np.argsort(np.abs(features[mine, SMALL]), kind="stable")).all()

    # The noise column is judged against its gradient norm's scale: its own magnitude (a few eps * 0.3, spread as
    # much) would not give it away, and without its norm column it is not judged constant.
    alone = [COLUMNS[AFN], COLUMNS[NOISE]]
    assert constant_columns(features[:, [AFN, NOISE]], alone).tolist() == [True, False]
    assert constant_columns(features, COLUMNS).tolist() == [True, False, True, False, False, False]


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_the_decision_is_fitted_on_training_rows_and_applied_unchanged_to_new_rows(name):
    train, train_ids = rows(30, 0)
    pipeline = fitted(name, train, train_ids)
    new, ids = rows(10, 1)
    # The same rows from another device: every value rounded differently, the rounding-noise columns drawn anew.
    rng = np.random.default_rng(2)
    other = (new * (1 + 4 * EPS * rng.normal(size=new.shape))).astype(np.float32)
    other[:, NOISE] = (EPS * new[:, NORM] * rng.normal(size=len(new))).astype(np.float32)
    inputs, _ = pipeline.transform(new, ids)
    np.testing.assert_allclose(pipeline.transform(other, ids)[0], inputs, rtol=0, atol=1e-5)
    if name != "ranks":  # where the noise column was standardised as before, the two devices disagreed
        before = InputPipeline.for_variant(PIPELINES[name], COLUMNS)
        before.mean, before.std = statistics(before.prepare(train, train_ids)[0])
        moved = np.abs(before.transform(other, ids)[0] - before.transform(new, ids)[0])[:, [AFN, NOISE]]
        assert (moved > 0.1).any(0).all()

    # Applied, not re-decided: a constant column that varies at prediction still enters as 0, and one that does
    # not vary there is still standardised with the training statistics.
    varied = new.copy()
    varied[:, NOISE] = rng.normal(size=len(new))
    varied[:, NORM] = 0.3
    changed, _ = pipeline.transform(varied, ids)
    assert (changed[:, [AFN, NOISE]] == 0).all()
    np.testing.assert_array_equal(changed[:, [SMALL_NORM, SMALL, POSITION]], inputs[:, [SMALL_NORM, SMALL, POSITION]])
    if name == "global":
        np.testing.assert_allclose(changed[:, NORM], (0.3 - pipeline.mean[NORM]) / pipeline.std[NORM], rtol=1e-6)

    # The decision travels with the statistics through a strict JSON config (a std of 0, no inf or nan).
    again = InputPipeline.from_config(json.loads(json.dumps(pipeline.config(), allow_nan=False)))
    np.testing.assert_array_equal(again.transform(other, ids)[0], pipeline.transform(other, ids)[0])


def test_an_explainer_saved_before_transforms_as_it_did():
    """Its config has stds floored at 1e-6 (none 0) and no other key: nothing is re-decided at prediction, so even
    its rounding-noise columns come out exactly as the formula gave them, not as 0."""
    features, ids = rows(10, 3)
    mean, std = statistics(features)
    config = {"columns": COLUMNS, "magnitudes": False, "anchor": None, "example_z": False, "ranks": False,
              "mean": [float(v) for v in mean], "std": [float(v) for v in std]}
    loaded = InputPipeline.from_config(config)
    inputs, _ = loaded.transform(features, ids)
    np.testing.assert_array_equal(inputs, ((features - mean) / std).astype(np.float32))
    assert (inputs[:, [AFN, NOISE]] != 0).any(0).all()
    assert loaded.config() == config


def test_the_tiny_debertas_padded_and_unpadded_signals_give_the_same_network_inputs(known_answer_classifier):
    """Real signals: DeBERTa-v2's embedding gradient . input is 0 up to rounding (its LayerNorm makes the logit blind
    to the word embeddings' scale), and one padded pass of three texts rounds it differently from three unpadded
    passes, as another device does. Fitted on the padded rows, the ExpNet+ inputs of both agree."""
    model, tokenizer = known_answer_classifier("deberta-v2", n_layers=3, n_heads=2)
    sets = ("attention", "attention_x_gradient", "layer_gradient", "saliency", "raw_attention_layers", "afn_norm",
            "position", "token_kind")
    texts = [tokenizer(text)["input_ids"] for text in ("The unbelievable film , and it was good .", "a bad movie",
                                                       "it was not very good !")]
    examples = pd.DataFrame({"example_id": ["e0", "e1", "e2"], "input_ids": texts, "predicted": [0, 2, 1],
                             "token_labels": [None] * 3})
    columns = model_columns(sets, model.config)
    padded, unpadded = (pd.concat(signal_rows(model, tokenizer, examples, sets, layer=-1, batch_size=size),
                                  ignore_index=True) for size in (3, 1))
    ids = padded["example_id"].to_numpy()
    assert (unpadded["example_id"].to_numpy() == ids).all()
    pipeline = InputPipeline.for_variant(Variant("signals", feature_sets=sets, network_settings=MLPSettings(gating=True),
                                                 example_z=True, signs="magnitude"), columns)
    pipeline.mean, pipeline.std = pipeline.fitted_statistics(padded[columns].to_numpy(np.float32), ids)
    # the noise column, and inverse_length (constant within every example, so its within-example z-scores are 0)
    assert [c for c, s in zip(columns, pipeline.std) if s == 0] == ["embedding_grad_x_input", "inverse_length"]
    inputs = [pipeline.transform(table[columns].to_numpy(np.float32), ids)[0] for table in (padded, unpadded)]
    np.testing.assert_allclose(inputs[1], inputs[0], rtol=0, atol=1e-5)
