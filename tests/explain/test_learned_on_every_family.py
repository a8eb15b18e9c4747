"""The learned explainers trained and applied on EVERY supported family, in core only:
signal rows extracted from a tiny classifier of the family (`signals.signal_rows`), the paper's ExpNet, an ExpNet+
variant (per-task standardisation and self-training on the held-out classifier's unlabeled rows) and a student
trained on them with the one loop (`fit_variant`), saved and loaded as artifacts (`save_learned` / `load_learned`),
then applied to the classifier through their attribution methods. The known answer: the method's scores are the
trained model's own `predict` on the signal rows of the family, token for token, and the loaded model's equal
the trained one's bit for bit. Across families and shapes, a shape-free variant trained on BERT reads a RoBERTa,
a DistilBERT and a DeBERTa of other depths and head counts with the same columns, and its scores there are its
`predict` on their rows; the paper's ExpNet, one column per head, is refused by `check_compatible`.

(What each signal is, per family, is checked against direct computations in tests/models/
test_signals_every_family.py; the API, CLI and served-model paths of these folds in tests/explain/test_api.py,
test_cli.py and test_serving_model.py.)"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from learned_attribution.core.explainers import build_method
from learned_attribution.core.explainers.apply import tokenizer_batch
from learned_attribution.core.models.architectures import SUPPORTED_MODEL_TYPES
from learned_attribution.core.models.artifacts import (IncompatibleClassifierError, check_compatible,
                                                       explainer_context, load_learned, save_learned)
from learned_attribution.core.models.learned import Variant, fit_variant
from learned_attribution.core.models.signals import model_columns, signal_rows, token_vocabulary

# "unbelievable" is known in pieces only (un + believ + able): every kind of tokenizer continues words somewhere, so
# no signal column is constant in training (a constant column's standard deviation is 1e-6: at prediction on another
# family it would be divided by 1e-6, and every score saturate).
WORDS = ("the", "film", "was", "good", "bad", "boring", "not", "very", "and", "but", "it", "plot", "fun", ",", ".",
         "unbelievable")
PAPER = Variant(name="expnet_paper", stopping="token_auroc")
PLUS = Variant(name="signals", feature_sets=("attention", "attention_x_gradient", "layer_gradient", "position",
                                             "token_kind"), standardise="per_task", objective="pairwise",
               self_training=True)
SHAPE_FREE = Variant(name="shape_free", feature_sets=("attention_stats", "attention_x_gradient_stats",
                                                     "layer_gradient", "raw_attention_depths", "afn_norm_depths",
                                                     "position"), example_z=True, objective="pairwise")
STUDENT = Variant(name="student", feature_sets=("attention_stats", "position", "hidden_state"), objective="distill",
                  stopping="example_spearman")
SETS = tuple(dict.fromkeys(s for v in (PAPER, PLUS, SHAPE_FREE, STUDENT) for s in v.feature_sets))
TEXTS = ["the film was not good , but it was fun .", "a very boring plot", "it was bad"]


def task_examples(task: str, sentences: pd.DataFrame) -> pd.DataFrame:
    """Sentiment sentences (tests/conftest.py) as a task's rationale rows: each token labelled 1 when it spells a
    sentiment word (the rationale; frame tokens -100), explained for class 1; the first half `rationale_train`, the
    rest `rationale_val`."""
    half = len(sentences) // 2
    return pd.DataFrame({"example_id": [f"{task}{i}" for i in sentences["index"]], "task": task,
                         "input_ids": sentences["input_ids"], "token_labels": sentences["sentiment"], "predicted": 1,
                         "role": ["rationale_train" if i < half else "rationale_val" for i in sentences["index"]]})


def rows_of(model, tokenizer, examples: pd.DataFrame) -> pd.DataFrame:
    return pd.concat(signal_rows(model, tokenizer, examples, SETS, layer=-1, batch_size=8), ignore_index=True)


def fold(family: str, model, tokenizer, settings, sentences) -> dict:
    """Two training tasks and a held-out one, all on `model`'s signals: the paper's ExpNet, ExpNet+ (`PLUS`) and a
    shape-free variant trained on the training tasks for the held-out classifier, and a student of saliency on
    the held-out task's texts, each given the context the pipeline records."""
    tables = {task: rows_of(model, tokenizer, task_examples(task, sentences(tokenizer, 16, seed, WORDS)))
              for seed, task in enumerate(("cola", "hatexplain", "sst2"))}
    train = pd.concat([tables[t][tables[t]["role"] == "rationale_train"] for t in ("cola", "hatexplain")],
                      ignore_index=True)
    val = pd.concat([tables[t][tables[t]["role"] == "rationale_val"] for t in ("cola", "hatexplain")],
                    ignore_index=True)
    assert train["token_label"].sum() > 0 and val["token_label"].sum() > 0
    unlabeled = {task: table.drop(columns="token_label") for task, table in tables.items()}
    context = explainer_context(model, tokenizer, fold="heldout_sst2", held_out_task="sst2",
                                training_tasks=["cola", "hatexplain"], encoder=f"tiny-{family}", layer=-1, rho=0.3,
                                max_length=64)
    models = {}
    for name, variant, extra in (("expnet_paper", PAPER, {"batch_unit": "tokens", "batch_size": 64, "seeds": 1}),
                                 ("expnet_plus", PLUS, {}), ("shape_free", SHAPE_FREE, {})):
        models[name] = fit_variant(variant, train, val, columns=model_columns(variant.feature_sets, model.config),
                                   rho=0.3, settings=settings(max_epochs=3, patience=2, **extra),
                                   target=unlabeled["sst2"], stats_tables=unlabeled)
    # The student's teacher: a made-up real-valued score per token (its position within the text, reversed).
    held_out = tables["sst2"].assign(token_label=lambda t: -t["position"].astype(float))
    student_columns = model_columns(STUDENT.feature_sets, model.config)
    models["student"] = fit_variant(STUDENT, held_out[held_out["role"] == "rationale_train"],
                                    held_out[held_out["role"] == "rationale_val"], columns=student_columns, rho=0.3,
                                    settings=settings(max_epochs=3, patience=2))
    for trained in models.values():
        trained.context = dict(context)
    return models


