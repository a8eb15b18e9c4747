"""The encoder student (core/models/learned/encoder.py) on EVERY supported family, in core only: a copy of a tiny
classifier's encoder with a token head, trained on teacher scores, saved and loaded as an artifact, applied through
the `student` method. Known answers: the frozen part stays the classifier's bit for bit and only the top blocks and
the head move; the loaded student's scores equal the trained one's; the method's scores are the network's own for
the class explained; and a teacher whose scores are a property of the token (the sentiment words high) is learned
from 48 texts, on texts the student never saw."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from learned_attribution.core.explainers import build_method
from learned_attribution.core.explainers.apply import tokenizer_batch
from learned_attribution.core.models.architectures import SUPPORTED_MODEL_TYPES, architecture
from learned_attribution.core.models.artifacts import load_learned, save_learned
from learned_attribution.core.models.learned import EncoderStudentSettings, Variant, fit_text_variant, score_texts
from learned_attribution.core.models.learned.encoder import EncoderTokenHead, encoder_scores
from learned_attribution.core.metrics.fidelity import mean_example_spearman


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/models/conftest.py


def encoder_variant(encoder_blocks=1, **overrides) -> Variant:
    return Variant(**{"name": "student_encoder", "feature_sets": (), "network": "encoder", "objective": "distill",
                      "stopping": "example_spearman", "network_settings": EncoderStudentSettings(encoder_blocks),
                      "learning_rate": 3e-3, **overrides})


@pytest.mark.parametrize("family", SUPPORTED_MODEL_TYPES)
def test_an_encoder_student_trains_its_top_blocks_only_and_round_trips(family, tiny_classifier, training_settings,
                                                                       teacher_texts, tmp_path):
    model, tokenizer = tiny_classifier(family)
    before = {k: v.clone() for k, v in model.base_model.state_dict().items()}
    train, val = teacher_texts(tokenizer, 16, 0), teacher_texts(tokenizer, 6, 1)
    student = fit_text_variant(encoder_variant(), model, tokenizer, train, val,
                                  settings=training_settings(batch_size=4, max_epochs=2, patience=2, seeds=1))
    assert student.reads_token_ids and not student.shape_free and student.own_threshold is None
    # The classifier itself is untouched; in the copy, only the last block (and the head) moved.
    assert all(torch.equal(before[k], v) for k, v in model.base_model.state_dict().items())
    copy = student.net.encoder
    last = {id(p) for p in architecture(copy).blocks(copy)[-1].parameters()}
    for name, parameter in copy.named_parameters():
        assert parameter.requires_grad == (id(parameter) in last), name
        assert torch.equal(parameter, before[name]) != (id(parameter) in last), name
    with pytest.raises(TypeError, match="reads token ids"):
        student.predict(np.zeros((3, 0), np.float32))

    save_learned(student, tmp_path / "student")
    loaded = load_learned(tmp_path / "student")
    texts = teacher_texts(tokenizer, 5, 2)
    trained, reloaded = score_texts(student, texts, tokenizer), score_texts(loaded, texts, tokenizer)
    for a, b in zip(trained["scores"], reloaded["scores"]):
        np.testing.assert_array_equal(a, b)

    # Applied as the `student` method: the network's scores of the class explained, 0 at [CLS], [SEP], padding.
    batch = tokenizer_batch(list(texts["input_ids"]), list(texts["predicted"]), tokenizer)
    attribution = build_method("student", model=loaded).explain(model, batch)
    assert attribution.logits.shape == (len(texts), model.config.num_labels) and attribution.model_calls == 2
    scores = attribution.scores.numpy()
    assert (scores[batch.special_mask.numpy()] == 0).all()
    for row, expected in enumerate(trained["scores"]):
        np.testing.assert_allclose(scores[row][~batch.special_mask[row].numpy()], 1 / (1 + np.exp(-expected)),
                                   rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_an_encoder_student_learns_a_teacher_that_scores_the_token_on_texts_it_never_saw(tiny_classifier,
                                                                                        training_settings,
                                                                                        teacher_texts):
    model, tokenizer = tiny_classifier("bert")
    train, val, test = (teacher_texts(tokenizer, n, seed) for n, seed in ((48, 0), (16, 1), (30, 2)))
    settings = training_settings(batch_size=8, max_epochs=30, patience=30, seeds=1)
    before = mean_example_spearman(encoder_scores(EncoderTokenHead.from_classifier(model, 2), test, tokenizer), test)
    student = fit_text_variant(encoder_variant(encoder_blocks=2), model, tokenizer, train, val, settings=settings)
    after = mean_example_spearman(score_texts(student, test, tokenizer), test)
    assert after > 0.75 and after > before + 0.4


def test_an_encoder_variant_reads_the_text_and_is_trained_on_a_teacher():
    assert "copy of the classifier's encoder, its top 2 blocks" in encoder_variant(encoder_blocks=2).describe()
    with pytest.raises(ValueError, match=r"feature_sets: \[\]"):
        encoder_variant(feature_sets=("attention",))
    with pytest.raises(ValueError, match="objective: distill"):
        encoder_variant(objective="focal", stopping="example_auroc")
    with pytest.raises(ValueError, match="encoder_blocks=0"):
        encoder_variant(encoder_blocks=0)
    with pytest.raises(ValueError, match="feature_sets"):
        Variant(name="no_inputs", feature_sets=())  # only the encoder student reads no signal


def test_an_encoder_student_of_a_shallower_classifier_trains_every_block(tiny_classifier):
    model, _ = tiny_classifier("bert", n_layers=2)
    net = EncoderTokenHead.from_classifier(model, 4)
    assert net.trainable_blocks == 2 and net.architecture()["trainable_blocks"] == 2
    assert all(p.requires_grad for p in architecture(net.encoder).blocks(net.encoder).parameters())
    assert not any(p.requires_grad for p in net.encoder.embeddings.parameters())
