"""The one learned-explainer core (`models/learned`): the paper's ExpNet as a variant (focal loss, token batches,
early stopping on the pooled token AUROC, threshold calibration), the ranking losses, the networks, the input
pipeline, pseudo-rationales, per-task standardisation, and the selection that never reads the held-out task."""
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from sklearn.metrics import roc_auc_score

from learned_attribution.core.metrics.plausibility import mean_example_auroc
from learned_attribution.core.models.features import feature_names
from learned_attribution.core.models.learned import (GatedExpNet, InputPipeline, SimplexStack, Variant,
                                                build_network, build_variant_network,
                                                calibrate_threshold, fit_variant, head_of_columns, score_examples,
                                                select_variant, validation_auroc)
from learned_attribution.core.models.learned.inputs import (ANCHOR_SCALE, anchor_offsets, statistics, within_example_ranks,
                                                       within_example_z)
from learned_attribution.core.models.learned.losses import focal_loss, listwise_ranking_loss, pairwise_ranking_loss
from learned_attribution.core.models.learned.pseudo import pseudo_labels
from learned_attribution.core.models.learned import TrainingSettings
from learned_attribution.core.models.learned.training import group_examples

import synthetic_signals  # tests/models/synthetic_signals.py

PROJECT_ROOT = Path(__file__).resolve().parents[2]
# the columns both pseudo-rationale rules read are among them
COLUMNS = ["cls_to_tok_h0", "cls_to_tok_h1", "tok_to_cls_h0", "tok_to_cls_h1", "axg_h0", "axg_h1", "layer_grad_norm",
           "layer_grad_x_input", "embedding_grad_norm", "embedding_grad_x_input"]
# The training settings these tests were calibrated with: the conftest's `training_settings` at these values.
CALIBRATED = {"hidden": 16, "learning_rate": 1e-3, "batch_size": 64, "max_epochs": 30, "patience": 4, "seeds": 3}
# The paper's ExpNet (SPEC §6) as a variant of the one core, and its training settings (crosstask.expnet).
PAPER = Variant("expnet_paper", feature_sets=("attention",), stopping="token_auroc")
PAPER_TRAINING = {"batch_unit": "tokens", "batch_size": 512, "seeds": 1, "max_epochs": 50, "patience": 5, "hidden": 16}


@pytest.fixture(scope="module")
def settings(training_settings):
    """`settings(**overrides) -> TrainingSettings`: CALIBRATED with overrides."""
    return lambda **overrides: training_settings(**{**CALIBRATED, **overrides})


@pytest.fixture(scope="module")
def fast(settings):
    """A few epochs of the loop, three seeds: what most fits below use."""
    return settings(max_epochs=8, patience=3, batch_size=16, learning_rate=1e-2)


@pytest.fixture(scope="module")
def paper_settings(settings):
    """`paper_settings(**overrides)`: the paper's ExpNet training (PAPER_TRAINING), faster (learning rate 1e-2,
    batches of 128 tokens)."""
    return lambda **overrides: settings(**{**PAPER_TRAINING, "learning_rate": 1e-2, "batch_size": 128, **overrides})


def softplus(x):
    return math.log1p(math.exp(x))


# ----------------------------------------------------------------------------------------------------------------
# The paper's ExpNet: its network, focal loss, training with early stopping, threshold calibration
# ----------------------------------------------------------------------------------------------------------------

def test_the_declared_paper_expnet_is_the_paper_variant_with_its_settings():
    expnet = yaml.safe_load((PROJECT_ROOT / "conf/base/parameters_crosstask.yml").read_text())["crosstask"]["expnet"]
    recipe = {**expnet["variant"], "feature_sets": tuple(expnet["variant"]["feature_sets"])}
    assert Variant(name="expnet_paper", **recipe) == PAPER
    settings = TrainingSettings(**expnet["training"], seed=0)  # every field but the seed is declared
    assert {key: getattr(settings, key) for key in PAPER_TRAINING} == PAPER_TRAINING
    assert (settings.alpha, settings.gamma, settings.learning_rate) == (0.25, 2.0, 1e-3)
    assert not PAPER.shape_free and not PAPER.reads_whole_examples


def test_the_papers_network_shapes_and_backward(settings):
    net = build_variant_network(PAPER, feature_names(12), settings(**PAPER_TRAINING))
    assert isinstance(net, GatedExpNet) and net.gates() is None and net.members == 1
    logits = net(torch.randn(7, 24))
    assert logits.shape == (1, 7)
    focal_loss(logits[0], torch.ones(7)).backward()
    assert net.w1.grad.shape == (1, 24, 16)
    assert sum(p.numel() for p in net.parameters()) == 24 * 16 + 16 + 16 + 1
    assert net.architecture() == {"class": "GatedExpNet", "n_features": 24, "hidden": 16, "head_of_column": None,
                                  "members": 1}
    rebuilt = build_network(net.architecture())
    rebuilt.load_state_dict(net.state_dict())
    x = torch.randn(3, 24)
    torch.testing.assert_close(rebuilt(x), net(x))
    with pytest.raises(ValueError, match="network class 'ExpNet'"):
        build_network({"class": "ExpNet", "n_features": 4, "hidden": 2})


def test_focal_loss_hand_computed():
    # p = sigmoid(0) = 0.5: positive -> -0.25 * 0.5^2 * ln 0.5; negative -> -0.75 * 0.5^2 * ln 0.5.
    loss = focal_loss(torch.zeros(2), torch.tensor([1.0, 0.0]), alpha=0.25, gamma=2.0)
    expected = (0.25 * 0.25 * math.log(2) + 0.75 * 0.25 * math.log(2)) / 2
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    # logit ln 3 -> p = 0.75 for a positive: -alpha (0.25)^2 ln 0.75
    one = focal_loss(torch.tensor([math.log(3)]), torch.tensor([1.0]), alpha=0.4, gamma=2.0)
    assert one.item() == pytest.approx(-0.4 * 0.25 ** 2 * math.log(0.75), rel=1e-6)
    # gamma 0 and alpha 0.5 is half the binary cross-entropy
    logits, targets = torch.tensor([0.3, -1.2, 2.0]), torch.tensor([1.0, 0.0, 0.0])
    bce = torch.nn.functional.binary_cross_entropy_with_logits(logits, targets)
    assert focal_loss(logits, targets, alpha=0.5, gamma=0.0).item() == pytest.approx(0.5 * bce.item(), rel=1e-6)
    per_token = focal_loss(logits, targets, alpha=0.5, gamma=0.0, reduction="none")
    assert per_token.shape == (3,) and per_token.mean().item() == pytest.approx(0.5 * bce.item(), rel=1e-6)


