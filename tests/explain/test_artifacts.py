"""Learned-explainer artifacts: safetensors + JSON round trips, the recorded context, compatibility checks."""
import json

import numpy as np
import pytest
import torch

from learned_attribution.core.models import artifacts
from learned_attribution.core.models.learned import InputPipeline, LearnedModel, Variant, build_variant_network
from learned_attribution.core.models.loading import load_classifier

FOLD_EXPLAINERS = ("expnet_paper", "expnet_plus", "expnet_plus_shape_free")


def test_round_trip_gives_the_same_probabilities_and_a_readable_config(tiny_models_dir, tmp_path):
    fold = tiny_models_dir / "heldout_sst2"
    for name in FOLD_EXPLAINERS:
        assert sorted(p.name for p in (fold / name).iterdir()) == ["config.json", "model.safetensors"]
        assert not list(fold.glob("*.partial"))
    paper, plus, free = (artifacts.load_learned(fold / name) for name in FOLD_EXPLAINERS)
    assert all(isinstance(explainer, LearnedModel) for explainer in (paper, plus, free))
    assert paper.variant.name == "expnet_paper" and paper.variant.stopping == "token_auroc" and len(paper.columns) == 4
    assert plus.variant.network_settings.gating and plus.variant.feature_sets[0] == "attention" and not plus.shape_free
    assert free.shape_free and free.inputs.ranks and free.n_members == 2
    rng = np.random.default_rng(1)
    for explainer in (paper, plus, free):
        rows = rng.random((7, len(explainer.columns))).astype(np.float32)
        before = explainer.predict(rows, np.zeros(7))
        artifacts.save_learned(explainer, tmp_path / "again")
        again = artifacts.load_learned(tmp_path / "again")
        after = again.predict(rows, np.zeros(7))
        np.testing.assert_allclose(before, after, rtol=0, atol=0)
        assert again.variant == explainer.variant and again.inputs.config() == explainer.inputs.config()
    for name in FOLD_EXPLAINERS:  # one kind for every learned explainer, the paper's ExpNet included
        config = json.loads((fold / name / "config.json").read_text())
        assert config["kind"] == "learned_explainer" == artifacts.KIND
        assert config["format_version"] == artifacts.FORMAT_VERSION == 3
    config = json.loads((fold / "expnet_plus" / "config.json").read_text())
    assert config["variant"]["feature_sets"] == ["attention", "attention_x_gradient", "position"]
    assert config["calibrated_threshold"] == 0.5 and config["threshold"] == 0.5
    assert len(config["inputs"]["mean"]) == len(config["inputs"]["std"]) == len(config["inputs"]["columns"]) \
        == config["architecture"]["n_features"]
    assert config["architecture"]["class"] == "GatedExpNet" and config["architecture"]["head_of_column"]
    context = config["context"]
    assert context["training_tasks"] == ["cola", "hatexplain"] and context["held_out_task"] == "sst2"
    assert context["classifier"] == {"model_type": "bert", "num_hidden_layers": 2, "num_attention_heads": 2,
                                     "hidden_size": 16, "num_labels": 2, "tokenizer_class": "BertTokenizer",
                                     "vocab_size": 40}
    assert {"torch", "transformers", "learned-attribution"} <= set(context["packages"])
    paper_config = json.loads((fold / "expnet_paper" / "config.json").read_text())
    assert paper_config["variant"]["name"] == "expnet_paper" and paper_config["calibrated_threshold"] == 0.45
    assert paper_config["inputs"]["columns"] == ["cls_to_tok_h0", "cls_to_tok_h1", "tok_to_cls_h0", "tok_to_cls_h1"]


