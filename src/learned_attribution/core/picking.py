"""Which k of n examples to annotate: the most typical example of each of k clusters (`cluster_picks`, the rule
`learned-attribution suggest` uses), and a greedy pick that trades how informative an example is against how far it
is from the examples already picked (`weighted_farthest_first`, the rule it measured better than:
benchmarks/suggestion_rules.py). Numpy and scikit-learn's k-means; the features are the caller's
(`services/fewshot/suggest.py`: the classifier's [CLS] representation)."""
from __future__ import annotations

import numpy as np


def weighted_farthest_first(features: np.ndarray, informativeness: np.ndarray, k: int) -> list[int]:
    """The indices of k rows of `features` [n, d], in the order picked: first the most informative row (ties: the
    one nearest the mean of all rows, the most typical), then, k - 1 times, the row maximising informativeness x
    its Euclidean distance to the nearest row already picked (ties: the larger distance, then the more informative,
    then the earlier row). With equal informativeness this is farthest-first traversal (greedy k-center, Gonzalez
    1985) from the most typical row; a row identical to one picked has distance 0 and comes last. Deterministic:
    no randomness. `informativeness` must be finite and at least 0."""
    features = np.asarray(features, dtype=np.float64)
    weights = np.asarray(informativeness, dtype=np.float64)
    if features.ndim != 2 or weights.shape != (len(features),):
        raise ValueError(f"features {features.shape} and informativeness {weights.shape}: expected [n, d] and [n]")
    if not np.isfinite(weights).all() or (weights < 0).any():
        raise ValueError("informativeness must be finite and at least 0")
    if not 0 <= k <= len(features):
        raise ValueError(f"k={k}: must be between 0 and the number of examples, {len(features)}")
    if k == 0:
        return []
    order = np.arange(len(features))
    centre = np.linalg.norm(features - features.mean(axis=0), axis=1)
    # np.lexsort sorts by the last key first; the best row is the last after sorting by (-index, ..., primary key)
    first = int(np.lexsort((-order, -centre, weights))[-1])
    picked = [first]
    distance = np.linalg.norm(features - features[first], axis=1)  # to the nearest picked row
    available = np.ones(len(features), dtype=bool)
    available[first] = False
    for _ in range(k - 1):
        candidates = order[available]
        gain = weights[candidates] * distance[candidates]
        best = int(candidates[np.lexsort((-candidates, weights[candidates], distance[candidates], gain))[-1]])
        picked.append(best)
        available[best] = False
        distance = np.minimum(distance, np.linalg.norm(features - features[best], axis=1))
    return picked


def cluster_picks(features: np.ndarray, k: int, seed: int, pick: str = "typical") -> list[int]:
    """One row from each of k k-means clusters of `features` [n, d] (k-means++ seeded by `seed`), the clusters in
    order of size (largest first, ties: the lower cluster label). `pick="typical"` takes the cluster's most typical
    row, the one with the smallest mean distance to its nearest (up to 20) neighbours in the cluster (TypiClust,
    Hacohen et al., ICML 2022: at low budgets typical and diverse rows teach more than the outliers farthest-first
    favours), ties to the earlier row; `pick="random"` a seeded uniform row of the cluster (stratified sampling).
    Where k-means finds fewer than k distinct clusters (duplicate rows), the rest are the most typical rows left
    (`random`: seeded uniform ones)."""
    from sklearn.cluster import KMeans

    features = np.asarray(features, dtype=np.float64)
    if features.ndim != 2:
        raise ValueError(f"features {features.shape}: expected [n, d]")
    if not 0 <= k <= len(features):
        raise ValueError(f"k={k}: must be between 0 and the number of examples, {len(features)}")
    if pick not in ("typical", "random"):
        raise ValueError(f"pick={pick!r}: typical or random")
    if k == 0:
        return []
    labels = KMeans(n_clusters=k, n_init=1, random_state=seed).fit(features).labels_
    rng = np.random.default_rng(seed)
    spread = np.zeros(len(features))  # mean distance to the nearest neighbours in the row's cluster
    for cluster in np.unique(labels):
        members = np.flatnonzero(labels == cluster)
        if len(members) > 1:
            rows = features[members]
            squared = (rows ** 2).sum(axis=1)
            distances = np.sqrt(np.maximum(squared[:, None] + squared[None, :] - 2.0 * rows @ rows.T, 0.0))
            spread[members] = np.sort(distances, axis=1)[:, 1:min(20, len(members) - 1) + 1].mean(axis=1)
    picked = []
    for cluster in np.argsort(-np.bincount(labels, minlength=k), kind="stable"):
        members = np.flatnonzero(labels == cluster)
        if len(members):
            picked.append(int(rng.choice(members)) if pick == "random"
                          else int(members[np.argmin(spread[members])]))
    rest = np.setdiff1d(np.arange(len(features)), picked)
    rest = rng.permutation(rest) if pick == "random" else rest[np.argsort(spread[rest], kind="stable")]
    return picked + [int(i) for i in rest[:k - len(picked)]]
