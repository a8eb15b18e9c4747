"""Every method explains the class it is given, on a planted three-class classifier of EVERY supported family
(conftest.py: `planted_classifier`, in which the word "good" drives class 0, "bad" class 1 and "fun" class 2).

For a text holding the three words: every class-aware method asked for class c ranks class c's word first among the
three, and gives each class a map of its own; the class-agnostic methods (`AttributionMethod.class_agnostic`) give
one map for every class (on the known-answer classifier of tests/conftest.py, whose maps are far from flat, which
the planted classifier's norms are not); the ExpNet+ signal sets that read a gradient differ between classes, the
forward-only sets do not. The margins over a contrast class are checked in test_contrast_classes.py."""
from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
import torch

from learned_attribution.core.explainers import METHODS, build_method
from learned_attribution.core.explainers.apply import tokenizer_batch
from learned_attribution.core.models.learned import (InputPipeline, LearnedModel, MLPSettings, Variant,
                                                     build_variant_network)
from learned_attribution.core.models.signals import (GRADIENT_SETS, KNOWN_SETS, model_columns, signals_and_logits,
                                                     token_vocabulary)

CHEAP = {"integrated_gradients": {"n_steps": 16}, "lime": {"n_samples": 100, "seed": 5},
         "kernel_shap": {"n_samples": 100, "seed": 7}}
# The methods that differentiate the explained logit or watch the explained probability.
CLASS_AWARE = ("saliency", "input_x_gradient", "integrated_gradients", "grad_cam", "gae", "attcat",
               "attention_x_gradient", "occlusion", "lime", "kernel_shap")
CLASS_AGNOSTIC = {"raw_attention", "attention_rollout", "afn_norm", "expnet_paper"}
LEARNED_VARIANTS = {
    "expnet_paper": Variant(name="expnet_paper", stopping="token_auroc"),
    "expnet_plus": Variant(name="signals", feature_sets=("attention", "attention_x_gradient", "layer_gradient",
                                                         "saliency", "afn_norm", "position", "token_kind"),
                           network_settings=MLPSettings(gating=True), example_z=True, signs="magnitude"),
    "student": Variant(name="student", feature_sets=("attention_stats", "saliency", "position", "hidden_state"),
                       objective="distill", stopping="example_spearman"),
}


@pytest.fixture(scope="module")
def ids(classifier, planted_text) -> list[int]:
    return classifier[1](planted_text)["input_ids"]


@pytest.fixture(scope="module")
def planted_positions(classifier, ids, planted_words) -> list[int]:
    """The position of each class's planted word in the text (class 0, 1, 2)."""
    tokens = [token.lstrip("Ġ▁").lower() for token in classifier[1].convert_ids_to_tokens(ids)]
    positions = [tokens.index(word) for word in planted_words]
    assert len(set(positions)) == 3
    return positions


def class_maps(method, classifier, ids: list[int]) -> list[torch.Tensor]:
    """The method's scores [T] of the text explained for class 0, 1 and 2."""
    model, tokenizer = classifier
    return [method.explain(model, tokenizer_batch([ids], [c], tokenizer)).scores[0] for c in range(3)]


def test_the_planted_classifier_reads_each_class_from_its_word(classifier, ids, planted_positions):
    """Masking class c's word lowers logit c and leaves the other two logits nearly as they were."""
    model, tokenizer = classifier
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0]
        for c, position in enumerate(planted_positions):
            masked = list(ids)
            masked[position] = tokenizer.mask_token_id
            drop = logits - model(input_ids=torch.tensor([masked])).logits[0]
            assert drop[c] > 1.0
            assert drop.abs().argmax() == c and drop.abs().sort().values[1] < 0.2 * drop[c]


@pytest.mark.parametrize("name", CLASS_AWARE)
def test_a_class_aware_method_ranks_the_explained_classs_word_first(family, classifier, ids, planted_positions,
                                                                   input_gradient_blind, name):
    method = build_method(name, **CHEAP.get(name, {}))
    assert not method.class_agnostic
    maps = class_maps(method, classifier, ids)
    if name == "input_x_gradient" and family in input_gradient_blind:  # 0 at every token and class (conftest)
        for scores in maps:
            torch.testing.assert_close(scores, torch.zeros_like(scores), rtol=0, atol=1e-5)
        return
    for c, scores in enumerate(maps):
        planted = scores[planted_positions]
        others = torch.cat([planted[:c], planted[c + 1:]])
        assert planted[c] > others.max(), f"{family} {name}, class {c}: planted words' scores {planted.tolist()}"
    for a, b in combinations(range(3), 2):
        assert not torch.allclose(maps[a], maps[b]), f"{family} {name}: classes {a} and {b} give one map"


