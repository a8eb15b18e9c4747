"""Which k of n examples to annotate: a greedy pick that trades how informative an example is against how far it is
from the examples already picked (`weighted_farthest_first`). Pure numpy; the features and the informativeness are
the caller's (`services/suggest.py`: the classifier's [CLS] representation and its uncertainty)."""
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
