"""The changes `benchmarks/tune_classifier.py` can try on a classifier (tiny random BERT, hand-made rows), how it
parses a configuration, and the `prepare_model` hook of `services.classifiers.train_task_classifier` that applies
them (packaged encoder, a few sentences)."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def tune(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import tune_classifier

    return tune_classifier


def test_reinit_top_layers_resets_only_the_top_layer(tune, tiny_bert_classifier):
    model = tiny_bert_classifier(num_hidden_layers=3, hidden_size=64, intermediate_size=128, initializer_range=0.05)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    with torch.no_grad():  # make the top LayerNorm visibly non-default first
        model.bert.encoder.layer[2].output.LayerNorm.weight.fill_(3.0)

    tune.reinit_top_layers(model, 1)

    for name, parameter in model.named_parameters():
        if ".layer.2." not in name:
            assert torch.equal(parameter, before[name]), name
    top = model.bert.encoder.layer[2]
    assert torch.equal(top.output.LayerNorm.weight, torch.ones(64))
    assert torch.equal(top.attention.self.query.bias, torch.zeros(64))
    assert not torch.equal(top.attention.self.query.weight, before["bert.encoder.layer.2.attention.self.query.weight"])
    # 64 x 128 = 8,192 draws from normal(0, 0.05): the sample std is within 5% of 0.05.
    assert top.output.dense.weight.std().item() == pytest.approx(0.05, rel=0.05)


def test_keep_first_layers(tune, tiny_bert_classifier):
    model = tiny_bert_classifier(num_hidden_layers=3)
    first = model.bert.encoder.layer[0]

    tune.keep_first_layers(model, 2)

    assert len(model.bert.encoder.layer) == 2 and model.bert.encoder.layer[0] is first
    assert model.config.num_hidden_layers == 2
    out = model(input_ids=torch.tensor([[1, 5, 6, 2]]), output_hidden_states=True, output_attentions=True)
    assert len(out.hidden_states) == 3 and len(out.attentions) == 2


def _row(example_id, words, label, role="classifier_train"):
    """A tokenized row: [CLS]=1, word i -> pieces (10i, 10i+1) for even i, one piece 10i for odd i, [SEP]=2."""
    ids, word_ids = [1], [-1]
    for i in range(len(words)):
        pieces = [10 * i + 10, 10 * i + 11] if i % 2 == 0 else [10 * i + 10]
        ids += pieces
        word_ids += [i] * len(pieces)
    return {"example_id": example_id, "task": "cola", "role": role, "words": words, "label": label,
            "input_ids": np.asarray(ids + [2]), "word_ids": np.asarray(word_ids + [-1]), "token_labels": None}


def _spans(ids, word_ids):
    spans = []
    for piece, word in zip(ids[1:-1], word_ids[1:-1]):
        if spans and spans[-1][0] == word:
            spans[-1][1].append(int(piece))
        else:
            spans.append((word, [int(piece)]))
    return [tuple(p) for _, p in spans]


def test_synthetic_negatives_corrupt_one_word_position(tune):
    rows = [_row(f"good{i}", ["w"] * n, 1) for i, n in enumerate([3, 4, 5, 6, 7, 8])]
    rows += [_row("short", ["a", "b"], 1), _row("bad", ["w"] * 5, 0),
             _row("val", ["w"] * 5, 1, role="classifier_val")]
    tokenized = pd.DataFrame(rows)
    original = tokenized.copy(deep=True)

    augmented = tune.add_synthetic_negatives(tokenized, 1.0, seed=3)

    pd.testing.assert_frame_equal(tokenized, original)  # the input is not modified
    pd.testing.assert_frame_equal(augmented.iloc[:len(rows)], original)
    synthetic = augmented.iloc[len(rows):]
    # Every acceptable training sentence of >= 3 words, and nothing else, gets exactly one corrupted copy.
    assert sorted(synthetic["example_id"]) == sorted(f"good{i}:synthetic" for i in range(6))
    assert (synthetic["label"] == 0).all() and (synthetic["role"] == "classifier_train").all()
    for _, row in synthetic.iterrows():
        source = tokenized.set_index("example_id").loc[row["example_id"].removesuffix(":synthetic")]
        before = _spans(source["input_ids"], source["word_ids"])
        ids = [int(i) for i in row["input_ids"]]
        assert ids[0] == 1 and ids[-1] == 2
        assert ids[-1 - len(before[-1]):-1] == list(before[-1])  # the last word stays last
        body = ids[1:-1]
        candidates = {}
        for j in range(len(before) - 1):
            swapped = before[:j] + [before[j + 1], before[j]] + before[j + 2:]
            candidates[("swap", j)] = swapped
            candidates[("delete", j)] = before[:j] + before[j + 1:]
            candidates[("double", j)] = before[:j] + [before[j]] + before[j:]
        matches = [key for key, spans in candidates.items() if [p for s in spans for p in s] == body]
        assert matches, f"{row['example_id']}: {body} is not one swap, deletion or doubling of {before}"
    assert Counter(augmented["label"])[0] == 1 + 6


CPU = {"device": "cpu", "bf16": False, "dask": {"address": None, "n_workers": 2, "threads_per_worker": 1,
                                                 "methods": None, "batches_per_task": 1, "retries": 1}}


def shipped_params(project_root, task: str) -> dict:
    import yaml

    return yaml.safe_load((project_root / "conf/base/parameters_classifiers.yml").read_text())["classifiers"][task]


def test_a_configuration_is_parsed_as_the_pipeline_parses_the_task_block(tune, project_root):
    from learned_attribution.services.config import compute_settings

    compute = compute_settings(CPU)
    settings, variant = tune.configuration(shipped_params(project_root, "cola"),
                                           "lr=1e-4,epochs=5,keep_layers=3", 7, compute, "cola")
    assert variant == {"keep_layers": 3}
    assert settings.training.learning_rate == 1e-4 and settings.training.epochs == 5
    assert settings.training.seed == 7 and settings.training.bf16 is False
    assert settings.training.batch_size == shipped_params(project_root, "cola")["batch_size"]  # the rest: the task's
    with pytest.raises(ValueError, match=r"classifiers.cola \(--config 'lrate=1e-4'\).lrate"):
        tune.configuration(shipped_params(project_root, "cola"), "lrate=1e-4", 7, compute, "cola")


def test_train_classifier_applies_prepare_model(tune, project_root):
    from learned_attribution.core.models.loading import PACKAGED_ENCODER, load_tokenizer
    from learned_attribution.services.classifiers import train_task_classifier
    from learned_attribution.services.config import compute_settings

    tokenizer = load_tokenizer(PACKAGED_ENCODER)
    sentences = [("The cat sat on the mat.", 1), ("Cat the on sat mat the.", 0), ("She reads books.", 1),
                 ("Reads she books the.", 0), ("They left early.", 1), ("Left they early the.", 0)]
    rows = [{"example_id": f"s{i}", "task": "cola", "role": role, "label": label,
             "input_ids": np.asarray(tokenizer(text)["input_ids"])}
            for i, (text, label) in enumerate(sentences) for role in ("classifier_train", "classifier_val")]
    calls = []

    def prepare(model):
        calls.append(model.config.num_hidden_layers)
        return tune.keep_first_layers(model, 1)

    compute = compute_settings(CPU)
    settings, _ = tune.configuration(shipped_params(project_root, "cola"), "lr=1e-4,epochs=1,batch_size=4,"
                                     "selection_metric=mcc,eval_batch_size=8,class_weighting=false", 13, compute,
                                     "cola")
    classifier, history = train_task_classifier(pd.DataFrame(rows), PACKAGED_ENCODER, settings, compute,
                                                prepare_model=prepare)

    assert calls == [6]  # called once, on the packaged 6-layer encoder
    assert len(classifier.model.bert.encoder.layer) == 1 and classifier.model.config.num_hidden_layers == 1
    assert list(history["epoch"]) == [1] and history["n_train"].iloc[0] == 6
    # The task's class names, not transformers' LABEL_0 / LABEL_1.
    assert classifier.model.config.id2label == {0: "unacceptable", 1: "acceptable"}
    assert classifier.model.config.label2id == {"unacceptable": 0, "acceptable": 1}


@pytest.mark.slow
def test_threshold_gain_known_answers(tune):
    labels = np.array([1] * 40 + [0] * 40)
    # Positives at 0.9, negatives at 0.6: at 0.5 everything is called positive (MCC 0); every half chooses 0.60,
    # the lowest threshold that separates them (MCC 1 on the other half too), so the gain is exactly 1.
    shifted = np.array([0.9] * 40 + [0.6] * 40)
    assert tune.threshold_gain(labels, shifted, repeats=20) == pytest.approx((1.0, 0.0))
    # Separated at 0.5 already: nothing to gain.
    centred = np.array([0.8] * 40 + [0.2] * 40)
    assert tune.threshold_gain(labels, centred, repeats=20) == pytest.approx((0.0, 0.0))
