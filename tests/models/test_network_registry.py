"""The learned networks by name (core/models/learned/registry.py). Known answers: a network registered in this file
alone (no source edit) is parsed from a flat recipe, trained by the one loop, scores, saves and loads like the
built-in ones; a variant holds its network's own settings and no other network's; explainers saved before each
network had settings of its own (`fixtures/learned_explainers_v3`, written by that code's `save_learned`) load and
give the scores they gave when saved."""
from __future__ import annotations

import base64
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import synthetic_signals  # tests/models/synthetic_signals.py
from learned_attribution.core.models.artifacts import load_learned, save_learned, saved_variant
from learned_attribution.core.models.learned import (NETWORKS, SIGNALS, AttentionStudentSettings,
                                                     EncoderStudentSettings, LearnedNetwork, MLPSettings, NoSettings,
                                                     Variant, fit_variant, register_network,
                                                     score_examples, validation_auroc)
from learned_attribution.services.config import variant as parse_variant

FIXTURES = Path(__file__).parent / "fixtures" / "learned_explainers_v3"
COLUMNS = ["cls_to_tok_h0", "cls_to_tok_h1", "axg_h0", "axg_h1", "layer_grad_norm", "layer_grad_x_input"]


@dataclass(frozen=True)
class ToySettings:
    toy_scale: float = 1.0


class ToyLinear(LearnedNetwork):
    """Per member, a linear score of the inputs times a fixed scale: inputs [..., F] -> logits [members, ...]."""

    Settings = ToySettings

    def __init__(self, n_features: int, members: int = 1, scale: float = 1.0):
        super().__init__()
        self.weight = nn.Parameter(0.1 * torch.randn(members, n_features))
        self.bias = nn.Parameter(torch.zeros(members))
        self.scale = float(scale)

    @classmethod
    def over_columns(cls, settings: ToySettings, columns, training) -> "ToyLinear":
        return cls(len(columns), training.seeds, settings.toy_scale)

    @classmethod
    def describe(cls, settings: ToySettings) -> str:
        return f"toy linear x{settings.toy_scale:g}"

    @property
    def members(self) -> int:
        return self.weight.shape[0]

    def architecture(self) -> dict:
        return {"class": "ToyLinear", "n_features": self.weight.shape[1], "members": self.members,
                "scale": self.scale}

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        shape = features.shape[:-1]
        logits = self.scale * features.reshape(-1, features.shape[-1]) @ self.weight.T + self.bias
        return logits.T.reshape(self.members, *shape)


@pytest.fixture
def toy():
    """`toy_linear` registered for the test, and unregistered after it."""
    register_network("toy_linear")(ToyLinear)
    yield ToyLinear
    NETWORKS.pop("toy_linear")


def test_a_network_registered_in_a_test_file_is_parsed_trained_scored_and_reloaded(toy, training_settings, tmp_path):
    variant = parse_variant("toy", {"feature_sets": ["attention"], "objective": "pairwise", "network": "toy_linear",
                                    "toy_scale": 2.0}, "expnet_plus_variants.toy")
    assert variant.network_settings == ToySettings(2.0) and not variant.reads_text
    assert variant.describe() == "attention, global z, pairwise, toy linear x2"
    assert variant.record()["toy_scale"] == 2.0 and Variant.from_record(variant.record()) == variant
    with pytest.raises(ValueError, match="expnet_plus_variants.toy.gating"):  # another network's setting
        parse_variant("toy", {"network": "toy_linear", "gating": True}, "expnet_plus_variants.toy")

    train = synthetic_signals.synthetic_task("a", 40, 1, COLUMNS)
    val = synthetic_signals.synthetic_task("a", 15, 2, COLUMNS)
    settings = training_settings(max_epochs=20, patience=20, seeds=2)
    model = fit_variant(variant, train, val, columns=COLUMNS, rho=0.3, settings=settings)
    assert isinstance(model.net, ToyLinear) and model.net.scale == 2.0 and model.n_members == 2
    # The informative column (the first) carries the rationale: every member weighs it most.
    assert (model.net.weight.argmax(1) == 0).all() and validation_auroc(model, val) > 0.7

    save_learned(model, tmp_path / "toy")
    config = json.loads((tmp_path / "toy" / "config.json").read_text())
    assert config["variant"]["network"] == "toy_linear" and config["variant"]["toy_scale"] == 2.0
    loaded = load_learned(tmp_path / "toy")
    assert loaded.variant == variant and isinstance(loaded.net, ToyLinear)
    for before, after in zip(score_examples(model, val)["scores"], score_examples(loaded, val)["scores"]):
        np.testing.assert_array_equal(before, after)


def test_registering_refuses_a_name_or_class_twice_and_a_variant_another_networks_settings(toy):
    with pytest.raises(ValueError, match="'toy_linear' registered twice"):
        register_network("toy_linear")(ToyLinear)
    with pytest.raises(ValueError, match="class ToyLinear registered twice"):
        register_network("toy_again")(ToyLinear)
    with pytest.raises(ValueError, match=r"not a simplex network's \(NoSettings\)"):
        Variant("x", network="simplex", network_settings=MLPSettings(gating=True))
    with pytest.raises(ValueError, match="network='nope', expected one of"):
        Variant("x", network="nope")
    assert Variant("x", network="simplex").network_settings == NoSettings()
    assert [(name, cls.reads == SIGNALS) for name, cls in NETWORKS.items()] == [
        ("mlp", True), ("simplex", True), ("encoder", False), ("attention", False), ("toy_linear", True)]


def old_folder(name: str, tmp_path: Path) -> Path:
    """The fixture folder `name` as its code wrote it (the weights kept as base64 text: *.safetensors is not
    committed)."""
    folder = tmp_path / name
    folder.mkdir()
    shutil.copy(FIXTURES / name / "config.json", folder / "config.json")
    (folder / "model.safetensors").write_bytes(base64.b64decode((FIXTURES / name / "model.safetensors.b64").read_text()))
    return folder


def test_explainers_saved_before_networks_had_their_own_settings_load_and_score_as_saved(tmp_path):
    expected = json.loads((FIXTURES / "expected.json").read_text())
    rows, ids = np.asarray(expected["rows"], np.float32), np.asarray(expected["example_ids"])
    gated, stack = (load_learned(old_folder(name, tmp_path)) for name in ("gated", "stack"))
    assert gated.variant.network_settings == MLPSettings(gating=True) and stack.variant.network == "simplex"
    for model in (gated, stack):
        saved = expected["explainers"][model.variant.name]
        assert model.variant.describe() == saved["description"]
        np.testing.assert_allclose(model.predict(rows, ids), saved["scores"], rtol=1e-6, atol=1e-7)

    student = load_learned(old_folder("attention", tmp_path))
    assert student.reads_token_ids and student.variant.network_settings == AttentionStudentSettings(1)
    assert student.variant.describe() == expected["explainers"]["attention"]["description"]
    with torch.inference_mode():
        scores = student.net(torch.tensor(expected["hidden_states"]), torch.tensor(expected["attention_mask"]))
    np.testing.assert_allclose(scores.numpy(), expected["explainers"]["attention"]["scores"], rtol=1e-6, atol=1e-7)

    encoder = saved_variant(expected["encoder_record"])  # every network's settings, as that code saved them
    assert encoder.network_settings == EncoderStudentSettings(2)
    assert encoder.describe() == expected["encoder_description"]
