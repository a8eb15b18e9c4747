"""Gold mode (core/data/modes.py, services/evaluation/protocol.py `explain_gold_mode`): the mispredicted examples are
explained again for the class their rationale supports, by every class-aware method and by nothing else; a correct
example's explanations, and a class-agnostic method's, are predicted mode's; so the two modes score the correct
examples identically."""
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from learned_attribution.core.data.modes import EXPLAINED, GOLD, PREDICTED, in_mode, recomputed
from learned_attribution.core.explainers.apply import explain_examples, resolve_method
from learned_attribution.core.models import artifacts
from learned_attribution.core.models.loading import load_classifier
from learned_attribution.core.models.signals import FEATURE_SETS, signal_rows, token_vocabulary
from learned_attribution.services.config import compute_settings, scoring_settings
from learned_attribution.services.evaluation.protocol import (explain_gold_mode, explain_rationale_set, mode_rows,
                                                              score_rationale_set)

CROSSTASK = {"batch_size": 2, "max_test_examples": None, "expensive": ["occlusion"], "expensive_sample_size": 3,
             "baselines": {"raw_attention": {}, "saliency": {}, "input_x_gradient": {}, "occlusion": {"batch_size": 8}},
             "faithfulness": {"fractions": [0.2, 0.5], "batch_size": 4}, "bootstrap": {"n_boot": 50, "seed": 0}}
SCORING = scoring_settings(CROSSTASK, layer=-1, seed=0)
COMPUTE = compute_settings({"device": "cpu", "bf16": False,
                            "dask": {"address": None, "n_workers": 2, "threads_per_worker": 1, "methods": None,
                                     "batches_per_task": 1, "retries": 1}})
TEXTS = [["the", "movie", "is", "great"], ["a", "bad", "film"], ["so", "boring", "and", "slow", "."], ["fun", "story"],
         ["what", "a", "dull", "plot"], ["i", "loved", "it"]]


@pytest.fixture
def fold(tiny_models_dir, rationale_rows):
    classifier = load_classifier(tiny_models_dir / "classifier_sst2")
    folder = tiny_models_dir / "heldout_sst2"
    learned = {"expnet_plus": artifacts.load_learned(folder / "expnet_plus"),
               "expnet_paper": artifacts.load_learned(folder / "expnet_paper")}
    predictions = rationale_rows(classifier.tokenizer, TEXTS)  # label 1; x0, x2, x4 predicted 0 (mispredicted)
    gold_signals = pd.concat(signal_rows(classifier.model, classifier.tokenizer, recomputed(predictions),
                                         list(FEATURE_SETS)), ignore_index=True)
    return classifier, predictions, learned, gold_signals


def by_key(scores: pd.DataFrame) -> dict:
    return {(r.method, r.example_id): np.asarray(r.scores) for r in scores.itertuples()}


def test_the_modes_tag_each_row_with_its_class():
    examples = pd.DataFrame({"example_id": ["a", "b"], "label": [1, 0], "predicted": [1, 1]})
    assert in_mode(examples, GOLD)[EXPLAINED].tolist() == [1, 0]
    assert in_mode(examples, PREDICTED)[EXPLAINED].tolist() == [1, 1]
    assert recomputed(examples)["example_id"].tolist() == ["b"] and recomputed(examples)[EXPLAINED].tolist() == [0]
    with pytest.raises(ValueError, match="unknown mode 'golden'"):
        in_mode(examples, "golden")


