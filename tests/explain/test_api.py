"""The Python API (learned_attribution.services.explain) on a tiny fold: known answers, equality with the explainers
run directly, word aggregation, bring-your-own classifier and every bad input."""
import logging

import numpy as np
import pandas as pd
import pytest
import torch

from learned_attribution.core.data.words import whitespace_words
from learned_attribution.core.errors import InputError
from learned_attribution.core.explainers import build_method
from learned_attribution.core.explainers.apply import explain_examples
from learned_attribution.core.models.loading import load_classifier
from learned_attribution.services.explain import FoldExplainer
from learned_attribution.services.explanation import own_rule, word_scores
from learned_attribution.core.models.features import cls_attention_features
from learned_attribution.core.models.signals import token_vocabulary

TEXTS = ["the movie is great .", "a very boring film , but the actors were fun !", "bad"]


@pytest.fixture
def fold(tiny_models_dir):
    return FoldExplainer.from_fold("heldout_sst2", models_dir=tiny_models_dir, device="cpu")


def test_word_segmentation_and_aggregation_known_answers():
    words, _ = whitespace_words("  A gutsy\tand exhilarating movie .\n")
    assert words == ["A", "gutsy", "and", "exhilarating", "movie", "."]
    # tokens 0,1 -> word 0; token 2 -> word 2; word 1 has no token
    assert word_scores(np.array([0.1, 0.5, -0.2]), [0, 0, 2], 3, signed=False) == [0.5, None, -0.2]
    assert word_scores(np.array([0.1, 0.5, -0.2]), [0, 0, 2], 3, signed=True) == pytest.approx([0.6, None, -0.2])
    assert own_rule([0.2, None, 0.9, 0.6], 0.5, rho=0.3) == [0, 0, 1, 1]
    assert own_rule([0.2, None, 0.3], 0.5, rho=0.3) == [0, 0, 1]  # nothing passes: the best word alone
    assert own_rule([0.2, None, 0.9, 0.6, 0.1], None, rho=0.5) == [0, 0, 1, 1, 0]  # top round(0.5 * 4) = 2


def test_paper_expnet_scores_equal_the_network_on_the_classifier_attention(fold):
    [result] = fold.explain([TEXTS[0]], methods=["expnet_paper"])
    tokenizer, model = fold.classifier.tokenizer, fold.classifier.model
    ids = tokenizer(TEXTS[0].split(), is_split_into_words=True, return_tensors="pt")
    with torch.inference_mode():
        output = model(**ids, output_attentions=True)
    features = cls_attention_features(output.attentions[-1])[0, 1:-1].numpy()
    expected = fold.learned["expnet_paper"].predict(features)
    np.testing.assert_allclose(result.token_scores["expnet_paper"], expected, atol=1e-6)
    probabilities = torch.softmax(output.logits, -1)[0].numpy()
    assert result.predicted == int(probabilities.argmax())
    assert result.probability == pytest.approx(float(probabilities.max()), abs=1e-6)
    assert result.label == ["negative", "positive"][result.predicted]
    assert result.words == TEXTS[0].split() and result.tokens == tokenizer.tokenize(TEXTS[0])
    # Every word here is one token, so word scores are the token scores; the own rule is the calibrated threshold.
    assert result.word_scores["expnet_paper"] == pytest.approx(list(expected), abs=1e-6)
    assert result.rationale["expnet_paper"] == own_rule(list(expected), 0.45, 0.4)


def test_every_method_equals_the_registry_explainer_on_the_same_batch(fold):
    methods = ["expnet_plus", "expnet_paper", "saliency", "integrated_gradients", "raw_attention", "lime"]
    results = fold.explain(TEXTS, methods=methods, batch_size=2)
    tokenizer = fold.classifier.tokenizer
    examples = pd.DataFrame({"example_id": ["0", "1", "2"],
                             "input_ids": [tokenizer(t.split(), is_split_into_words=True)["input_ids"] for t in TEXTS],
                             "predicted": [r.predicted for r in results]})
    explainers = {"expnet_plus": build_method("expnet_plus", model=fold.learned["expnet_plus"], layer=-1,
                                                 vocabulary=token_vocabulary(tokenizer)),
                  "expnet_paper": build_method("expnet_paper", model=fold.learned["expnet_paper"], layer=-1),
                  "saliency": build_method("saliency"),
                  "integrated_gradients": build_method("integrated_gradients", n_steps=4),  # fold.json setting
                  "raw_attention": build_method("raw_attention"), "lime": build_method("lime", n_samples=20)}
    run = explain_examples(fold.classifier.model, tokenizer, examples, explainers, batch_size=3)
    assert run.failures.empty
    direct = run.scores.set_index(["example_id", "method"])["scores"]
    for index, result in enumerate(results):
        for method in methods:
            np.testing.assert_allclose(result.token_scores[method], direct[(str(index), method)], atol=1e-5,
                                       err_msg=f"{method} on text {index}")
        assert set(result.word_scores) == set(result.rationale) == set(methods)
        assert all(len(v) == len(result.words) for v in result.word_scores.values())


def test_signed_methods_sum_and_unsigned_take_the_maximum_over_subwords(fold):
    [result] = fold.explain(["the films were boring"], methods=["integrated_gradients", "saliency"])
    assert result.tokens[:3] == ["the", "film", "##s"]
    ig, sal = result.token_scores["integrated_gradients"], result.token_scores["saliency"]
    assert result.word_scores["integrated_gradients"][1] == pytest.approx(ig[1] + ig[2], abs=1e-6)
    assert result.word_scores["saliency"][1] == pytest.approx(max(sal[1], sal[2]), abs=1e-6)
    assert result.words[2] == "were" and result.word_scores["saliency"][2] is not None  # [UNK] keeps its word


