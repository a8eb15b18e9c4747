"""Explainer artifacts: safetensors + JSON round trips, the recorded context, compatibility checks."""
import json

import numpy as np
import pytest
import torch

from learned_attribution.explain import load_classifier
from learned_attribution.models import artifacts
from learned_attribution.models.expnet_plus import ExpNetPlus


def test_round_trip_gives_the_same_probabilities_and_a_readable_config(tiny_models_dir, tmp_path):
    fold = tiny_models_dir / "heldout_sst2"
    for name in ("expnet_paper", "expnet_plus"):
        assert sorted(p.name for p in (fold / name).iterdir()) == ["config.json", "model.safetensors"]
        assert not list(fold.glob("*.partial"))
    paper = artifacts.load_explainer(fold / "expnet_paper")
    plus = artifacts.load_explainer(fold / "expnet_plus")
    assert isinstance(plus, ExpNetPlus) and plus.variant.gating and plus.variant.feature_sets[0] == "attention"
    rng = np.random.default_rng(1)
    for explainer, width in ((paper, 4), (plus, len(plus.columns))):
        rows = rng.random((7, width)).astype(np.float32)
        before = explainer.predict(rows, np.zeros(7)) if explainer is plus else explainer.predict(rows)
        artifacts.save_explainer(explainer, tmp_path / "again")
        again = artifacts.load_explainer(tmp_path / "again")
        after = again.predict(rows, np.zeros(7)) if explainer is plus else again.predict(rows)
        np.testing.assert_allclose(before, after, rtol=0, atol=0)
    config = json.loads((fold / "expnet_plus" / "config.json").read_text())
    assert config["kind"] == "expnet_plus" and config["format_version"] == artifacts.FORMAT_VERSION
    assert config["variant"]["feature_sets"] == ["attention", "attention_x_gradient", "position"]
    assert config["calibrated_threshold"] == 0.5 and config["threshold"] == 0.5
    assert len(config["target_mean"]) == len(config["columns"]) == config["architecture"]["n_features"]
    context = config["context"]
    assert context["training_tasks"] == ["cola", "hatexplain"] and context["held_out_task"] == "sst2"
    assert context["classifier"] == {"model_type": "bert", "num_hidden_layers": 2, "num_attention_heads": 2,
                                     "num_labels": 2, "tokenizer_class": "BertTokenizer", "vocab_size": 40}
    assert {"torch", "transformers", "learned-attribution"} <= set(context["packages"])


def test_a_seed_ensemble_and_a_simplex_stack_round_trip(tmp_path):
    from learned_attribution.models.expnet_plus import TrainingSettings, Variant, build_variant_network

    rng = np.random.default_rng(2)
    rows, ids = rng.random((9, 3)).astype(np.float32), np.repeat(["a", "b", "c"], 3)
    for variant in (Variant("mlp", feature_sets=("layer_gradient", "saliency")),
                    Variant("stack", feature_sets=("layer_gradient", "saliency"), network="simplex")):
        columns = ["layer_grad_norm", "embedding_grad_norm", "embedding_grad_x_input"]
        torch.manual_seed(0)
        net = build_variant_network(variant, columns, TrainingSettings(hidden=4, seeds=3)).eval()
        with torch.no_grad():
            for parameter in net.parameters():
                parameter.add_(torch.randn_like(parameter))
        explainer = ExpNetPlus(variant, columns, net, np.zeros(3, np.float32), np.ones(3, np.float32),
                               member_best_epochs=[3, 5, 4], member_val_auroc=[0.7, 0.71, 0.69])
        artifacts.save_explainer(explainer, tmp_path / variant.name)
        again = artifacts.load_explainer(tmp_path / variant.name)
        assert again.n_members == 3 and again.member_best_epochs == [3, 5, 4] and again.variant == variant
        for member in (None, 0, 2):
            np.testing.assert_array_equal(explainer.predict(rows, ids, member), again.predict(rows, ids, member))
        assert again.stack_weights() == explainer.stack_weights()


def test_an_older_artifact_format_is_named(tiny_models_dir, tmp_path):
    folder = tiny_models_dir / "heldout_sst2" / "expnet_plus"
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "format_version": 1}))
    with pytest.raises(ValueError, match="format_version 1; this version of learned-attribution reads 2"):
        artifacts.load_explainer(folder)


def test_a_collection_saves_every_variant_as_a_subfolder(tiny_models_dir, tmp_path):
    plus = artifacts.load_explainer(tiny_models_dir / "heldout_sst2" / "expnet_plus")
    artifacts.save_explainers({"b": plus, "a": plus}, tmp_path / "variants")
    loaded = artifacts.load_explainers(tmp_path / "variants")
    assert list(loaded) == ["a", "b"]


def test_a_failed_write_leaves_the_previous_folder_untouched(tiny_models_dir, tmp_path):
    paper = artifacts.load_explainer(tiny_models_dir / "heldout_sst2" / "expnet_paper")
    target = tmp_path / "paper"
    artifacts.save_explainer(paper, target)
    before = (target / "config.json").read_text()
    broken = artifacts.load_explainer(target)
    broken.feature_mean = object()  # not serialisable: the write fails half way
    with pytest.raises(TypeError):
        artifacts.save_explainer(broken, target)
    assert (target / "config.json").read_text() == before and not (tmp_path / "paper.partial").exists()


@pytest.mark.parametrize("overrides, named", [
    ({"num_hidden_layers": 3}, ["num_hidden_layers: explainer 2, classifier 3"]),
    ({"num_attention_heads": 4}, ["num_attention_heads: explainer 2, classifier 4"]),
])
def test_an_incompatible_classifier_is_named_not_explained(tiny_models_dir, tmp_path, classifier_writer, overrides,
                                                           named):
    other = load_classifier(classifier_writer(tmp_path / "other", **overrides))
    paper = artifacts.load_explainer(tiny_models_dir / "heldout_sst2" / "expnet_paper")
    with pytest.raises(artifacts.IncompatibleClassifierError) as error:
        artifacts.check_compatible(paper.context, other.model, other.tokenizer, where="heldout_sst2/expnet_paper")
    for text in named:
        assert text in str(error.value)


def test_a_different_tokenizer_family_is_named(tiny_models_dir):
    classifier = load_classifier(tiny_models_dir / "classifier_sst2")

    class RobertaTokenizerFast:  # only its class name matters to the check
        def __len__(self):
            return 40

    paper = artifacts.load_explainer(tiny_models_dir / "heldout_sst2" / "expnet_paper")
    with pytest.raises(artifacts.IncompatibleClassifierError, match="tokenizer_class: explainer 'BertTokenizer', "
                                                                     "classifier 'RobertaTokenizer'"):
        artifacts.check_compatible(paper.context, classifier.model, RobertaTokenizerFast(), where="x")


def test_read_config_rejects_other_folders(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a learned-explainer folder"):
        artifacts.read_config(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"kind": "expnet_paper", "format_version": 99}))
    from safetensors.torch import save_file
    save_file({"x": torch.zeros(1)}, str(tmp_path / "model.safetensors"))
    with pytest.raises(ValueError, match="format_version 99"):
        artifacts.read_config(tmp_path)