def token_table(x: np.ndarray, y: np.ndarray, prefix: str, task: str = "a", tokens_per_example: int = 10):
    """Attention-feature token rows (the paper's columns for 3 heads) in examples of `tokens_per_example` tokens."""
    frame = pd.DataFrame(x, columns=feature_names(x.shape[1] // 2))
    frame["token_label"] = y
    frame["example_id"] = [f"{prefix}{i // tokens_per_example}" for i in range(len(x))]
    frame["task"] = task
    return frame


def test_the_paper_variant_learns_a_separable_signal_and_stops_early(paper_settings):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2000, 6)).astype(np.float32)
    y = (x[:, 2] > 0.5).astype(np.float32)
    train, val = token_table(x[:1500], y[:1500], "t"), token_table(x[1500:], y[1500:], "v")
    columns = feature_names(3)
    # The paper's ExpNet reads no target classifier's signals: target None.
    training = fit_variant(PAPER, train, val, target=None, stats_tables={}, columns=columns, rho=0.3, settings=paper_settings(max_epochs=30, patience=3))
    assert training.n_members == 1 and training.member_best_epochs == [training.best_epoch]
    assert training.history[training.best_epoch - 1]["val_auroc"] > 0.97
    probabilities = training.predict(x[1500:])
    assert ((probabilities > 0.5) == y[1500:].astype(bool)).mean() > 0.85

    # Early stopping, not the epoch cap (the cap is far away): training ends exactly `patience` epochs after the
    # best one, none of which beat it, and the network kept is the best epoch's (its validation AUROC reproduces).
    stopped = paper_settings(max_epochs=500, patience=3)
    noisy = rng.random(500) < 0.5  # validation labels unrelated to the inputs: no lasting improvement possible
    early = fit_variant(PAPER, train, token_table(x[1500:], noisy.astype(np.float32), "v"), target=None, stats_tables={}, columns=columns, rho=0.3,
                        settings=stopped)
    assert len(early.history) == early.best_epoch + 3 < stopped.max_epochs
    best = early.history[early.best_epoch - 1]["val_auroc"]
    assert all(h["val_auroc"] <= best for h in early.history[early.best_epoch:])
    # the paper's rule is the pooled token AUROC (not the mean per-example one)
    assert roc_auc_score(noisy, early.predict(x[1500:])) == pytest.approx(best, abs=1e-6)


def f1_by_hand(probabilities: np.ndarray, gold: np.ndarray, threshold: float) -> float:
    """Token F1 of ExpNet's rule (SPEC §6): the tokens at or above the threshold, else the first highest one."""
    chosen = probabilities >= threshold
    if not chosen.any():
        chosen[int(np.argmax(probabilities))] = True
    positive = gold >= 0.5
    hits = int((chosen & positive).sum())
    if hits == 0:
        return 0.0
    precision, recall = hits / chosen.sum(), hits / positive.sum()
    return 2 * precision * recall / (precision + recall)


def best_threshold_by_hand(probabilities: list[np.ndarray], gold: list[np.ndarray]) -> tuple[float, list[float]]:
    """The grid 0.05, 0.10, ..., 0.95 searched by hand: (the first threshold of the highest mean per-example F1,
    the mean F1 at every grid point)."""
    grid = [round(0.05 * k, 2) for k in range(1, 20)]
    means = [float(np.mean([f1_by_hand(p, g, t) for p, g in zip(probabilities, gold)])) for t in grid]
    return grid[int(np.argmax(means))], means


def test_the_paper_variants_calibrated_threshold_maximises_its_validation_f1(paper_settings):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(1200, 6)).astype(np.float32)
    y = (x[:, 0] + 0.5 * rng.normal(size=1200) > 0.8).astype(np.float32)
    train, val = token_table(x[:900], y[:900], "t"), token_table(x[900:], y[900:], "v")
    model = fit_variant(PAPER, train, val, target=None, stats_tables={}, columns=feature_names(3), rho=0.3, settings=paper_settings(max_epochs=5))
    scored = score_examples(model, val)  # global statistics: the probabilities the calibration saw
    gold = val.groupby("example_id", sort=False)["token_label"].apply(np.asarray)
    expected, means = best_threshold_by_hand(list(scored["scores"]), [gold[i] for i in scored["example_id"]])
    assert model.calibrated_threshold == expected
    assert max(means) > min(means) + 0.05  # the threshold matters on these scores: the search has teeth
    assert model.threshold == 0.5  # the own rule's threshold is the node's to set (crosstask.expnet.threshold)


def test_calibrated_threshold_maximises_validation_f1():
    # Positives score 0.3, negatives 0.1: every grid threshold in (0.1, 0.3] is perfect, and a tie goes to the
    # lowest: 0.15. At 0.1 or below the negatives join in; above 0.3 the rule falls back to one token (F1 2/3, 1).
    probabilities = [np.array([0.3, 0.3, 0.1, 0.1]), np.array([0.1, 0.3, 0.1])]
    gold = [np.array([1, 1, 0, 0]), np.array([0, 1, 0])]
    assert calibrate_threshold(probabilities, gold) == 0.15
    # An explicit grid: the lowest perfect threshold of it.
    assert calibrate_threshold(probabilities, gold, grid=np.array([0.05, 0.1, 0.2, 0.3, 0.4])) == 0.2
    assert calibrate_threshold(probabilities, gold, grid=np.array([0.5, 0.9])) == 0.5  # both fall back: the first