def learned_model(name: str, model, tokenizer, ids: list[int], training_settings) -> LearnedModel:
    """An untrained (seeded) network of the learned method `name` for `model`, its input statistics fitted on the
    text's real tokens: whether a map depends on the class does not need a trained network."""
    variant = LEARNED_VARIANTS[name]
    columns = model_columns(variant.feature_sets, model.config)
    batch = tokenizer_batch([ids], [0], tokenizer)
    signals, _ = signals_and_logits(model, batch.input_ids, batch.attention_mask, batch.target,
                                    variant.feature_sets, -1, token_vocabulary(tokenizer))
    rows = signals[~batch.special_mask].numpy().astype(np.float32)
    torch.manual_seed(3)
    net = build_variant_network(variant, columns, training_settings(hidden=6, seeds=2)).eval()
    inputs = InputPipeline.for_variant(variant, columns)
    inputs.mean, inputs.std = inputs.fitted_statistics(rows, np.zeros(len(rows), dtype=int))
    return LearnedModel(variant, inputs, net)


@pytest.fixture(scope="module")
def known_answer(family, known_answer_classifier, planted_text):
    """(model, tokenizer, ids of the planted text): the known-answer classifier of `family` (random weights)."""
    model, tokenizer = known_answer_classifier(family)
    return model, tokenizer, tokenizer(planted_text)["input_ids"]


def learned_methods(model, tokenizer, ids: list[int], training_settings) -> dict:
    return {name: build_method(name, model=learned_model(name, model, tokenizer, ids, training_settings), layer=-1,
                               vocabulary=token_vocabulary(tokenizer))
            for name in LEARNED_VARIANTS}


def test_exactly_the_methods_that_cannot_depend_on_the_class_are_flagged():
    assert {name for name, method in METHODS.items() if method.class_agnostic} == CLASS_AGNOSTIC
    for name in CLASS_AGNOSTIC:
        assert "Class-agnostic" in METHODS[name].__doc__


@pytest.mark.parametrize("name", sorted(CLASS_AGNOSTIC))
def test_a_class_agnostic_method_gives_one_map_for_every_class_and_contrast(family, known_answer, training_settings,
                                                                           name):
    model, tokenizer, ids = known_answer
    learned = learned_methods(model, tokenizer, ids, training_settings) if name in LEARNED_VARIANTS else {}
    method = learned[name] if name in learned else build_method(name)
    assert method.class_agnostic
    maps = class_maps(method, (model, tokenizer), ids)
    assert maps[0][1:-1].std() > 0, f"{family} {name}: a flat map"
    assert all(torch.equal(maps[0], other) for other in maps[1:]), f"{family} {name}"
    if name not in learned:  # the learned methods read no contrast
        foil = method.explain(model, tokenizer_batch([ids], [0], tokenizer, contrast=[2])).scores[0]
        assert torch.equal(foil, maps[0])


@pytest.mark.parametrize("name", ["expnet_plus", "student"])
def test_a_learned_method_over_gradient_signals_gives_each_class_its_own_map(family, classifier, ids,
                                                                            training_settings, name):
    method = learned_methods(*classifier, ids, training_settings)[name]
    assert not method.class_agnostic
    maps = class_maps(method, classifier, ids)
    for a, b in combinations(range(3), 2):
        assert not torch.allclose(maps[a], maps[b]), f"{family} {name}: classes {a} and {b} give one map"


def test_gradient_signal_sets_differ_between_classes_and_forward_only_sets_do_not(family, classifier, ids):
    model, tokenizer = classifier
    batch = tokenizer_batch([ids], [0], tokenizer)
    vocabulary = token_vocabulary(tokenizer)
    per_class = [signals_and_logits(model, batch.input_ids, batch.attention_mask, torch.tensor([c]), KNOWN_SETS, -1,
                                    vocabulary)[0][0] for c in range(3)]
    start = 0
    for feature_set in KNOWN_SETS:
        width = len(model_columns([feature_set], model.config))
        blocks = [signals[:, start:start + width] for signals in per_class]
        start += width
        if feature_set in GRADIENT_SETS:
            for a, b in combinations(range(3), 2):
                assert not torch.allclose(blocks[a], blocks[b]), f"{family} {feature_set}: classes {a} and {b}"
        else:
            assert all(torch.equal(blocks[0], other) for other in blocks[1:]), f"{family} {feature_set}"
    assert start == per_class[0].shape[-1]