def test_a_seed_ensemble_a_simplex_stack_and_every_input_step_round_trip(tmp_path, training_settings):
    rng = np.random.default_rng(2)
    rows, ids = rng.normal(size=(9, 3)).astype(np.float32), np.repeat(["a", "b", "c"], 3)
    sets = ("layer_gradient", "saliency")
    for variant in (Variant("mlp", feature_sets=sets),
                    Variant("stack", feature_sets=sets, network="simplex"),
                    Variant("steps", feature_sets=sets, example_z=True, signs="magnitude", anchor="layer_grad_norm",
                            anchor_weight=0.5)):
        columns = ["layer_grad_norm", "embedding_grad_norm", "embedding_grad_x_input"]
        torch.manual_seed(0)
        net = build_variant_network(variant, columns, training_settings(hidden=4, seeds=3)).eval()
        with torch.no_grad():
            for parameter in net.parameters():
                parameter.add_(torch.randn_like(parameter))
        inputs = InputPipeline.for_variant(variant, columns)
        inputs.mean, inputs.std = rng.normal(size=3).astype(np.float32), rng.uniform(0.5, 2, 3).astype(np.float32)
        explainer = LearnedModel(variant, inputs, net, member_best_epochs=[3, 5, 4],
                                 member_val_scores=[0.7, 0.71, 0.69])
        artifacts.save_learned(explainer, tmp_path / variant.name)
        again = artifacts.load_learned(tmp_path / variant.name)
        assert again.n_members == 3 and again.member_best_epochs == [3, 5, 4] and again.variant == variant
        assert again.member_val_scores == [0.7, 0.71, 0.69]
        assert again.inputs.config() == explainer.inputs.config()
        for member in (None, 0, 2):
            np.testing.assert_array_equal(explainer.predict(rows, ids, member), again.predict(rows, ids, member))
        assert again.stack_weights() == explainer.stack_weights()


def test_an_older_artifact_format_is_named(tiny_models_dir, tmp_path):
    folder = tiny_models_dir / "heldout_sst2" / "expnet_plus"
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "format_version": 2}))
    with pytest.raises(ValueError, match="format_version 2; this version of learned-attribution reads 3"):
        artifacts.load_learned(folder)


def test_a_collection_saves_every_variant_as_a_subfolder(tiny_models_dir, tmp_path):
    plus = artifacts.load_learned(tiny_models_dir / "heldout_sst2" / "expnet_plus")
    artifacts.save_learned_collection({"b": plus, "a": plus}, tmp_path / "variants")
    loaded = artifacts.load_learned_collection(tmp_path / "variants")
    assert list(loaded) == ["a", "b"]


def test_a_failed_write_leaves_the_previous_folder_untouched(tiny_models_dir, tmp_path):
    paper = artifacts.load_learned(tiny_models_dir / "heldout_sst2" / "expnet_paper")
    target = tmp_path / "paper"
    artifacts.save_learned(paper, target)
    before = (target / "config.json").read_text()
    broken = artifacts.load_learned(target)
    broken.history = [{"epoch": object()}]  # not serialisable: the write fails half way (after the weights)
    with pytest.raises(TypeError):
        artifacts.save_learned(broken, target)
    assert (target / "config.json").read_text() == before and not (tmp_path / "paper.partial").exists()
    with pytest.raises(TypeError, match="cannot save a dict as a learned-explainer artifact"):
        artifacts.save_learned({}, tmp_path / "other")


@pytest.mark.parametrize("overrides, named", [
    ({"num_hidden_layers": 3}, ["num_hidden_layers: explainer 2, classifier 3"]),
    ({"num_attention_heads": 4}, ["num_attention_heads: explainer 2, classifier 4"]),
])
def test_an_incompatible_classifier_is_named_not_explained(tiny_models_dir, tmp_path, classifier_writer, overrides,
                                                           named):
    other = load_classifier(classifier_writer(tmp_path / "other", **overrides))
    paper = artifacts.load_learned(tiny_models_dir / "heldout_sst2" / "expnet_paper")
    with pytest.raises(artifacts.IncompatibleClassifierError) as error:
        artifacts.check_compatible(paper, other.model, other.tokenizer, where="heldout_sst2/expnet_paper")
    for text in [*named, "heldout_sst2/expnet_paper was trained for a bert classifier with 2 layers and 2 heads",
                 "its variant 'expnet_paper' reads one column per layer or head"]:
        assert text in str(error.value)
    free = artifacts.load_learned(tiny_models_dir / "heldout_sst2" / "expnet_plus_shape_free")
    artifacts.check_compatible(free, other.model, other.tokenizer, where="heldout_sst2/expnet_plus_shape_free")