def test_a_training_task_without_token_rows_stops_the_fold():
    """Incomplete features (e.g. a resumed run that kept a part) must not train a fold on one task silently."""
    from learned_attribution.services.fold_training import training_tokens as _explainer_tokens  # a service

    rows = pd.DataFrame({"task": ["cola"] * 3, "example_id": ["a", "a", "b"], "role": ["rationale_val"] * 3,
                         "correct": [True, True, False], "token_label": [0, 1, 1]})
    assert _explainer_tokens(rows, "rationale_val")["example_id"].tolist() == ["a", "a"]
    with pytest.raises(ValueError, match="cola contributes no rationale_train token rows .* rerun `kedro run "
                                         "--pipeline classifiers`"):
        _explainer_tokens(rows, "rationale_train")


# ----------------------------------------------------------------------------------------------------------------
# Recipes, settings and batches
# ----------------------------------------------------------------------------------------------------------------

def test_variants_and_settings_reject_what_they_cannot_do(settings):
    free = Variant("free", feature_sets=("attention_stats", "layer_gradient", "raw_attention_depths", "position"))
    assert free.shape_free and "shape-free" in free.describe()
    assert not Variant("mixed", feature_sets=("attention_stats", "attention")).shape_free
    with pytest.raises(ValueError, match="gating weighs attention heads"):
        Variant("bad", feature_sets=("attention_stats",), gating=True)
    with pytest.raises(ValueError, match="feature_sets \\['nope'\\] must be a non-empty subset"):
        Variant("bad", feature_sets=("nope",))
    with pytest.raises(ValueError, match="stopping='pooled'"):
        Variant("bad", stopping="pooled")
    with pytest.raises(ValueError, match="batch_unit='sentences'"):
        settings(batch_unit="sentences")
    with pytest.raises(ValueError, match="seeds=0 must be at least 1"):
        settings(seeds=0)
    with pytest.raises(ValueError, match="batch_size=0 must be at least 1"):
        settings(batch_size=0)


def test_group_examples_pads_whole_examples_or_makes_every_token_one():
    ids = np.array(["a", "a", "b", "c", "c", "c"])
    features = np.arange(12, dtype=np.float32).reshape(6, 2)
    labels = np.array([1, 0, 0, 1, 0, 1])
    examples = group_examples(features, labels, ids, np.array(["t"] * 6), None)
    assert len(examples) == 3 and examples.starts.tolist() == [0, 2, 3] and examples.lengths.tolist() == [2, 1, 3]
    x, y, mask, offsets = examples.padded(np.array([2, 0]))
    assert x.shape == (2, 3, 2) and mask.tolist() == [[True, True, True], [True, True, False]]
    assert y.tolist() == [[1, 0, 1], [1, 0, 0]] and offsets.abs().sum() == 0
    torch.testing.assert_close(x[1, :2], torch.as_tensor(features[:2]))
    tokens = group_examples(features, labels, ids, np.array(["t"] * 6), np.arange(6, dtype=np.float32),
                            per_token=True)
    assert len(tokens) == 6 and (tokens.lengths == 1).all()
    assert tokens.padded(np.array([4]))[3].tolist() == [[4.0]]  # the anchor offsets travel with the tokens
    with pytest.raises(ValueError, match="token rows of an example must be contiguous"):
        group_examples(features[:3], labels[:3], np.array(["a", "b", "a"]), np.array(["t"] * 3), None)


# ----------------------------------------------------------------------------------------------------------------
# Ranking losses
# ----------------------------------------------------------------------------------------------------------------

def test_pairwise_loss_hand_computed():
    logits = torch.tensor([[2.0, 0.0, 1.0], [0.5, -0.5, 0.0]])
    labels = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    mask = torch.tensor([[True, True, True], [True, True, False]])
    # example 0: pairs (0,1) and (0,2): mean(softplus(-2), softplus(-1)); example 1: pair (1,0): softplus(1)
    first = (softplus(-2.0) + softplus(-1.0)) / 2
    second = softplus(1.0)
    assert pairwise_ranking_loss(logits, labels, mask).item() == pytest.approx((first + second) / 2, rel=1e-6)
    weighted = pairwise_ranking_loss(logits, labels, mask, torch.tensor([3.0, 1.0])).item()
    assert weighted == pytest.approx((3 * first + second) / 4, rel=1e-6)


def test_pairwise_loss_skips_examples_without_pairs():
    logits = torch.tensor([[1.0, 2.0], [0.0, 3.0]])
    labels = torch.tensor([[1.0, 1.0], [1.0, 0.0]])  # example 0: no negative token
    mask = torch.ones(2, 2, dtype=torch.bool)
    assert pairwise_ranking_loss(logits, labels, mask).item() == pytest.approx(softplus(3.0), rel=1e-6)


def test_pairwise_loss_weighs_soft_labels_by_their_margin():
    logits = torch.tensor([[2.0, 0.0, 1.0]])
    labels = torch.tensor([[1.0, 0.0, 0.5]])  # pairs (0,1) weight 1, (2,1) weight 0.5; 0.5 counts as a rationale
    mask = torch.ones(1, 3, dtype=torch.bool)
    expected = (softplus(-2.0) * 1.0 + softplus(-1.0) * 0.5) / 1.5
    assert pairwise_ranking_loss(logits, labels, mask).item() == pytest.approx(expected, rel=1e-6)


