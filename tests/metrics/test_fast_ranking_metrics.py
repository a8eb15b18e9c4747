"""The numpy AUROC and average precision used per example agree with sklearn's, ties included; so do the
vectorised per-group AUROC (`example_aurocs`) the metrics, the learned explainers' early stopping and the selection
read, and the per-group average precision (`example_auprcs`); scoring subsets of one evaluation equals evaluating
each subset alone."""
import numpy as np
import pytest
from sklearn.metrics import average_precision_score, roc_auc_score

from learned_attribution.core.metrics.plausibility import (auroc_score, average_precision, evaluate, evaluate_subsets,
                                                           example_auprcs, example_aurocs, mean_example_auroc,
                                                           top_k_mask)


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


@pytest.mark.parametrize("seed", range(10))
def test_example_aurocs_equal_sklearn_per_group_ties_included_and_nan_without_both_classes(seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 12, size=8)
    groups = np.repeat([f"e{k}" for k in rng.permutation(len(sizes))], sizes)  # ids not in sorted order
    scores = rng.integers(0, 4, size=len(groups)).astype(float)  # many ties
    gold = rng.integers(0, 2, size=len(groups))
    aurocs = example_aurocs(scores, gold, groups)
    names = np.unique(groups)  # one value per distinct group, in sorted group order
    assert aurocs.shape == (len(names),)
    for name, value in zip(names, aurocs):
        rows = groups == name
        if len(np.unique(gold[rows])) == 2:
            assert value == pytest.approx(roc_auc_score(gold[rows], scores[rows]), abs=1e-12)
        else:
            assert np.isnan(value)
    # one group for every token: the pooled token AUROC
    assert example_aurocs(scores, gold, np.zeros(len(gold)))[0] == pytest.approx(roc_auc_score(gold, scores))


def test_example_aurocs_known_answers():
    scores = np.array([4.0, 3, 2, 1, 1.0, 1.0, 5.0, 0.5, 2.0, 2.0, 2.0])
    gold = np.array([1, 0, 1, 0, 1, 0, 1, 1, 0, 0, 0])
    groups = np.array([0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 3])
    aurocs = example_aurocs(scores, gold, groups)
    # 0.75 as above; a tie between the two classes is half a pair; only rationale tokens / none: NaN
    np.testing.assert_array_equal(aurocs, [0.75, 0.5, np.nan, np.nan])
    # soft labels count as rationale tokens above 0.5
    np.testing.assert_array_equal(example_aurocs(scores[:4], [0.9, 0.2, 0.6, 0.5], groups[:4]), [0.75])
    assert mean_example_auroc([scores[:4], scores[4:6], scores[6:8]], [gold[:4], gold[4:6], gold[6:8]]) == 0.625
    assert np.isnan(mean_example_auroc([scores[6:8]], [gold[6:8]])) and np.isnan(mean_example_auroc([], []))


@pytest.mark.parametrize("seed", range(10))
def test_example_auprcs_equal_sklearn_per_group_ties_included_and_nan_without_both_classes(seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 12, size=8)
    groups = np.repeat([f"e{k}" for k in rng.permutation(len(sizes))], sizes)
    scores = rng.integers(0, 4, size=len(groups)).astype(float) if seed % 2 else rng.normal(size=len(groups))
    gold = rng.integers(0, 2, size=len(groups))
    auprcs = example_auprcs(scores, gold, groups)
    for name, value in zip(np.unique(groups), auprcs):
        rows = groups == name
        if len(np.unique(gold[rows])) == 2:
            assert value == pytest.approx(average_precision_score(gold[rows], scores[rows]), abs=1e-12)
        else:
            assert np.isnan(value)


def test_example_auprcs_known_answers():
    # 1,0,1,0 ranked: 0.5 * 1 + 0.5 * 2/3; a tie of both classes: the density; one class only: NaN
    auprcs = example_auprcs([4.0, 3, 2, 1, 1, 1, 7, 8], [1, 0, 1, 0, 1, 0, 1, 1], [0, 0, 0, 0, 1, 1, 2, 2])
    np.testing.assert_allclose(auprcs, [0.5 + 1 / 3, 0.5, np.nan])


def test_subsets_of_one_evaluation_equal_each_subset_evaluated_alone():
    rng = np.random.default_rng(3)
    gold = [np.r_[1, rng.integers(0, 2, size=int(n))] for n in rng.integers(0, 9, size=12)]
    scores = [np.where(rng.random(len(g)) < 0.1, np.nan, rng.normal(size=len(g))) for g in gold]
    masks = [top_k_mask(s, 2) for s in scores]
    subsets = {"all": range(12), "odd": [1, 3, 5, 7, 9, 11], "three": [2, 0, 8], "none": []}
    together = evaluate_subsets(scores, gold, masks, subsets)
    assert set(together) == {"all", "odd", "three"}
    for name in together:
        alone = evaluate([scores[i] for i in subsets[name]], [gold[i] for i in subsets[name]],
                         [masks[i] for i in subsets[name]])
        assert together[name].summary() == pytest.approx(alone.summary(), nan_ok=True)
        columns = [c for c in alone.per_example.columns if c != "example"]
        np.testing.assert_allclose(together[name].per_example[columns].to_numpy(float),
                                   alone.per_example[columns].to_numpy(float))