def test_only_the_mispredicted_examples_are_explained_again_and_for_their_gold_class(fold):
    classifier, predictions, learned, gold_signals = fold
    predicted, _, _ = explain_rationale_set(classifier, predictions, learned, SCORING, COMPUTE)
    gold, failures = explain_gold_mode(classifier, predictions, learned, SCORING, COMPUTE, predicted, gold_signals)
    assert failures.empty
    before, after = by_key(predicted), by_key(gold)
    assert set(before) == set(after)  # every method on the same examples (occlusion: the sample's)
    wrong = {"x0", "x2", "x4"}
    for (method, example), scores in after.items():
        agnostic = method in ("raw_attention", "expnet_paper")
        if example not in wrong or agnostic:
            np.testing.assert_array_equal(scores, before[(method, example)])
        else:
            assert not np.array_equal(scores, before[(method, example)]), (method, example)
    assert (gold.loc[gold["example_id"].isin(wrong), EXPLAINED] == 1).all()
    right = gold[~gold["example_id"].isin(wrong)]
    assert (right[EXPLAINED] == right["predicted"]).all()
    assert (predicted[EXPLAINED] == predicted["predicted"]).all()
    # Known answer: a recomputed baseline's map is that method run on the example asked for the gold class, and
    # ExpNet+'s (read from the gold-class signal rows) is ExpNet+ run on the text for that class.
    vocabulary = token_vocabulary(classifier.tokenizer)
    methods = {name: resolve_method(name, learned=learned, layer=-1, vocabulary=vocabulary,
                                    settings=SCORING.baselines.get(name)) for name in ("saliency", "expnet_plus")}
    asked = explain_examples(classifier.model, classifier.tokenizer, in_mode(predictions[predictions["example_id"]
                                                                                         .isin(wrong)], GOLD),
                             methods, batch_size=2)
    for (method, example), scores in by_key(asked.scores).items():
        np.testing.assert_allclose(after[(method, example)], scores, rtol=1e-4, atol=1e-6)


def test_the_two_modes_score_the_correct_examples_identically(fold):
    classifier, predictions, learned, gold_signals = fold
    predicted, _, _ = explain_rationale_set(classifier, predictions, learned, SCORING, COMPUTE)
    gold, _ = explain_gold_mode(classifier, predictions, learned, SCORING, COMPUTE, predicted, gold_signals)
    thresholds = {"expnet_plus": {"own": 0.5}}
    kwargs = dict(rho=0.4, thresholds=thresholds, scoring=SCORING, fold="heldout_sst2", held_out_task="sst2")
    table = pd.concat([score_rationale_set(predicted, predictions, None, **kwargs),
                       score_rationale_set(gold, predictions, None, mode=GOLD, **kwargs)], ignore_index=True)
    numbers = ["n_examples", "f1", "auroc", "auprc", "f1_low", "auroc_high"]
    key = ["method", "rule", "subset"]
    first = mode_rows(table, PREDICTED).set_index(key).sort_index()
    second = mode_rows(table, GOLD).set_index(key).sort_index()
    correct = first.xs("correct", level="subset")[numbers]
    pd.testing.assert_frame_equal(correct, second.xs("correct", level="subset")[numbers])
    wrong = (first.xs("incorrect", level="subset")["auroc"] - second.xs("incorrect", level="subset")["auroc"]).abs()
    assert wrong.loc[("saliency", "matched")] > 0 and wrong.loc[("raw_attention", "matched")] == 0
    assert set(table["mode"]) == {PREDICTED, GOLD}


def test_a_classifier_right_on_every_example_needs_no_second_pass(fold):
    classifier, predictions, learned, _ = fold
    right = predictions.assign(predicted=1, correct=True)
    predicted, _, _ = explain_rationale_set(classifier, right, learned, replace(SCORING, expensive=()), COMPUTE)
    gold, failures = explain_gold_mode(classifier, right, learned, replace(SCORING, expensive=()), COMPUTE, predicted,
                                       None)
    assert failures.empty and by_key(gold).keys() == by_key(predicted).keys()
    assert all(np.array_equal(a, by_key(predicted)[k]) for k, a in by_key(gold).items())


def test_a_file_without_classes_is_scored_in_predicted_mode_only_and_says_so(fold, caplog):
    from learned_attribution.core.data.classes import NO_CLASS
    from learned_attribution.services.evaluation import external

    classifier, predictions, learned, _ = fold
    classless = predictions.assign(label=NO_CLASS, correct=False)
    scoring = replace(SCORING, expensive=())
    predicted, _, _ = explain_rationale_set(classifier, classless, learned, scoring, COMPUTE)
    with caplog.at_level("WARNING"):
        gold, failures = external.explain_gold(classifier, classless, learned, predicted, scoring, COMPUTE)
    assert gold.empty and failures.empty
    assert "gold mode absent: 6 of 6 scored examples give no class" in caplog.text
    table = score_rationale_set(predicted, classless, None, rho=0.4, thresholds={}, scoring=scoring,
                                fold="heldout_sst2", held_out_task="external")
    assert set(table["subset"]) == {"all", "sample"} and set(table["mode"]) == {PREDICTED}  # nothing is mispredicted
    assert table["classifier_accuracy"].isna().all()