def test_a_different_tokenizer_family_is_named(tiny_models_dir):
    classifier = load_classifier(tiny_models_dir / "classifier_sst2")

    class RobertaTokenizerFast:  # only its class name matters to the check
        def __len__(self):
            return 40

    paper = artifacts.load_learned(tiny_models_dir / "heldout_sst2" / "expnet_paper")
    with pytest.raises(artifacts.IncompatibleClassifierError, match="tokenizer_class: explainer 'BertTokenizer', "
                                                                     "classifier 'RobertaTokenizer'"):
        artifacts.check_compatible(paper, classifier.model, RobertaTokenizerFast(), where="x")
    artifacts.check_compatible(paper, classifier.model, classifier.tokenizer, where="x")  # its own classifier: fine


def test_a_shape_free_explainer_reads_another_family_and_shape_and_a_shape_bound_one_is_refused(tiny_models_dir,
                                                                                              tiny_classifier):
    model, tokenizer = tiny_classifier("roberta", n_layers=3, n_heads=4, hidden=16)
    fold = tiny_models_dir / "heldout_sst2"
    free = artifacts.load_learned(fold / "expnet_plus_shape_free")
    assert free.shape_free
    artifacts.check_compatible(free, model, tokenizer, where="heldout_sst2/expnet_plus_shape_free")  # no error
    plus = artifacts.load_learned(fold / "expnet_plus")
    with pytest.raises(artifacts.IncompatibleClassifierError) as error:
        artifacts.check_compatible(plus, model, tokenizer, where="heldout_sst2/expnet_plus")
    message = str(error.value)
    for text in ("heldout_sst2/expnet_plus was trained for a bert classifier with 2 layers and 2 heads "
                 "(BertTokenizer tokenizer) and cannot read this one",
                 "num_hidden_layers: explainer 2, classifier 3", "num_attention_heads: explainer 2, classifier 4",
                 "tokenizer_class: explainer 'BertTokenizer', classifier 'RobertaTokenizer'",
                 "its variant 'gated_signals' reads one column per layer or head; a shape-free variant reads any "
                 "shape"):
        assert text in message


def test_even_a_shape_free_explainer_refuses_an_unsupported_family(tiny_models_dir):
    from transformers import GPT2Config, GPT2ForSequenceClassification

    class GPT2TokenizerFast:  # only its class name and length matter to the check
        def __len__(self):
            return 50

    model = GPT2ForSequenceClassification(GPT2Config(vocab_size=50, n_positions=16, n_embd=16, n_layer=1, n_head=2,
                                                     pad_token_id=0))
    free = artifacts.load_learned(tiny_models_dir / "heldout_sst2" / "expnet_plus_shape_free")
    with pytest.raises(artifacts.IncompatibleClassifierError, match="model_type 'gpt2' is not a supported encoder "
                                                                     "family") as error:
        artifacts.check_compatible(free, model, GPT2TokenizerFast(), where="x")
    assert "its variant" not in str(error.value)  # nothing about shapes: a shape-free variant reads any shape


def test_read_config_rejects_other_folders(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a learned-explainer folder"):
        artifacts.read_config(tmp_path)
    from safetensors.torch import save_file
    save_file({"x": torch.zeros(1)}, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps({"kind": "expnet_paper", "format_version": 2}))
    with pytest.raises(ValueError, match="kind 'expnet_paper', expected 'learned_explainer'"):  # a format-2 kind
        artifacts.read_config(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"kind": "learned_explainer", "format_version": 99}))
    with pytest.raises(ValueError, match="format_version 99"):
        artifacts.read_config(tmp_path)
