"""The numpy AUROC and average precision used per example agree with sklearn's, ties included."""
import numpy as np
import pytest
from sklearn.metrics import average_precision_score, roc_auc_score

from learned_attribution.metrics.plausibility import auroc_score, average_precision


@pytest.mark.parametrize("seed", range(40))
def test_match_sklearn_on_random_examples_with_ties(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 40))
    gold = rng.integers(0, 2, n)
    gold[0], gold[-1] = 0, 1  # both classes present
    scores = rng.integers(0, 5, n).astype(float) if seed % 2 else rng.normal(size=n)  # ties on odd seeds
    assert auroc_score(gold, scores) == pytest.approx(roc_auc_score(gold, scores))
    assert average_precision(gold, scores) == pytest.approx(average_precision_score(gold, scores))


def test_known_answers():
    gold = np.array([1, 0, 1, 0])
    assert auroc_score(gold, np.array([4.0, 3, 2, 1])) == pytest.approx(0.75)
    # ranking 1,0,1,0: precision 1 at recall 0.5, 2/3 at recall 1 -> AP = 0.5 * 1 + 0.5 * 2/3
    assert average_precision(gold, np.array([4.0, 3, 2, 1])) == pytest.approx(0.5 + 1 / 3)
    assert auroc_score(gold, np.zeros(4)) == 0.5
    assert average_precision(gold, np.zeros(4)) == 0.5  # constant scores: the density
