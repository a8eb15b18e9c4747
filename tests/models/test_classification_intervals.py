"""The classifiers' metric intervals: each resample's metrics equal sklearn's on the same resample, and the
intervals hold the point estimate and narrow with more examples."""
import numpy as np
import pytest
from sklearn.metrics import accuracy_score, confusion_matrix, f1_score, matthews_corrcoef

from learned_attribution.core.models.classifier import classification_intervals, confusion_metrics


@pytest.mark.parametrize("classes", [2, 3])
def test_confusion_metrics_equal_sklearn_on_resamples(classes):
    rng = np.random.default_rng(classes)
    labels = rng.integers(0, classes, 60)
    predictions = np.where(rng.random(60) < 0.7, labels, rng.integers(0, classes, 60))
    for _ in range(50):
        picks = rng.integers(0, 60, 15)  # small resamples: some lose a class entirely
        y, p = labels[picks], predictions[picks]
        confusion = confusion_matrix(y, p, labels=list(range(classes)))
        ours = confusion_metrics(confusion)
        assert ours["accuracy"] == pytest.approx(accuracy_score(y, p))
        assert ours["macro_f1"] == pytest.approx(f1_score(y, p, average="macro", zero_division=0))
        assert ours["mcc"] == pytest.approx(matthews_corrcoef(y, p))


def test_constant_predictions_have_zero_mcc_and_known_accuracy():
    metrics = confusion_metrics(np.array([[3, 0], [1, 0]]))
    assert metrics["accuracy"] == pytest.approx(0.75)
    assert metrics["mcc"] == 0.0
    assert metrics["macro_f1"] == pytest.approx((6 / 7 + 0) / 2)


def test_intervals_hold_the_estimate_narrow_with_data_and_repeat_for_a_seed():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 2000)
    predictions = np.where(rng.random(2000) < 0.8, labels, 1 - labels)
    small = classification_intervals(labels[:200], predictions[:200], n_boot=400)
    large = classification_intervals(labels, predictions, n_boot=400)
    assert large == classification_intervals(labels, predictions, n_boot=400)
    accuracy = accuracy_score(labels, predictions)
    assert large["accuracy_low"] < accuracy < large["accuracy_high"]
    assert large["mcc_low"] < matthews_corrcoef(labels, predictions) < large["mcc_high"]
    for metric in ("accuracy", "macro_f1", "mcc"):
        assert large[f"{metric}_high"] - large[f"{metric}_low"] < small[f"{metric}_high"] - small[f"{metric}_low"]
    # the binomial standard error of 0.8 over 2,000 examples is about 0.009: a 95% interval about 0.035 wide
    assert large["accuracy_high"] - large["accuracy_low"] == pytest.approx(0.035, abs=0.008)


def test_no_examples_give_nan_and_mismatched_lengths_are_refused():
    assert all(np.isnan(v) for v in classification_intervals([], []).values())
    with pytest.raises(ValueError, match="differ in length"):
        classification_intervals([0, 1], [0])
