"""Explanations from several threads at once (a served model answers requests on parallel threads): every
answer equals the one computed alone. Each method hooks the one shared classifier, so without the explainer's
lock simultaneous calls see each other's hooks and requires_grad flags."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from learned_attribution.services.explain import FoldExplainer

TEXTS = [["the", "movie", "was", "great", "fun", "."], ["a", "slow", ",", "dull", "plot"],
         ["not", "very", "good", "but", "funny"], ["this", "story", "is", "so", "sad", "!"]]
# Learned explainers and the hook-based baselines: signal hooks (ExpNet+), attention hooks (GAE, AttCAT,
# attention x gradient), an embedding hook (saliency).
METHODS = ["expnet_plus", "expnet_paper", "saliency", "gae", "attcat", "attention_x_gradient", "raw_attention"]


def records(explainer: FoldExplainer, texts) -> list[dict]:
    return [e.record() for e in explainer.explain(texts, methods=METHODS)]


def assert_same(got: list[dict], want: list[dict]) -> None:
    assert [r["predicted"] for r in got] == [r["predicted"] for r in want]
    for g, w in zip(got, want):
        for method in METHODS:
            np.testing.assert_allclose(np.asarray(g["scores"][method], float), np.asarray(w["scores"][method], float),
                                       atol=1e-6, err_msg=method)


@pytest.mark.slow
def test_concurrent_explanations_equal_the_sequential_ones(tiny_models_dir):
    explainer = FoldExplainer.from_fold("heldout_sst2", models_dir=tiny_models_dir, device="cpu")
    expected = {i: records(explainer, [TEXTS[i % len(TEXTS)], TEXTS[(i + 1) % len(TEXTS)]]) for i in range(len(TEXTS))}
    calls = [i % len(TEXTS) for i in range(48)]  # 8 threads, 6 calls each
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(lambda i: (i, records(explainer, [TEXTS[i], TEXTS[(i + 1) % len(TEXTS)]])), calls))
    assert len(answers) == len(calls)
    for index, got in answers:
        assert_same(got, expected[index])
