"""The attention student (core/models/learned/attention_student.py) in core only: new self-attention layers and a
token head over a tiny classifier's frozen hidden states, trained on teacher scores by the text students' one loop,
saved and loaded as an artifact, applied through the `student` method. Known answers: its scores are [B, T, C] and
a text's do not depend on the padding around it; the classifier is never trained (its state and gradients
untouched); two seeded fits give the same weights; the loaded student's scores equal the trained one's and the
method's are the network's own for the class explained, from one classifier pass; a student bound to one classifier
refuses another family or shape in one line; a teacher that scores each token by its position is learned (a random
network's scores are not), on every supported family its student trains and explains."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from learned_attribution.core.explainers import build_method
from learned_attribution.core.explainers.apply import tokenizer_batch
from learned_attribution.core.metrics.fidelity import mean_example_spearman
from learned_attribution.core.models.architectures import SUPPORTED_MODEL_TYPES
from learned_attribution.core.models.artifacts import (IncompatibleClassifierError, check_compatible,
                                                       classifier_fingerprint, classifier_signature, load_learned,
                                                       save_learned)
from learned_attribution.core.models.learned import (AttentionStudentSettings, InputPipeline, LearnedModel, Variant,
                                                     build_text_network, fit_text_variant, score_texts)
from learned_attribution.core.models.learned.attention_student import (AttentionTokenHead, classifier_hidden_states,
                                                                       hidden_state_cache)


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/models/conftest.py


def attention_variant(attention_layers=2, **overrides) -> Variant:
    return Variant(**{"name": "student_attention", "feature_sets": (), "network": "attention",
                      "network_settings": AttentionStudentSettings(attention_layers), "objective": "distill",
                      "stopping": "example_spearman", "learning_rate": 3e-3, **overrides})


def bound(student: LearnedModel, model, tokenizer) -> LearnedModel:
    """`student` with the context `services/amortize/student.fit_student` records: its classifier's shape and
    weights fingerprint."""
    student.context = {"kind": "student", "classifier": classifier_signature(model, tokenizer),
                       "classifier_fingerprint": classifier_fingerprint(model)}
    return student


@pytest.mark.parametrize("family", SUPPORTED_MODEL_TYPES)
def test_an_attention_student_trains_on_the_frozen_hidden_states_round_trips_and_explains_in_one_pass(
        family, tiny_classifier, training_settings, teacher_texts, tmp_path):
    model, tokenizer = tiny_classifier(family, n_layers=2, n_heads=2, hidden=16, intermediate=24, num_labels=3)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    train, val = teacher_texts(tokenizer, 16, 0), teacher_texts(tokenizer, 6, 1)
    settings = training_settings(batch_size=4, max_epochs=3, patience=3, seeds=1)
    student = fit_text_variant(attention_variant(), model, tokenizer, train, val, settings=settings)
    assert student.reads_token_ids and not student.shape_free and student.own_threshold is None
    assert len(student.history) == 3 and "val_spearman" in student.history[0]
    # Its shape is the classifier's own, read through the one table (DistilBERT's feed-forward width is hidden_dim).
    net = student.net
    assert isinstance(net, AttentionTokenHead) and len(net.blocks) == 2 and net.layer == 1
    assert (net.hidden_size, net.heads, net.feed_forward, net.num_labels) == (16, 2, 24, 3)
    # The classifier is untouched: the same weights, no gradient ever reached it; the student holds none of them.
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())
    assert not {id(p) for p in net.parameters()} & {id(p) for p in model.parameters()}
    with pytest.raises(TypeError, match="reads token ids"):
        student.predict(np.zeros((3, 0), np.float32))

    save_learned(bound(student, model, tokenizer), tmp_path / "student")
    # Its folder holds the new layers and the head, none of the classifier's weights.
    saved = load_file(str(tmp_path / "student" / "model.safetensors"))
    assert {key.split(".")[0] for key in saved} == {"blocks", "norm", "head"}
    loaded = load_learned(tmp_path / "student")
    check_compatible(loaded, model, tokenizer, where="student")  # its own classifier: no complaint
    texts = teacher_texts(tokenizer, 5, 2)
    trained = score_texts(student, texts, tokenizer, classifier=model)
    reloaded = score_texts(loaded, texts, tokenizer, classifier=model)
    for a, b in zip(trained["scores"], reloaded["scores"]):
        np.testing.assert_array_equal(a, b)

    # Applied as the `student` method: one classifier pass, the network's scores of the class explained, 0 at the
    # frame tokens and padding.
    batch = tokenizer_batch(list(texts["input_ids"]), list(texts["predicted"]), tokenizer)
    attribution = build_method("student", model=loaded).explain(model, batch)
    assert attribution.logits.shape == (len(texts), 3) and attribution.model_calls == 1
    torch.testing.assert_close(attribution.logits, model(input_ids=batch.input_ids,
                                                         attention_mask=batch.attention_mask).logits)
    scores = attribution.scores.numpy()
    assert (scores[batch.special_mask.numpy()] == 0).all()
    for row, expected in enumerate(trained["scores"]):
        np.testing.assert_allclose(scores[row][~batch.special_mask[row].numpy()], 1 / (1 + np.exp(-expected)),
                                   rtol=1e-5, atol=1e-6)


def test_its_scores_are_one_per_class_and_a_texts_scores_do_not_depend_on_the_padding_around_it(tiny_classifier):
    model, tokenizer = tiny_classifier("bert", num_labels=3)
    torch.manual_seed(0)
    net = AttentionTokenHead.for_classifier(model, 2).eval()
    short = tokenizer("the film was good")["input_ids"]
    long = tokenizer("a very boring plot and it was bad")["input_ids"]
    batch = tokenizer_batch([short, long], [0, 1], tokenizer)
    with torch.inference_mode():
        _, hidden = classifier_hidden_states(model, batch.input_ids, batch.attention_mask, net.layer)
        padded = net(hidden, batch.attention_mask)
        assert padded.shape == (2, len(long), 3)
        # Whatever sits at the padded positions (here noise) is never read.
        noisy = hidden.clone()
        noisy[0, len(short):] = torch.randn_like(noisy[0, len(short):]) * 100
        torch.testing.assert_close(net(noisy, batch.attention_mask)[0, :len(short)], padded[0, :len(short)])
        alone = tokenizer_batch([short], [0], tokenizer)
        _, hidden_alone = classifier_hidden_states(model, alone.input_ids, alone.attention_mask, net.layer)
        torch.testing.assert_close(net(hidden_alone, alone.attention_mask)[0], padded[0, :len(short)], rtol=0,
                                   atol=1e-5)
    # The same through the `student` method: the class explained, the classifier's pass included.
    student = LearnedModel(attention_variant(), InputPipeline([]), net)
    method = build_method("student", model=student)
    in_batch = method.explain(model, batch).scores[0, :len(short)]
    torch.testing.assert_close(method.explain(model, alone).scores[0], in_batch, rtol=0, atol=1e-5)


def test_the_hidden_states_are_computed_once_without_gradients_and_two_seeded_fits_give_the_same_weights(
        tiny_classifier, training_settings, teacher_texts):
    model, tokenizer = tiny_classifier("roberta")
    train, val = teacher_texts(tokenizer, 12, 0), teacher_texts(tokenizer, 4, 1)
    cache = hidden_state_cache(model, train, tokenizer, layer=1, batch_size=5)
    assert sorted(cache) == sorted(train["example_id"])
    for example_id, ids in zip(train["example_id"], train["input_ids"]):
        states = cache[example_id]
        assert states.shape == (len(ids), 16) and not states.requires_grad and states.grad_fn is None
        _, alone = classifier_hidden_states(model, torch.as_tensor([ids]), torch.ones(1, len(ids), dtype=torch.long), 1)
        torch.testing.assert_close(states, alone[0].detach(), rtol=0, atol=1e-5)
    settings = training_settings(batch_size=4, max_epochs=2, patience=2, seeds=1)
    first, second = (fit_text_variant(attention_variant(), model, tokenizer, train, val, settings=settings)
                     for _ in range(2))
    assert first.net.state_dict().keys() == second.net.state_dict().keys()
    assert all(torch.equal(value, second.net.state_dict()[key]) for key, value in first.net.state_dict().items())
    assert first.history == second.history
    other = fit_text_variant(attention_variant(), model, tokenizer, train, val,
                             settings=training_settings(batch_size=4, max_epochs=2, patience=2, seeds=1, seed=14))
    assert not torch.equal(first.net.head.weight, other.net.head.weight)  # the seed is the settings'


def test_an_attention_student_learns_a_teacher_that_scores_each_token_by_its_position(tiny_classifier,
                                                                                     training_settings, teacher_texts):
    """Training lowers the loss, and on texts it never saw the student ranks tokens by position (BERT's hidden states
    carry its absolute position embeddings), where the same network untrained does not."""
    model, tokenizer = tiny_classifier("bert")
    train, val, test = (teacher_texts(tokenizer, n, seed, by="position") for n, seed in ((48, 0), (16, 1), (30, 2)))
    torch.manual_seed(0)
    untrained = LearnedModel(attention_variant(), InputPipeline([]),
                             build_text_network(attention_variant(), model).eval())
    before = mean_example_spearman(score_texts(untrained, test, tokenizer, classifier=model), test)
    student = fit_text_variant(attention_variant(), model, tokenizer, train, val,
                               settings=training_settings(batch_size=8, max_epochs=30, patience=30, seeds=1))
    after = mean_example_spearman(score_texts(student, test, tokenizer, classifier=model), test)
    assert student.history[-1]["train_loss"] < 0.6 * student.history[0]["train_loss"]
    assert abs(before) < 0.5 and after > 0.8 and student.member_val_scores[0] > 0.8


@pytest.mark.parametrize("family, shape, which", [
    ("electra", {}, "another family (electra, not bert)"),
    ("bert", {"n_layers": 3}, "another shape (3 layers, not 2)"),
    ("bert", {"hidden": 32}, "another shape (hidden size 32, not 16)"),
])
def test_an_attention_student_refuses_a_classifier_of_another_family_or_shape_in_one_line(
        family, shape, which, tiny_classifier, tmp_path):
    model, tokenizer = tiny_classifier("bert")
    torch.manual_seed(0)
    net = AttentionTokenHead.for_classifier(model, 2)
    student = bound(LearnedModel(attention_variant(), InputPipeline([]), net), model, tokenizer)
    other, other_tokenizer = tiny_classifier(family, **shape)
    with pytest.raises(IncompatibleClassifierError, match=r"^[^\n]*$") as refused:
        check_compatible(student, other, other_tokenizer, where="student")
    assert which in str(refused.value)
    same_shape, _ = tiny_classifier("bert", seed=1)  # other weights: named by both fingerprints
    with pytest.raises(IncompatibleClassifierError, match="weights fingerprint"):
        check_compatible(student, same_shape, tokenizer, where="student")


def test_an_attention_variant_reads_the_hidden_states_and_is_trained_on_a_teacher():
    variant = attention_variant(attention_layers=3)
    assert "frozen hidden states, 3 new attention layers" in variant.describe() and not variant.shape_free
    with pytest.raises(ValueError, match=r"'student_attention': attention_layers=0 must be a positive integer"):
        attention_variant(attention_layers=0)
    with pytest.raises(ValueError, match="attention_layers=True"):
        attention_variant(attention_layers=True)
    with pytest.raises(ValueError, match=r"feature_sets: \[\]"):
        attention_variant(feature_sets=("attention",))
    with pytest.raises(ValueError, match="objective: distill"):
        attention_variant(objective="focal", stopping="example_auroc")