def test_results_do_not_depend_on_batching_and_keep_input_order_and_ids(fold):
    one = fold.explain(TEXTS, methods=["expnet_plus", "saliency"], batch_size=1, ids=["a", "b", "c"])
    three = fold.explain(TEXTS, methods=["expnet_plus", "saliency"], batch_size=3)
    assert [r.id for r in one] == ["a", "b", "c"] and [r.text for r in three] == TEXTS
    for a, b in zip(one, three):
        assert a.predicted == b.predicted and a.probability == pytest.approx(b.probability, abs=1e-6)
        for method in ("expnet_plus", "saliency"):
            np.testing.assert_allclose(a.token_scores[method], b.token_scores[method], atol=1e-5)


def test_word_lists_keep_their_segmentation_and_defaults_are_expnet_plus_and_the_best_baseline(fold):
    [result] = fold.explain([["the", "movie", "is", "great", "."]])
    assert result.words == ["the", "movie", "is", "great", "."] and result.text == "the movie is great ."
    assert list(result.word_scores) == ["expnet_plus", "saliency"] == fold.default_methods
    assert set(result.record()) == {"id", "text", "words", "offsets", "predicted", "label", "probability",
                                    "truncated", "unknown_share", "mostly_unknown", "variants", "explained",
                                    "explained_label", "explains_predicted", "contrast", "contrast_label",
                                    "class_agnostic", "scores", "rationale"}
    assert result.variants == {"expnet_plus": "gated_signals"}  # the fold's chosen variant reads this classifier


def test_a_long_text_is_explained_on_its_first_max_length_tokens(tiny_models_dir, caplog):
    fold = FoldExplainer.from_fold("heldout_sst2", models_dir=tiny_models_dir, device="cpu", max_length=6)
    with caplog.at_level(logging.WARNING, logger="learned_attribution.services.explain"):
        [short, long] = fold.explain(["the movie", "the movie is great and the plot is fun"],
                                     methods=["expnet_plus", "raw_attention"])
    assert not short.truncated and long.truncated
    assert "text 1 is longer than max_length=6" in caplog.text
    assert len(long.tokens) == 4 and len(long.words) == 9
    for method in ("expnet_plus", "raw_attention"):
        assert all(s is not None for s in long.word_scores[method][:4])
        assert long.word_scores[method][4:] == [None] * 5 and long.rationale[method][4:] == [0] * 5


def test_bring_your_own_classifier_folder(tiny_models_dir, tmp_path, classifier_writer):
    mine = classifier_writer(tmp_path / "my_classifier", seed=7)
    fold = FoldExplainer.from_fold("heldout_sst2", classifier=mine, models_dir=tiny_models_dir, device="cpu")
    reference = load_classifier(mine)
    [result] = fold.explain([TEXTS[1]], methods=["expnet_plus"])
    ids = reference.tokenizer(TEXTS[1].split(), is_split_into_words=True, return_tensors="pt")
    with torch.inference_mode():
        probabilities = torch.softmax(reference.model(**ids).logits, -1)[0]
    assert result.probability == pytest.approx(float(probabilities.max()), abs=1e-6)
    default = FoldExplainer.from_fold("heldout_sst2", models_dir=tiny_models_dir, device="cpu").explain([TEXTS[1]])
    assert default[0].probability != pytest.approx(result.probability, abs=1e-6)  # really another classifier


def test_an_incompatible_classifier_stops_before_a_learned_method_explains(tiny_models_dir, tmp_path,
                                                                            classifier_writer):
    other = classifier_writer(tmp_path / "deeper", num_hidden_layers=3)
    explainer = FoldExplainer.from_fold("heldout_sst2", classifier=other, models_dir=tiny_models_dir)
    with pytest.raises(ValueError, match="num_hidden_layers: explainer 2, classifier 3"):
        explainer.explain(["the movie was good"], methods=["saliency", "expnet_paper"])


def test_bad_inputs_name_what_is_wrong(fold, tiny_models_dir, tmp_path):
    with pytest.raises(InputError, match="text 1 is empty or whitespace only"):
        fold.explain(["fine", "   "])
    with pytest.raises(InputError, match=r"unknown method 'salency'; available: \['expnet_plus', 'expnet_paper'"):
        fold.explain(["fine"], methods=["salency"])
    with pytest.raises(InputError, match="batch_size=0"):
        fold.explain(["fine"], batch_size=0)
    with pytest.raises(InputError, match=r"unknown fold 'heldout_imdb'; the folds are .*trained in .*heldout_sst2"):
        FoldExplainer.from_fold("heldout_imdb", models_dir=tiny_models_dir)
    with pytest.raises(InputError, match=r"no trained fold at .*heldout_cola.*kedro run --pipeline crosstask"):
        FoldExplainer.from_fold("heldout_cola", models_dir=tiny_models_dir)
    with pytest.raises(InputError, match=r"classifier folder no/such/model does not exist"):
        FoldExplainer.from_fold("heldout_sst2", classifier="no/such/model", models_dir=tiny_models_dir)
    with pytest.raises(InputError, match=r"classifier 'no-such/model' could not be loaded"):  # the hub
        FoldExplainer.from_fold("heldout_sst2", classifier="no-such/model", models_dir=tiny_models_dir)
    with pytest.raises(InputError, match=r"no trained cola classifier at .*kedro run --pipeline classifiers"):
        FoldExplainer.from_fold("heldout_sst2", classifier="cola", models_dir=tiny_models_dir)