def expected_scores(trained, model, tokenizer, texts: list[list[int]], targets: list[int]) -> list[torch.Tensor]:
    """Per text: 0 at its frame tokens, `trained.predict` on its signal rows at its real tokens."""
    examples = pd.DataFrame({"example_id": [f"x{i}" for i in range(len(texts))], "input_ids": texts,
                             "predicted": targets, "token_labels": [None] * len(texts)})
    rows = pd.concat(signal_rows(model, tokenizer, examples, trained.variant.feature_sets, layer=-1,
                                 batch_size=len(texts)), ignore_index=True)
    predicted = trained.predict(rows[trained.columns].to_numpy(np.float32), rows["example_id"].to_numpy())
    out = []
    for index, ids in enumerate(texts):
        scores = torch.zeros(len(ids))
        mine = (rows["example_id"] == f"x{index}").to_numpy()
        scores[rows.loc[mine, "position"].to_numpy()] = torch.as_tensor(np.array(predicted[mine]))
        out.append(scores)
    return out


def assert_scores(scores: torch.Tensor, expected: list[torch.Tensor], where: str) -> None:
    for row, want in enumerate(expected):
        torch.testing.assert_close(scores[row, :len(want)], want, rtol=1e-4, atol=1e-6,
                                   msg=lambda m: f"{where}, text {row}: {m}")
        assert (scores[row, len(want):] == 0).all()
        assert float(want[1:-1].max() - want[1:-1].min()) > 1e-5, f"{where}: flat answer for text {row}"


@pytest.mark.parametrize("family", SUPPORTED_MODEL_TYPES)
def test_a_fold_trained_on_a_family_explains_it_with_its_learned_models_own_predictions(
        family, known_answer_classifier, training_settings, sentiment_sentences, tmp_path):
    model, tokenizer = known_answer_classifier(family, n_layers=2, n_heads=2)
    models = fold(family, model, tokenizer, training_settings, sentiment_sentences)
    texts = [tokenizer(text)["input_ids"] for text in TEXTS]
    targets = [1, 0, 2]
    batch = tokenizer_batch(texts, targets, tokenizer)
    vocabulary = token_vocabulary(tokenizer)
    for name, trained in models.items():
        save_learned(trained, tmp_path / name)
        loaded = load_learned(tmp_path / name)
        check_compatible(loaded, model, tokenizer, where=name)  # trained for this classifier: no complaint
        method = "expnet_plus" if name == "shape_free" else name
        expected = expected_scores(trained, model, tokenizer, texts, targets)
        for which, learned in (("trained", trained), ("loaded", loaded)):
            scores = build_method(method, model=learned, layer=-1, vocabulary=vocabulary).explain(model, batch).scores
            assert_scores(scores, expected, f"{family} {name} ({which})")
        trained_scores = build_method(method, model=trained, layer=-1, vocabulary=vocabulary).explain(model, batch)
        loaded_scores = build_method(method, model=loaded, layer=-1, vocabulary=vocabulary).explain(model, batch)
        assert torch.equal(trained_scores.scores, loaded_scores.scores), (family, name)
    # Self-training read the held-out classifier's unlabeled rows; the student stopped on its Spearman.
    assert models["expnet_plus"].n_pseudo_examples > 0
    assert "val_spearman" in models["student"].history[0]


@pytest.fixture(scope="module")
def bert_fold(known_answer_classifier, training_settings, sentiment_sentences) -> dict:
    model, tokenizer = known_answer_classifier("bert", n_layers=2, n_heads=2)
    return fold("bert", model, tokenizer, training_settings, sentiment_sentences)


@pytest.mark.parametrize("family, n_layers, n_heads", [("roberta", 3, 4), ("distilbert", 4, 1), ("deberta-v2", 1, 2)])
def test_a_shape_free_variant_trained_on_bert_explains_another_family_and_shape(bert_fold, family, n_layers, n_heads,
                                                                               known_answer_classifier):
    model, tokenizer = known_answer_classifier(family, n_layers=n_layers, n_heads=n_heads)
    shape_free, paper = bert_fold["shape_free"], bert_fold["expnet_paper"]
    assert shape_free.columns == model_columns(SHAPE_FREE.feature_sets, model.config)  # the same columns
    check_compatible(shape_free, model, tokenizer, where="heldout_sst2/expnet_plus_shape_free")
    with pytest.raises(IncompatibleClassifierError, match="num_attention_heads|num_hidden_layers"):
        check_compatible(paper, model, tokenizer, where="heldout_sst2/expnet_paper")
    texts = [tokenizer(text)["input_ids"] for text in TEXTS]
    targets = [0, 1, 1]
    scores = build_method("expnet_plus", model=shape_free, layer=-1, vocabulary=token_vocabulary(tokenizer)).explain(
        model, tokenizer_batch(texts, targets, tokenizer)).scores
    assert_scores(scores, expected_scores(shape_free, model, tokenizer, texts, targets), f"bert -> {family}")