def test_listwise_loss_hand_computed():
    logits = torch.tensor([[0.0, 0.0, 0.0, 0.0], [2.0, 0.0, 1.0, 9.0], [1.0, 2.0, 3.0, 0.0]])
    labels = torch.tensor([[1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 1.0], [1.0, 0.5, 0.0, 0.0]])
    mask = torch.tensor([[True] * 4, [True, True, True, False], [True] * 4])  # example 1's token 3 is padding
    constant = math.log(4)  # constant scores: the softmax is uniform over the 4 tokens
    top = math.log(math.exp(2) + 1 + math.exp(1)) - 2  # only token 0 is a real rationale token
    soft_total = math.log(math.exp(1) + math.exp(2) + math.exp(3) + 1)
    soft = (1.0 * (soft_total - 1) + 0.5 * (soft_total - 2)) / 1.5  # labels 1 and 0.5 -> shares 2/3 and 1/3
    assert listwise_ranking_loss(logits, labels, mask).item() == pytest.approx((constant + top + soft) / 3, rel=1e-6)
    weighted = listwise_ranking_loss(logits, labels, mask, torch.tensor([1.0, 2.0, 1.0])).item()
    assert weighted == pytest.approx((constant + 2 * top + soft) / 4, rel=1e-6)
    # all the softmax mass on the two rationale tokens: the loss falls to log 2; an example without a
    # non-rationale token is skipped
    sharp = torch.tensor([[50.0, 50.0, 0.0, 0.0], [5.0, 5.0, 5.0, 5.0]])
    labels = torch.tensor([[1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    assert listwise_ranking_loss(sharp, labels, torch.ones(2, 4, dtype=torch.bool)).item() == pytest.approx(
        math.log(2), rel=1e-6)


# ----------------------------------------------------------------------------------------------------------------
# Networks
# ----------------------------------------------------------------------------------------------------------------

def test_gates_scale_each_heads_columns():
    net = GatedExpNet(4, 3, head_of_columns(COLUMNS[:4]))
    assert head_of_columns(COLUMNS[:4] + ["relative_position"]) == [0, 1, 0, 1, -1]
    with torch.no_grad():
        net.gate_logits[:] = torch.tensor([100.0, -100.0])  # head 0 open, head 1 shut
    x = torch.randn(5, 4)
    y = net(x)
    x_shut = x.clone()
    x_shut[:, [1, 3]] = 123.0  # head 1's columns no longer matter
    torch.testing.assert_close(net(x_shut), y)


def test_one_member_network_is_expnets_network_and_members_differ():
    torch.manual_seed(5)
    reference = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    torch.manual_seed(5)
    single = GatedExpNet(4, 3)
    x = torch.randn(2, 5, 4)
    torch.testing.assert_close(single(x), reference(x).squeeze(-1)[None])
    three = GatedExpNet(4, 3, members=3)
    out = three(x)
    assert out.shape == (3, 2, 5) and not torch.allclose(out[0], out[1])


def test_simplex_stack_is_a_convex_mix_of_its_inputs():
    stack = SimplexStack(3, members=2)
    with torch.no_grad():
        stack.weight_logits[:] = torch.tensor([[0.0, 0.0, 0.0], [100.0, -100.0, -100.0]])
        stack.bias[:] = torch.tensor([0.5, 0.0])
    weights = stack.weights()
    torch.testing.assert_close(weights.sum(-1), torch.ones(2))
    x = torch.tensor([[0.3, -0.3, 0.0], [-0.5, 0.5, 0.2]])
    scale = stack.log_scale.exp()
    torch.testing.assert_close(stack(x)[0], scale[0] * x.mean(-1) + 0.5)
    torch.testing.assert_close(stack(x)[1], scale[1] * x[:, 0], atol=1e-5, rtol=1e-5)
    assert stack.architecture() == {"class": "SimplexStack", "n_features": 3, "members": 2}


# ----------------------------------------------------------------------------------------------------------------
# The input pipeline
# ----------------------------------------------------------------------------------------------------------------

def test_within_example_z_known_answer():
    values = np.array([[1.0, 5.0], [3.0, 5.0], [7.0, 2.0]], dtype=np.float32)
    out = within_example_z(values, np.array(["a", "a", "b"]))
    np.testing.assert_allclose(out[:2, 0], [-1.0, 1.0], atol=1e-5)  # mean 2, population std 1
    np.testing.assert_allclose(out[:2, 1], [0.0, 0.0], atol=1e-5)  # constant within the example
    np.testing.assert_allclose(out[2], [0.0, 0.0], atol=1e-5)  # a one-token example


def test_within_example_ranks_known_answer():
    ranks = within_example_ranks(np.array([[3.0, 1.0], [1.0, 1.0], [2.0, 1.0], [9.0, 4.0]]),
                                 np.array(["a", "a", "a", "b"]))
    np.testing.assert_allclose(ranks[:3, 0], [0.5, -0.5, 0.0])
    np.testing.assert_allclose(ranks[:, 1], [0.0, 0.0, 0.0, 0.0])  # ties averaged; a one-token example 0


def test_anchor_offsets_known_answer():
    offsets = anchor_offsets(np.array([3.0, 1.0, 2.0, 5.0, 7.0, 7.0]), np.array(["a", "a", "a", "b", "c", "c"]))
    half = ANCHOR_SCALE / 2
    np.testing.assert_allclose(offsets, [half, -half, 0.0, 0.0, 0.0, 0.0])  # one token: centre; ties: averaged


def test_statistics_known_answer():
    mean, std = statistics(np.array([[1.0, 4.0], [3.0, 4.0]]))
    np.testing.assert_allclose(mean, [2.0, 4.0])
    np.testing.assert_allclose(std, [1.0 + 1e-6, 1e-6])  # population std, + 1e-6 so a constant column divides
    assert mean.dtype == std.dtype == np.float32


def test_the_input_pipeline_applies_its_steps_and_round_trips_through_its_config():
    columns = ["axg_h0", "layer_grad_norm", "embedding_grad_x_input"]  # the first and the last are signed
    pipeline = InputPipeline(columns, magnitudes=True, mean=np.array([1, 2, 3], np.float32),
                             std=np.array([2, 4, 8], np.float32))
    raw = np.array([[-2.0, 6.0, -5.0], [4.0, -2.0, 3.0]], np.float32)
    kept = raw.copy()
    inputs, offsets = pipeline.transform(raw)
    np.testing.assert_allclose(inputs, [[0.5, 1.0, 0.25], [1.5, -1.0, 0.0]])  # (|signed| - mean) / std
    assert offsets is None and np.array_equal(raw, kept)  # the caller's array is not changed
    again = InputPipeline.from_config(pipeline.config())
    np.testing.assert_array_equal(again.transform(raw)[0], inputs)
    with pytest.raises(ValueError, match="expected features of shape \\[N, 3\\], got \\[2, 2\\]"):
        pipeline.transform(raw[:, :2])
    with pytest.raises(ValueError, match="used before its statistics were fitted"):
        InputPipeline(columns).transform(raw)

    ids = np.array(["a", "a"])
    anchored = InputPipeline(columns, anchor="layer_grad_norm", example_z=True, mean=np.zeros(3, np.float32),
                             std=np.ones(3, np.float32))
    inputs, offsets = anchored.transform(raw, ids)
    np.testing.assert_allclose(offsets, anchor_offsets(raw[:, 1], ids))
    np.testing.assert_allclose(inputs, within_example_z(raw, ids))
    with pytest.raises(ValueError, match="reads whole examples: pass example_ids"):
        anchored.transform(raw)
    ranked = InputPipeline.for_variant(Variant("stack", network="simplex"), columns)
    assert ranked.ranks and not ranked.standardises
    mean, std = ranked.fitted_statistics(raw, ids)
    assert mean.tolist() == [0.0] * 3 and std.tolist() == [1.0] * 3  # ranks are on one scale already


# ----------------------------------------------------------------------------------------------------------------
# Pseudo-rationales
# ----------------------------------------------------------------------------------------------------------------

def test_pseudo_labels_where_signals_agree():
    # example e, 4 tokens, 1 head: token 0 tops all three signals, token 3 is last in all, token 1 tops only raw
    # attention (1 of 3), token 2 middling. Example f: token 0 tops two signals, token 1 the third, so f has no
    # non-rationale token and is left out whole.
    table = pd.DataFrame({"example_id": ["e"] * 4 + ["f"] * 2, "task": ["c"] * 6, "token_label": [0, 0, 0, 1, 0, 1],
                          "cls_to_tok_h0": [0.9, 0.8, 0.2, 0.1, 0.9, 0.1], "axg_h0": [0.5, -0.1, 0.2, 0.0, 0.5, 0.1],
                          "layer_grad_norm": [3.0, 0.5, 1.0, 0.2, 0.1, 3.0]})
    labels = pseudo_labels(table, rho=0.25)  # k = 1
    # token 0 positive, token 3 negative, the others unlabelled
    np.testing.assert_array_equal(labels, [1.0, np.nan, np.nan, 0.0, np.nan, np.nan])
    # the gold labels are not read
    np.testing.assert_array_equal(pseudo_labels(table.assign(token_label=1 - table["token_label"]), rho=0.25), labels)
    np.testing.assert_array_equal(pseudo_labels(table.drop(columns="token_label"), rho=0.25), labels)


def test_pseudo_labels_agreement_rule_gives_shares():
    # one example of 4 tokens (k = 1): token 0 tops 4 of the 6 signals, token 1 tops the other 2, tokens 2-3
    # top none; token 3 is in the bottom half of every signal, token 2 of only two of them
    table = pd.DataFrame({"example_id": ["e"] * 4, "task": ["c"] * 4,
                          "cls_to_tok_h0": [0.9, 0.8, 0.2, 0.1], "axg_h0": [0.5, -0.1, 0.2, 0.0],
                          "layer_grad_norm": [3.0, 0.5, 1.0, 0.2], "layer_grad_x_input": [-4.0, 1.0, 2.0, 0.5],
                          "embedding_grad_norm": [0.1, 0.9, 0.5, 0.0], "embedding_grad_x_input": [0.2, -0.8, 0.5, 0.1]})
    labels = pseudo_labels(table, rho=0.25, rule="agreement")
    np.testing.assert_allclose(labels, [4 / 6, np.nan, np.nan, 0.0])
    with pytest.raises(ValueError, match="pseudo-rationale rule"):
        pseudo_labels(table, rho=0.25, rule="vote")


# ----------------------------------------------------------------------------------------------------------------
# Training any variant
# ----------------------------------------------------------------------------------------------------------------

def synthetic_task(task: str, n_examples: int, seed: int, **kwargs) -> pd.DataFrame:
    return synthetic_signals.synthetic_task(task, n_examples, seed, COLUMNS, **kwargs)


def task_parts(task, seed):
    """A training task as the fold nodes give it: `val` = correctly predicted validation examples, `val_all` =
    those and mispredicted ones (here: the informative signal points away from the rationale)."""
    train = synthetic_task(task, 60, seed)
    val = synthetic_task(task, 30, seed + 100, shift=seed)
    val["example_id"] = val["example_id"] + "v"
    mispredicted = synthetic_task(task, 10, seed + 200, shift=seed, flip=True)
    mispredicted["example_id"] = mispredicted["example_id"] + "m"
    val_all = pd.concat([val, mispredicted], ignore_index=True)
    return {"train": train, "val": val, "val_all": val_all,
            "unlabeled": pd.concat([train, val_all]).drop(columns="token_label")}


def test_fit_learns_a_transferable_signal(fast):
    a, b = task_parts("a", 1), task_parts("b", 2)
    variant = Variant("x", standardise="per_task", objective="focal+pairwise")
    model = fit_variant(variant, a["train"], a["val"], target=b["unlabeled"], stats_tables={"a": a["unlabeled"], "b": b["unlabeled"]},
                        columns=COLUMNS, rho=0.3, settings=fast)
    assert validation_auroc(model, b["val"]) > 0.75
    # The threshold is calibrated on the training tasks' validation rows, standardised with their own task's
    # statistics (per-task): the best of the grid by hand on the probabilities the network gives them.
    a_statistics = model.inputs.fitted_statistics(a["unlabeled"][COLUMNS].to_numpy(np.float32),
                                                  a["unlabeled"]["example_id"].to_numpy())
    inputs, _ = model.inputs.transform(a["val"][COLUMNS].to_numpy(np.float32), None, *a_statistics)
    probabilities = model.network_probabilities(torch.as_tensor(inputs), 0.0)
    groups = a["val"].groupby("example_id", sort=False).indices
    expected, _ = best_threshold_by_hand([probabilities[i] for i in groups.values()],
                                         [a["val"]["token_label"].to_numpy()[i] for i in groups.values()])
    assert model.calibrated_threshold == expected
    assert model.columns == COLUMNS and model.inputs.columns == COLUMNS


def test_a_variant_that_reads_the_target_needs_it(fast):
    a = task_parts("a", 1)
    for variant in (Variant("z", standardise="per_task"), Variant("st", self_training=True)):
        with pytest.raises(ValueError, match="reads the target classifier's unlabeled signals: pass target"):
            fit_variant(variant, a["train"], a["val"], target=None, stats_tables={"a": a["unlabeled"]}, columns=COLUMNS, rho=0.3, settings=fast)
    # a per-task simplex stack standardises nothing, so it reads no target either
    assert not InputPipeline.for_variant(Variant("stack", network="simplex"), COLUMNS).standardises


def test_per_task_standardisation_saves_the_targets_statistics_and_global_the_training_tokens(settings):
    a, b = task_parts("a", 1), task_parts("b", 2)
    stats = {"a": a["unlabeled"], "b": b["unlabeled"]}
    settings = settings(max_epochs=1, patience=1, batch_size=16, seeds=1)
    per_task = fit_variant(Variant("z", standardise="per_task"), a["train"], a["val"], target=b["unlabeled"], stats_tables=stats, columns=COLUMNS,
                           rho=0.3, settings=settings)
    target = b["unlabeled"][COLUMNS].to_numpy(np.float64)  # the target's unlabeled tokens, not its labelled ones
    np.testing.assert_allclose(per_task.inputs.mean, target.mean(0), rtol=1e-5)
    np.testing.assert_allclose(per_task.inputs.std, target.std(0) + 1e-6, rtol=1e-5)
    shared = fit_variant(Variant("g"), a["train"], a["val"], target=b["unlabeled"], stats_tables=stats, columns=COLUMNS, rho=0.3, settings=settings)
    training = a["train"][COLUMNS].to_numpy(np.float64)
    np.testing.assert_allclose(shared.inputs.mean, training.mean(0), rtol=1e-5)
    np.testing.assert_allclose(shared.inputs.std, training.std(0) + 1e-6, rtol=1e-5)


def test_per_task_standardisation_adapts_to_the_targets_scale_without_its_labels(fast):
    """Each task's rows are z-scored with that task's own statistics: a target whose signals are an affine
    rescaling of another's gets the same trained weights and the same token scores; global standardisation does
    not (it applies the training tokens' statistics to any target)."""
    a, b = task_parts("a", 1), task_parts("b", 2)
    rescaled = {part: table.copy() for part, table in b.items()}
    for table in rescaled.values():
        table[COLUMNS] = table[COLUMNS] * 4.0 - 3.0
    scores = {}
    for name, variant in (("per_task", Variant("z", standardise="per_task", objective="pairwise")),
                          ("global", Variant("g", objective="pairwise"))):
        fits = [fit_variant(variant, a["train"], a["val"], target=target["unlabeled"],
                            stats_tables={"a": a["unlabeled"], "b": target["unlabeled"]}, columns=COLUMNS, rho=0.3, settings=fast)
                for target in (b, rescaled)]
        for key, value in fits[0].net.state_dict().items():
            torch.testing.assert_close(value, fits[1].net.state_dict()[key])  # the target never changes training
        scores[name] = [fit.predict(target["val"][COLUMNS].to_numpy(np.float32))
                        for fit, target in zip(fits, (b, rescaled))]
    np.testing.assert_allclose(scores["per_task"][0], scores["per_task"][1], rtol=1e-4, atol=1e-6)
    assert not np.allclose(scores["global"][0], scores["global"][1], rtol=1e-2, atol=1e-3)


def test_held_out_labels_never_change_training(fast):
    """Poisoning the held-out task's rationales (inverting every token label) changes no trained weight: fitting
    for the held-out classifier reads its signals, never its labels (self-training included). The selection cannot
    read the held-out task's signals or labels (`select_variant` takes the training tasks only; the node's inputs
    are `test_the_selection_node_has_no_held_out_input`)."""
    tasks = {"a": task_parts("a", 1), "b": task_parts("b", 2)}
    variants = [PAPER, Variant("paper", standardise="global"), Variant("task_z", standardise="per_task"),
                Variant("ranking_st", standardise="per_task", objective="pairwise", self_training=True),
                Variant("anchored_st", standardise="per_task", objective="pairwise", self_training=True,
                        anchor="layer_grad_norm", anchor_weight=0.5),
                Variant("stack_agreement", objective="pairwise", network="simplex", self_training=True,
                        pseudo="agreement"),
                Variant("stack_listwise", objective="listwise", network="simplex", self_training=True,
                        pseudo="agreement")]
    held_out = synthetic_task("c", 40, 3)
    poisoned = held_out.assign(token_label=1 - held_out["token_label"])
    train = pd.concat([tasks["a"]["train"], tasks["b"]["train"]])
    val = pd.concat([tasks["a"]["val"], tasks["b"]["val"]])
    outcomes = []
    for target in (held_out, poisoned):
        stats = {"a": tasks["a"]["unlabeled"], "b": tasks["b"]["unlabeled"], "c": target}
        outcomes.append([fit_variant(v, train, val, target=target, stats_tables=stats, columns=COLUMNS, rho=0.3, settings=fast) for v in variants])
    models, models_poisoned = outcomes
    for model, twin in zip(models, models_poisoned):
        for key, value in model.net.state_dict().items():
            torch.testing.assert_close(value, twin.net.state_dict()[key])
        np.testing.assert_array_equal(model.inputs.mean, twin.inputs.mean)
        np.testing.assert_array_equal(model.inputs.std, twin.inputs.std)
    assert models[3].n_pseudo_examples > 0 and models[5].n_pseudo_examples > 0  # self-training used the held-out signals
    # and self-training did change what was learned (the held-out signals were read, so the check above can fail)
    plain = fit_variant(Variant("ranking", standardise="per_task", objective="pairwise"), train, val, target=held_out,
                        stats_tables={"a": tasks["a"]["unlabeled"], "b": tasks["b"]["unlabeled"], "c": held_out}, columns=COLUMNS, rho=0.3,
                        settings=fast)
    assert not torch.equal(plain.net.state_dict()["w1"], models[3].net.state_dict()["w1"])


def test_the_selection_node_has_no_held_out_input():
    from learned_attribution.core.tasks import TASKS
    from learned_attribution.pipelines.ablation import create_pipeline  # the pipeline's wiring

    candidates = create_pipeline(TASKS)
    for task in TASKS:
        (node,) = [n for n in candidates.nodes if n.name == f"ablation_{task}.select_expnet_plus"]
        assert not [i for i in node.inputs if i.startswith(f"{task}.")], node.inputs
        assert {f"{t}.explainer_signals" for t in TASKS if t != task} <= set(node.inputs)


def test_an_anchor_alone_ranks_like_its_signal_and_a_residual_is_trained_on_top(fast):
    a, b = task_parts("a", 1), task_parts("b", 2)
    stats = {"a": a["unlabeled"], "b": b["unlabeled"]}
    gold = [g["token_label"].to_numpy() for _, g in b["val"].groupby("example_id", sort=False)]
    anchor_auroc = mean_example_auroc([g[COLUMNS[0]].to_numpy() for _, g in b["val"].groupby("example_id", sort=False)],
                                      gold)
    alone = fit_variant(Variant("anchor", anchor=COLUMNS[0], anchor_weight=0.0), a["train"], a["val"], target=b["unlabeled"],
                        stats_tables=stats, columns=COLUMNS, rho=0.3, settings=fast)
    assert alone.history == [] and validation_auroc(alone, b["val"]) == pytest.approx(anchor_auroc, abs=1e-12)
    residual = fit_variant(Variant("anchored", standardise="per_task", objective="pairwise", anchor=COLUMNS[0]),
                           a["train"], a["val"], target=b["unlabeled"], stats_tables=stats, columns=COLUMNS, rho=0.3, settings=fast)
    assert residual.history and validation_auroc(residual, b["val"]) > 0.75
    with pytest.raises(ValueError, match="anchor 'afn_norm_l0' is not among its input columns"):
        fit_variant(Variant("bad", anchor="afn_norm_l0"), a["train"], a["val"], target=b["unlabeled"], stats_tables=stats, columns=COLUMNS, rho=0.3,
                    settings=fast)
    with pytest.raises(ValueError, match="anchor_weight needs an anchor column"):
        Variant("bad", anchor_weight=0.5)


def test_seeds_train_side_by_side_and_the_selection_reads_their_mean(fast):
    a, b = task_parts("a", 1), task_parts("b", 2)
    stats = {"a": a["unlabeled"], "b": b["unlabeled"]}
    variant = Variant("x", standardise="per_task", objective="pairwise")
    model = fit_variant(variant, a["train"], a["val"], target=b["unlabeled"], stats_tables=stats, columns=COLUMNS, rho=0.3, settings=fast)
    assert model.n_members == 3 and len(model.member_val_scores) == 3 and len(model.member_best_epochs) == 3
    # each member keeps its own best epoch: its recorded validation AUROC is its best in the history, the mean
    # per-example AUROC (this variant's stopping rule) of the member's kept network on a's validation rows, which
    # training standardised with a's own statistics (the saved pipeline holds the target b's)
    a_statistics = model.inputs.fitted_statistics(a["unlabeled"][COLUMNS].to_numpy(np.float32),
                                                  a["unlabeled"]["example_id"].to_numpy())
    a_inputs, _ = model.inputs.transform(a["val"][COLUMNS].to_numpy(np.float32), None, *a_statistics)
    groups = a["val"].groupby("example_id", sort=False).indices
    for member, best in enumerate(model.member_val_scores):
        history = [row["member_val_auroc"][member] for row in model.history]
        assert best == pytest.approx(max(history)) and model.member_best_epochs[member] == 1 + int(np.argmax(history))
        kept = model.network_probabilities(torch.as_tensor(a_inputs), 0.0, member)
        assert mean_example_auroc([kept[i] for i in groups.values()],
                                  [a["val"]["token_label"].to_numpy()[i] for i in groups.values()]) == pytest.approx(
            best, abs=1e-6)
    x = a["val"][COLUMNS].to_numpy(np.float32)
    members = [model.predict(x, member=m) for m in range(3)]
    assert not np.allclose(members[0], members[1])
    logits = np.stack([np.log(p / (1 - p)) for p in members])
    np.testing.assert_allclose(model.predict(x), 1 / (1 + np.exp(-logits.mean(0))), rtol=1e-4, atol=1e-6)
    selection = select_variant([variant], {"a": a, "b": b}, {"x": COLUMNS}, 0.3, fast)
    twin = fit_variant(variant, b["train"], b["val"], target=a["unlabeled"], stats_tables=stats, columns=COLUMNS, rho=0.3, settings=fast)
    # the selection scores every validation example with a rationale (mispredicted ones too), as the test set is
    per_seed = [validation_auroc(twin, a["val_all"], m) for m in range(3)]
    assert validation_auroc(twin, a["val_all"]) < validation_auroc(twin, a["val"]) - 0.02
    row = selection.set_index("direction").loc["b->a"]
    assert row["val_auroc"] == pytest.approx(np.mean(per_seed)) and row["val_auroc_seed_sd"] == pytest.approx(np.std(per_seed))


def test_the_selection_leaves_out_each_of_any_number_of_training_tasks_and_ties_go_to_the_earlier_variant(settings):
    tasks = {task: task_parts(task, seed) for task, seed in (("a", 1), ("b", 2), ("c", 3))}
    settings = settings(max_epochs=3, patience=2, batch_size=16, learning_rate=1e-2, seeds=1)
    first = Variant("first", standardise="per_task", objective="pairwise")
    same = Variant("same_recipe", standardise="per_task", objective="pairwise")
    selection = select_variant([first, same], tasks, {"first": COLUMNS, "same_recipe": COLUMNS}, 0.3, settings)
    directions = set(selection.loc[selection["variant"] == "first", "direction"])
    assert directions == {"b+c->a", "a+c->b", "a+b->c", "mean"}
    means = selection[selection["direction"] == "mean"].set_index("variant")
    assert means.at["first", "val_auroc"] == means.at["same_recipe", "val_auroc"]  # the same recipe, the same scores
    assert means["rank"].to_dict() == {"first": 1, "same_recipe": 2}
    assert set(selection.loc[selection["selected"], "variant"]) == {"first"}
    # the mean row is the mean over the left-out directions
    rows = selection[(selection["variant"] == "first") & (selection["direction"] != "mean")]
    assert means.at["first", "val_auroc"] == pytest.approx(rows["val_auroc"].mean())
    with pytest.raises(ValueError, match="needs at least two training tasks"):
        select_variant([first], {"a": tasks["a"]}, {"first": COLUMNS}, 0.3, settings)


@pytest.mark.parametrize("objective", ["pairwise", "listwise"])
def test_a_simplex_stack_learns_which_signal_carries_the_rationale(objective, settings):
    a, b = task_parts("a", 1), task_parts("b", 2)
    settings = settings(max_epochs=20, patience=5, batch_size=16, learning_rate=0.1)  # 10 weights
    stack = fit_variant(Variant("stack", objective=objective, network="simplex"), a["train"], a["val"],
                        target=b["unlabeled"], stats_tables={"a": a["unlabeled"], "b": b["unlabeled"]}, columns=COLUMNS, rho=0.3, settings=settings)
    weights = stack.stack_weights()
    assert max(weights, key=weights.get) == COLUMNS[0] and sum(weights.values()) == pytest.approx(1.0)
    assert weights[COLUMNS[0]] > 2 / len(COLUMNS)  # twice the uniform weight it started from
    ids = b["val"]["example_id"].to_numpy()
    uniform = within_example_ranks(b["val"][COLUMNS].to_numpy(), ids).mean(1)  # the untrained (uniform) stack
    groups = b["val"].assign(uniform=uniform).groupby("example_id", sort=False)
    uniform_auroc = mean_example_auroc([g["uniform"].to_numpy() for _, g in groups],
                                       [g["token_label"].to_numpy() for _, g in groups])
    assert validation_auroc(stack, b["val"]) > uniform_auroc + 0.05
    with pytest.raises(ValueError, match="simplex stack rank-normalises"):
        Variant("bad", network="simplex", standardise="per_task")


def signed_evidence_task(task: str, n_examples: int, seed: int, sign: float) -> pd.DataFrame:
    """Token rows where only attention x gradient (head 0) carries the rationale, with the given sign: -1 is what a
    mispredicted example looks like (the gradient of the predicted class points away from the true evidence)."""
    rng = np.random.default_rng(seed)
    rows = []
    for e in range(n_examples):
        labels = np.zeros(6, dtype=int)
        labels[rng.choice(6, size=2, replace=False)] = 1
        values = rng.normal(scale=0.5, size=(6, len(COLUMNS)))
        values[:, COLUMNS.index("axg_h0")] += sign * 3.0 * labels
        rows += [{"example_id": f"{task}-{e}", "task": task, "token_label": labels[j], **dict(zip(COLUMNS, values[j]))}
                 for j in range(6)]
    return pd.DataFrame(rows)


def test_magnitude_inputs_survive_the_sign_flip_of_a_misprediction(fast):
    train, val = signed_evidence_task("a", 60, 1, +1.0), signed_evidence_task("a", 30, 2, +1.0)
    mispredicted = signed_evidence_task("c", 40, 3, -1.0)
    stats = {"a": train.drop(columns="token_label"), "c": mispredicted.drop(columns="token_label")}
    signed, magnitude = (fit_variant(Variant(name, objective="pairwise", signs=name), train, val, target=mispredicted, stats_tables=stats,
                                     columns=COLUMNS, rho=0.3, settings=fast) for name in ("signed", "magnitude"))
    assert validation_auroc(signed, val) > 0.95 and validation_auroc(magnitude, val) > 0.95
    assert validation_auroc(signed, mispredicted) < 0.1  # the signed network ranks the rationale last
    assert validation_auroc(magnitude, mispredicted) > 0.95
    x = mispredicted[COLUMNS].to_numpy(np.float32)
    signed_index = [COLUMNS.index(c) for c in ("axg_h0", "axg_h1", "layer_grad_x_input", "embedding_grad_x_input")]
    absolute = x.copy()
    absolute[:, signed_index] = np.abs(x[:, signed_index])
    np.testing.assert_array_equal(magnitude.predict(x), magnitude.predict(absolute))
    assert not np.array_equal(signed.predict(x), signed.predict(absolute))
    with pytest.raises(ValueError, match="signs='sign'"):
        Variant("bad", signs="sign")


def test_a_variants_own_learning_rate_replaces_the_shared_one(fast):
    from dataclasses import replace

    a, b = task_parts("a", 1), task_parts("b", 2)
    stats = {"a": a["unlabeled"], "b": b["unlabeled"]}

    def fit(variant, settings):
        return fit_variant(variant, a["train"], a["val"], target=b["unlabeled"], stats_tables=stats, columns=COLUMNS, rho=0.3, settings=settings).net.state_dict()

    stack = Variant("stack", objective="pairwise", network="simplex")
    own = fit(replace(stack, learning_rate=0.1), fast)  # fast's shared rate is 1e-2
    shared = fit(stack, replace(fast, learning_rate=0.1))
    default = fit(stack, fast)
    for key, value in own.items():
        torch.testing.assert_close(value, shared[key])
    assert not torch.equal(own["weight_logits"], default["weight_logits"])
    with pytest.raises(ValueError, match="learning_rate=0 must be positive"):
        Variant("bad", learning_rate=0)
