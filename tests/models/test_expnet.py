"""ExpNet module, focal loss against hand-computed values, training and threshold calibration."""
import math

import numpy as np
import pytest
import torch

from learned_attribution.models.expnet import ExpNet, ExpNetConfig, calibrate_threshold, focal_loss, train_expnet


def test_expnet_shapes_and_backward():
    net = ExpNet(n_features=24, hidden=16)
    x = torch.randn(7, 24)
    logits = net(x)
    assert logits.shape == (7,)
    focal_loss(logits, torch.ones(7)).backward()
    assert net.layers[0].weight.grad.shape == (16, 24)
    assert sum(p.numel() for p in net.parameters()) == 24 * 16 + 16 + 16 + 1


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


def test_training_learns_a_separable_signal_and_stops_early():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2000, 6)).astype(np.float32)
    y = (x[:, 2] > 0.5).astype(np.float32)
    training = train_expnet(x[:1500], y[:1500], x[1500:], y[1500:],
                            ExpNetConfig(max_epochs=30, patience=3, learning_rate=1e-2, batch_size=128))
    assert training.history[training.best_epoch - 1]["val_auroc"] > 0.97
    probabilities = training.predict(x[1500:])
    assert ((probabilities > 0.5) == y[1500:].astype(bool)).mean() > 0.85

    # Early stopping, not the epoch cap (the cap is far away): training ends exactly `patience` epochs after the
    # best one, none of which beat it, and the network kept is the best epoch's (its validation AUROC reproduces).
    stopped = ExpNetConfig(max_epochs=500, patience=3, learning_rate=1e-2, batch_size=128)
    noisy = rng.random(500) < 0.5  # validation labels unrelated to the inputs: no lasting improvement possible
    early = train_expnet(x[:1500], y[:1500], x[1500:], noisy.astype(np.float32), stopped)
    assert len(early.history) == early.best_epoch + 3 < stopped.max_epochs
    best = early.history[early.best_epoch - 1]["val_auroc"]
    assert all(h["val_auroc"] <= best for h in early.history[early.best_epoch:])
    from sklearn.metrics import roc_auc_score

    assert roc_auc_score(noisy, early.predict(x[1500:])) == pytest.approx(best, abs=1e-6)


def test_calibrated_threshold_maximises_validation_f1():
    # Positives score 0.3, negatives 0.1: any threshold in (0.1, 0.3] is perfect; 0.5 would fall back to one token.
    probabilities = [np.array([0.3, 0.3, 0.1, 0.1]), np.array([0.1, 0.3, 0.1])]
    gold = [np.array([1, 1, 0, 0]), np.array([0, 1, 0])]
    threshold = calibrate_threshold(probabilities, gold)
    assert 0.1 < threshold <= 0.3


def test_a_training_task_without_token_rows_stops_the_fold():
    """Incomplete features (e.g. a resumed run that kept a part) must not train a fold on one task silently."""
    import pandas as pd

    from learned_attribution.pipelines.crosstask.nodes import _explainer_tokens

    rows = pd.DataFrame({"task": ["cola"] * 3, "example_id": ["a", "a", "b"], "role": ["rationale_val"] * 3,
                         "correct": [True, True, False], "token_label": [0, 1, 1]})
    assert _explainer_tokens(rows, "rationale_val")["example_id"].tolist() == ["a", "a"]
    with pytest.raises(ValueError, match="cola contributes no rationale_train token rows .* rerun `kedro run "
                                         "--pipeline classifiers`"):
        _explainer_tokens(rows, "rationale_train")
