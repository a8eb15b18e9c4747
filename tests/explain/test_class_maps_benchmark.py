"""benchmarks/class_maps.py on a tiny fold: the class-agnostic methods give one map for every class, the signed
class-aware ones a map per class, and the table says so per method."""
from __future__ import annotations

import pytest

from learned_attribution.services.explain import FoldExplainer

TEXTS = [["the", "movie", "is", "great", "."], ["a", "very", "boring", "film"], ["bad", "plot", "but", "fun", "actors"]]


@pytest.fixture
def class_maps(monkeypatch):
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import class_maps

    return class_maps.class_maps


def test_the_class_agnostic_methods_give_one_map_and_the_signed_ones_a_map_per_class(class_maps, tiny_models_dir):
    explainer = FoldExplainer.from_fold("heldout_sst2", models_dir=tiny_models_dir, device="cpu")
    methods = ["raw_attention", "afn_norm", "expnet_paper", "input_x_gradient", "occlusion"]
    table = class_maps(explainer, TEXTS, methods).set_index("method")
    assert table.loc[["raw_attention", "afn_norm", "expnet_paper"], "share_maps_differ"].tolist() == [0.0] * 3
    assert table.loc[["raw_attention", "afn_norm", "expnet_paper"], "class_agnostic"].all()
    assert table.loc[["input_x_gradient", "occlusion"], "share_maps_differ"].tolist() == [1.0] * 2
    assert (table["n_texts"] == 3).all() and set(table["classes"]) == {"negative/positive"}
    assert table.loc[["raw_attention", "afn_norm", "expnet_paper"], "share_same_up_to_sign"].tolist() == [1.0] * 3
