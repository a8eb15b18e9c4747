"""Shape-free signal sets: columns that do not depend on the classifier's depth or head count,
checked against the per-head / per-layer sets they summarise."""
from __future__ import annotations

import pytest
import torch

from learned_attribution.core.models.signals import (FEATURE_SETS, SHAPE_FREE_SETS, at_relative_depths, columns_for,
                                                signals_and_logits)


def test_shape_free_columns_are_the_same_for_every_shape():
    assert columns_for(SHAPE_FREE_SETS, n_heads=2, n_layers=2) == columns_for(SHAPE_FREE_SETS, n_heads=12, n_layers=7)
    assert set(SHAPE_FREE_SETS) <= set(FEATURE_SETS)
    assert columns_for(["attention"], 2, 2) != columns_for(["attention"], 3, 2)  # the per-head set is not shape-free


def test_relative_depths_interpolate_between_layers():
    four = torch.tensor([[0.0, 10.0, 20.0, 30.0]])  # 4 layers: the depths fall on layers 0, 1, 2, 3
    assert at_relative_depths(four)[0].tolist() == pytest.approx([0.0, 10.0, 20.0, 30.0])
    three = torch.tensor([[0.0, 10.0, 20.0]])  # 3 layers: 0, 2/3 and 4/3 of the way, the last
    assert at_relative_depths(three)[0].tolist() == pytest.approx([0.0, 20 / 3, 40 / 3, 20.0])
    one = torch.tensor([[5.0]])
    assert at_relative_depths(one).tolist() == [[5.0] * 4]


@pytest.mark.parametrize("family, n_layers, n_heads", [("bert", 2, 2), ("roberta", 3, 4), ("distilbert", 4, 1)])
def test_shape_free_sets_summarise_the_per_head_and_per_layer_sets(family, n_layers, n_heads, tiny_classifier):
    model, tokenizer = tiny_classifier(family, n_layers=n_layers, n_heads=n_heads)
    encoded = tokenizer(["the film was not good", "a boring plot , but fun"], padding=True, return_tensors="pt")
    input_ids, attention_mask = encoded["input_ids"], encoded["attention_mask"]
    sets = ["attention", "attention_x_gradient", "raw_attention_layers", "afn_norm", "attention_stats",
            "attention_x_gradient_stats", "raw_attention_depths", "afn_norm_depths"]
    signals, _ = signals_and_logits(model, input_ids, attention_mask, None, sets)
    columns = columns_for(sets, n_heads, n_layers)
    column = {name: signals[..., i] for i, name in enumerate(columns)}
    from_cls = torch.stack([column[f"cls_to_tok_h{h}"] for h in range(n_heads)], -1)
    to_cls = torch.stack([column[f"tok_to_cls_h{h}"] for h in range(n_heads)], -1)
    axg = torch.stack([column[f"axg_h{h}"] for h in range(n_heads)], -1)
    torch.testing.assert_close(column["cls_to_tok_mean"], from_cls.mean(-1))
    torch.testing.assert_close(column["cls_to_tok_max"], from_cls.amax(-1))
    torch.testing.assert_close(column["tok_to_cls_sd"], to_cls.std(-1, unbiased=False))
    torch.testing.assert_close(column["axg_min"], axg.amin(-1))
    raw = torch.stack([column[f"raw_attention_l{layer}"] for layer in range(n_layers)], -1)
    torch.testing.assert_close(column["raw_attention_d0"], raw[..., 0])
    torch.testing.assert_close(column["raw_attention_d100"], raw[..., -1])
    norms = torch.stack([column[f"afn_norm_l{layer}"] for layer in range(n_layers + 1)], -1)
    torch.testing.assert_close(torch.stack([column[f"afn_norm_d{d}"] for d in (0, 33, 67, 100)], -1),
                               at_relative_depths(norms))
