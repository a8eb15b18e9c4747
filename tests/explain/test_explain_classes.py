"""A class to explain through the Python API and the CLI (`FoldExplainer.explain(target=..., contrast=...)`,
`explain --target/--contrast`): by name or index, one for all texts or one per text, each explanation saying which
class it explains; the class-agnostic methods said once per call; every bad input refused before any work."""
from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from learned_attribution.adapters.cli import main
from learned_attribution.core.errors import InputError
from learned_attribution.services.explain import FoldExplainer, StudentExplainer

TEXTS = ["the movie is great .", "a very boring film , but the actors were fun !", "bad"]


@pytest.fixture
def fold(tiny_models_dir):
    return FoldExplainer.from_fold("heldout_sst2", models_dir=tiny_models_dir, device="cpu")


def test_a_class_by_name_or_index_explains_that_class_and_says_so(fold):
    assert fold.classes == ["negative", "positive"]
    by_name = fold.explain(TEXTS, methods=["saliency", "input_x_gradient"], target="positive")
    by_index = fold.explain(TEXTS, methods=["saliency", "input_x_gradient"], target=1)
    predicted = fold.explain(TEXTS, methods=["saliency", "input_x_gradient"])
    for named, indexed, own in zip(by_name, by_index, predicted):
        assert named.word_scores == indexed.word_scores
        assert (named.explained, named.explained_label) == (1, "positive")
        assert named.explains_predicted == (own.predicted == 1)
        record = named.record()
        assert (record["explained"], record["explained_label"], record["contrast"]) == (1, "positive", None)
        assert own.record()["explained"] == own.predicted and own.explains_predicted
        if own.predicted == 1:
            assert named.word_scores == own.word_scores  # the predicted class asked for by name: the same map
        else:
            assert named.word_scores["input_x_gradient"] != own.word_scores["input_x_gradient"]


def test_one_class_per_text_and_a_contrast_explain_the_margin(fold):
    per_text = fold.explain(TEXTS, methods=["input_x_gradient"], target=["negative", 1, "0"])
    assert [e.explained for e in per_text] == [0, 1, 0]
    [positive] = fold.explain(TEXTS[:1], methods=["input_x_gradient"], target="positive")
    [negative] = fold.explain(TEXTS[:1], methods=["input_x_gradient"], target="negative")
    [margin] = fold.explain(TEXTS[:1], methods=["input_x_gradient"], target="positive", contrast="negative")
    assert (margin.contrast, margin.contrast_label, margin.explains_predicted) == (0, "negative", False)
    # input x gradient is linear in the explained logit: the margin's map is the difference of the two maps
    np.testing.assert_allclose(margin.token_scores["input_x_gradient"],
                               np.subtract(positive.token_scores["input_x_gradient"],
                                           negative.token_scores["input_x_gradient"]), rtol=1e-5, atol=1e-6)


def test_a_class_agnostic_method_is_said_once_per_call(fold, caplog):
    with caplog.at_level(logging.WARNING, logger="learned_attribution"):
        results = fold.explain(TEXTS, methods=["raw_attention", "saliency"], target="negative")
    said = [r for r in caplog.records if "class-agnostic" in r.getMessage()]
    assert len(said) == 1 and "raw_attention" in said[0].getMessage() and "saliency" not in said[0].getMessage()
    assert all(e.class_agnostic == ["raw_attention"] for e in results)
    assert [e.word_scores["raw_attention"] for e in results] == [
        e.word_scores["raw_attention"] for e in fold.explain(TEXTS, methods=["raw_attention"], target="positive")]


@pytest.mark.parametrize("target, contrast, message", [
    ("neutral", None, r"'neutral'.*negative.*positive"),
    ("positve", None, r"did you mean 'positive'"),
    ("Positive", None, r"did you mean 'positive'"),
    (2, None, r"2"),
    (-1, None, r"-1"),
    ([1, 0], None, r"target: 2 classes for 3 texts"),
    ([1, None, 0], None, r"target\[1\] is empty"),
    ([1, "", 0], None, r"target\[1\] is empty"),
    ("positive", "positive", r"text 0: the target 'positive' is also its contrast"),
    (None, "negative", r"contrast needs a target"),
])
def test_bad_classes_are_refused_in_one_line_before_any_work(fold, target, contrast, message, monkeypatch):
    monkeypatch.setattr(fold, "_explain_batch", lambda *a, **k: pytest.fail("work started"))
    with pytest.raises(InputError, match=message) as error:
        fold.explain(TEXTS, methods=["saliency"], target=target, contrast=contrast)
    assert "\n" not in str(error.value)


def test_a_student_explains_its_predicted_class_only(tmp_path, text_student_writer):
    student = StudentExplainer.from_folder(text_student_writer(tmp_path / "student"), device="cpu")
    with pytest.raises(InputError, match="student explains the predicted class only"):
        student.explain(["the film was good"], methods=["student"], target=0)


def test_the_cli_explains_the_class_asked_for(tiny_models_dir, capsys):
    assert main(["explain", "--fold", "heldout_sst2", "--models-dir", str(tiny_models_dir), "--device", "cpu",
                 "--method", "saliency", "--target", "negative", "--contrast", "positive", TEXTS[0]]) == 0
    record = json.loads(capsys.readouterr().out)
    assert (record["explained_label"], record["contrast_label"], record["explains_predicted"]) == (
        "negative", "positive", False)
    assert main(["explain", "--fold", "heldout_sst2", "--models-dir", str(tiny_models_dir), "--device", "cpu",
                 "--target", "neutral", TEXTS[0]]) == 2
    assert "neutral" in capsys.readouterr().err


def test_a_long_text_gets_the_projects_one_truncation_warning(fold, caplog, capfd):
    with caplog.at_level(logging.WARNING):
        [result] = fold.explain([" ".join(["great"] * 80)], methods=["saliency"])
    assert result.truncated
    assert [r.getMessage() for r in caplog.records if "longer than max_length" in r.getMessage()] != []
    assert "Token indices sequence length" not in capfd.readouterr().err
    assert not [r for r in caplog.records if "Token indices sequence length" in r.getMessage()]
