"""The learned explainers (`expnet_paper` and `expnet_plus`, one class over any `LearnedModel`) give the same
token scores as the trained model applied to the extracted signal rows (the pipeline scores variants from those
rows in the ablation and explains with the explainer)."""
import numpy as np
import pandas as pd
import pytest
import torch

from learned_attribution.core.explainers import METHODS, build_method
from learned_attribution.core.explainers.base import padded_batch
from learned_attribution.core.explainers.learned import LearnedMethod
from learned_attribution.core.models.features import extract_token_rows
from learned_attribution.core.models.learned import (InputPipeline, LearnedModel, MLPSettings, Variant,
                                                build_variant_network, score_examples)
from learned_attribution.core.models.signals import TokenVocabulary, columns_for, token_signals

PAD, CLS, SEP, MASK = 0, 1, 2, 3
ROWS = [[CLS, 7, 12, 30, 5, SEP], [CLS, 22, 8, SEP], [CLS, 9, SEP]]


def test_both_names_are_the_one_learned_method():
    assert all(issubclass(METHODS[name], LearnedMethod) for name in ("expnet_paper", "expnet_plus", "student"))


@pytest.mark.parametrize("name, variant", [
    ("expnet_paper", Variant("expnet_paper", stopping="token_auroc")),
    ("expnet_plus", Variant("attention_only")),
    ("expnet_plus", Variant("everything", feature_sets=("attention", "attention_x_gradient", "layer_gradient",
                                                        "saliency", "raw_attention_layers", "afn_norm", "position",
                                                        "token_kind"), network_settings=MLPSettings(gating=True))),
    ("expnet_plus", Variant("within_example", feature_sets=("attention", "layer_gradient", "position"),
                            example_z=True)),
    ("expnet_plus", Variant("stack", feature_sets=("attention", "attention_x_gradient", "saliency"),
                            network="simplex")),
    ("expnet_plus", Variant("anchored_magnitudes", feature_sets=("attention", "attention_x_gradient", "saliency"),
                            anchor="embedding_grad_norm", anchor_weight=0.5, signs="magnitude")),
    ("expnet_plus", Variant("shape_free", feature_sets=("attention_stats", "attention_x_gradient_stats",
                                                        "raw_attention_depths", "afn_norm_depths", "layer_gradient",
                                                        "position"), example_z=True)),
])
def test_explainer_equals_the_model_on_extracted_rows(tiny_bert_classifier, training_settings, name, variant):
    model = tiny_bert_classifier(num_hidden_layers=2, seed=1)
    columns = columns_for(variant.feature_sets, 2, 2)
    torch.manual_seed(0)
    net = build_variant_network(variant, columns, training_settings(hidden=4, seeds=3)).eval()  # a 3-seed ensemble
    rng = np.random.default_rng(0)
    inputs = InputPipeline.for_variant(variant, columns)
    inputs.mean = rng.normal(size=len(columns)).astype(np.float32)
    inputs.std = rng.uniform(0.5, 2, size=len(columns)).astype(np.float32)
    trained = LearnedModel(variant, inputs, net)
    vocabulary = TokenVocabulary(continuation=torch.tensor([12, 22]), punctuation=torch.tensor([30]),
                                 closed_class=torch.tensor([7]))
    targets = [1, 0, 1]
    examples = pd.DataFrame({"example_id": ["a", "b", "c"], "input_ids": ROWS, "predicted": targets,
                             "token_labels": [[-100, 1, 0, 0, 1, -100], [-100, 0, 1, -100], [-100, 1, -100]]})

    def compute(input_ids, attention_mask, target):
        return token_signals(model, input_ids, attention_mask, target, variant.feature_sets, -1, vocabulary)

    table = next(extract_token_rows(examples, compute, columns, 8, PAD, [CLS, SEP, PAD]))
    expected = score_examples(trained, table).set_index("example_id")["scores"]

    explainer = build_method(name, model=trained, layer=-1, vocabulary=vocabulary)
    assert isinstance(explainer, LearnedMethod) and explainer.model is trained
    batch = padded_batch(ROWS, targets, pad_token_id=PAD, mask_token_id=MASK, frame_token_ids=[CLS, SEP, PAD])
    attribution = explainer.explain(model, batch)
    for row, example_id in enumerate(["a", "b", "c"]):
        real = ~batch.special_mask[row]
        np.testing.assert_allclose(attribution.scores[row, real].numpy(), expected[example_id], rtol=1e-5, atol=1e-6)
        assert (attribution.scores[row, ~real] == 0).all()
    assert attribution.model_calls == 1
