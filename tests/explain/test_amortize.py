"""Amortized students (services/amortize): the teacher's resumable parts, in process and on a real 2-worker
Dask LocalCluster, the student fitted and applied on two families (tiny BERT, tiny RoBERTa), its binding to its own
classifier, the `fit` and `explain --explainer` commands, and every bad input of the issue."""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from learned_attribution.adapters.cli import TEACHER_UNFINISHED, main
from learned_attribution.core.atomic import partial_name
from learned_attribution.core.models import artifacts
from learned_attribution.core.models.architectures import UnsupportedArchitectureError
from learned_attribution.core.models.loading import TrainedClassifier, load_classifier
from learned_attribution.services import amortize
from learned_attribution.services.amortize import student_bundle
from learned_attribution.services.amortize import teacher as teacher_module
from learned_attribution.services.amortize.examples import unlabeled_examples
from learned_attribution.services.amortize.scores import fidelity_table, scores_of
from learned_attribution.services.config import (DEFAULT_TRAINING, DEFAULT_VARIANTS, AmortizeSettings,
                                                            amortize_settings)
from learned_attribution.core.explainers.teacher import Teacher
from learned_attribution.services.amortize.teacher import TeacherUnfinished, teacher_attributions
from learned_attribution.services.deadline import starts_part
from learned_attribution.services.bundle import write_bundle
from learned_attribution.services.distributed import DaskSettings
from learned_attribution.services.explain import StudentExplainer

WORDS = ["the", "movie", "is", "great", "a", "bad", "film", "so", "boring", "and", "slow", "fun", "story", "plot",
         "was", "very", "dull", "love", "it", "not", "good", "funny", "sad", "end", "sharp", "actors"]


def texts(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(3, 9)))) for _ in range(n)]


@pytest.fixture
def classifier(classifier_writer, tmp_path):
    return load_classifier(classifier_writer(tmp_path / "classifier", seed=3))


def quick_settings(**overrides) -> AmortizeSettings:
    base = dict(teacher=Teacher("occlusion", {}), held_out_texts=6, reference_factor=2, part_size=8, batch_size=4,
                cost_texts=3, n_boot=50, max_texts=None,
                training={**DEFAULT_TRAINING, "hidden": 8, "learning_rate": 5e-3, "batch_size": 8, "max_epochs": 6,
                          "patience": 3, "seeds": 2})
    return AmortizeSettings(**{**base, **overrides})


def save_student(folder, result, settings, classifier):
    """The student's folder, as `learned-attribution fit` writes it (its bundle: student, card, tables, report)."""
    return write_bundle(student_bundle(result, settings, classifier, f"Student of {folder.name}"), folder)


def test_a_teacher_checks_its_settings_and_scales_its_budget():
    shap = Teacher("kernel_shap", {"n_samples": 50, "seed": 3})
    assert shap.budget == 50 and shap.at_budget(10).settings == {"n_samples": 500, "seed": 4}  # an independent draw
    assert Teacher("integrated_gradients", {}).at_budget(10).settings == {"n_steps": 200}
    assert Teacher("occlusion").at_budget(10) == Teacher("occlusion")  # exact: no budget to raise
    with pytest.raises(ValueError, match="teacher 'saliency' is not one of"):
        Teacher("saliency")
    with pytest.raises(ValueError, match="n_samples"):
        Teacher("lime", {"n_samples": 0})


def test_a_default_teacher_has_the_budget_and_seed_of_its_kind():
    assert Teacher.default() == Teacher("kernel_shap", {"n_samples": 200, "seed": 0}) == AmortizeSettings().teacher
    assert Teacher.default("lime", 30, seed=4).settings == {"n_samples": 30, "seed": 4}
    assert Teacher.default("integrated_gradients").settings == {}  # the method's own n_steps
    assert Teacher.default("integrated_gradients", 8).settings == {"n_steps": 8}
    assert Teacher.default("occlusion", seed=5).settings == {}  # deterministic: no seed to draw with
    with pytest.raises(ValueError, match="the occlusion teacher has no budget"):
        Teacher.default("occlusion", 10)
    with pytest.raises(ValueError, match="teacher 'saliency' is not one of"):
        Teacher.default("saliency")


def test_training_settings_merge_onto_the_defaults_and_amortize_layer_is_refused():
    settings = AmortizeSettings(training={"hidden": 8})
    assert settings.training == {**DEFAULT_TRAINING, "hidden": 8}
    assert settings.training_settings().hidden == 8
    assert amortize_settings({"student": {"training": {"seeds": 1}}}, -1).training == {**DEFAULT_TRAINING, "seeds": 1}
    with pytest.raises(ValueError, match="amortize.layer: .*explained_layer"):
        amortize_settings({"layer": 2}, -1)


@pytest.mark.slow
def test_texts_too_short_are_skipped_and_counted_and_all_too_short_is_an_error(classifier, caplog):
    examples, skipped = unlabeled_examples(classifier, ["good", "the movie is great", "   ", "bad film"], ids=list("abcd"))
    assert examples["example_id"].tolist() == ["b", "d"]
    assert dict(zip(skipped["example_id"], skipped["reason"])) == {"c": "empty", "a": "1 real token(s), fewer than 2"}
    assert "2 of 4 texts skipped" in caplog.text
    assert set(examples.columns) >= {"input_ids", "predicted", "probability"}
    with pytest.raises(ValueError, match="none of the 2 texts has 2 or more real tokens"):
        unlabeled_examples(classifier, ["good", "bad"])


def test_teacher_parts_resume_without_recomputing_and_never_reuse_other_inputs(classifier, tmp_path, monkeypatch):
    examples, _ = unlabeled_examples(classifier, texts(20))
    teacher = Teacher("kernel_shap", {"n_samples": 16, "seed": 0})
    real = teacher_module._write_part
    written = []

    def killed_after_two(path, chunk, run):  # the run is killed while the third part is being computed
        if len(written) == 2:
            raise KeyboardInterrupt
        written.append(path.name)
        real(path, chunk, run)

    monkeypatch.setattr(teacher_module, "_write_part", killed_after_two)
    with pytest.raises(KeyboardInterrupt):
        teacher_attributions(classifier, examples, teacher, tmp_path / "cache", part_size=6, progress=False)
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == sorted(written)  # complete parts only
    monkeypatch.setattr(teacher_module, "_write_part", real)
    resumed = teacher_attributions(classifier, examples, teacher, tmp_path / "cache", part_size=6, progress=False)
    assert resumed.reused_parts == 2 and resumed.n_computed == 20 - 12
    fresh = teacher_attributions(classifier, examples, teacher, tmp_path / "fresh", part_size=6, progress=False)
    assert resumed.scores["example_id"].tolist() == examples["example_id"].tolist()
    for a, b in zip(resumed.scores["scores"], fresh.scores["scores"]):
        np.testing.assert_array_equal(a, b)
    again = teacher_attributions(classifier, examples, teacher, tmp_path / "cache", part_size=6, progress=False)
    assert again.n_computed == 0 and again.reused_parts == 4
    # Other settings, or another classifier's weights: new parts, never the cached ones.
    other = teacher_attributions(classifier, examples, Teacher("kernel_shap", {"n_samples": 16, "seed": 1}),
                                 tmp_path / "cache", part_size=6, progress=False)
    assert other.n_computed == 20
    with_noise = TrainedClassifier(classifier.model, classifier.tokenizer)
    import torch

    with torch.no_grad():
        next(with_noise.model.parameters()).add_(0.01)
    assert teacher_attributions(with_noise, examples, teacher, tmp_path / "cache", part_size=6,
                                progress=False).n_computed == 20


def test_a_part_cut_short_left_partial_or_of_other_texts_is_recomputed_never_read(classifier, tmp_path, caplog):
    """Complete or absent: a file under a part's name that does not read back as that part is recomputed, and the
    writer's temporary file left by a kill is never read."""
    examples, _ = unlabeled_examples(classifier, texts(18))
    teacher, cache = Teacher("occlusion"), tmp_path / "cache"
    first = teacher_attributions(classifier, examples, teacher, cache, part_size=6, progress=False)
    cut, killed, other = sorted(cache.glob("part-*.parquet"))
    whole = cut.read_bytes()
    cut.write_bytes(whole[:len(whole) // 2])  # cut short (a copy, a full disk, a filesystem without atomic rename)
    killed.rename(partial_name(killed))  # killed while its part was written: the writer's file, never renamed
    partial_name(killed).write_bytes(partial_name(killed).read_bytes()[:100])
    pd.read_parquet(other).assign(example_id=list("abcdef")).to_parquet(other)  # a part of other texts
    again = teacher_attributions(classifier, examples, teacher, cache, part_size=6, progress=False)
    assert again.reused_parts == 0 and again.n_computed == 18  # all three recomputed, none read
    assert "does not read as a Parquet file" in caplog.text and "does not hold this part's 6 texts" in caplog.text
    assert sorted(p.name for p in cache.iterdir()) == sorted(p.name for p in (cut, killed, other))  # no partial left
    for a, b in zip(again.scores["scores"], first.scores["scores"]):
        np.testing.assert_array_equal(a, b)
    assert teacher_attributions(classifier, examples, teacher, cache, part_size=6, progress=False).reused_parts == 3


def test_a_part_starts_only_when_it_would_end_by_the_deadline():
    assert starts_part(100.0, 90.0, None) and not starts_part(100.0, 101.0, None)  # the first part: before it
    assert starts_part(100.0, 90.0, 10.0) and not starts_part(100.0, 90.0, 10.5)  # the next: ends by it
    assert starts_part(float("inf"), 1e12, 1e6)  # no limit


def test_a_time_limited_teacher_stops_cleanly_and_the_next_invocation_continues(classifier, tmp_path, monkeypatch):
    """A teacher longer than one invocation runs as several: each stops with `TeacherUnfinished` naming the parts
    done, keeps them complete, and the next starts after them; the last one returns the uninterrupted run's
    scores."""
    examples, _ = unlabeled_examples(classifier, texts(18))
    teacher, cache = Teacher("occlusion"), tmp_path / "cache"
    with pytest.raises(TeacherUnfinished, match=r"0 of 3 parts in .* run the same command again to continue"):
        teacher_attributions(classifier, examples, teacher, cache, part_size=6, progress=False, deadline=0.0)
    assert not list(cache.iterdir())  # the deadline had passed: nothing started
    fresh = teacher_attributions(classifier, examples, teacher, tmp_path / "fresh", part_size=6, progress=False)
    monkeypatch.setattr(teacher_module, "starts_part", lambda deadline, now, per_part: per_part is None)  # one part
    for done in (1, 2):
        with pytest.raises(TeacherUnfinished, match=f"{done} of 3 parts"):
            teacher_attributions(classifier, examples, teacher, cache, part_size=6, progress=False, deadline=1.0)
        assert len(list(cache.glob("part-*.parquet"))) == done and not list(cache.glob("*.partial*"))
    last = teacher_attributions(classifier, examples, teacher, cache, part_size=6, progress=False, deadline=1.0)
    assert last.reused_parts == 2 and last.n_computed == 6
    for a, b in zip(last.scores["scores"], fresh.scores["scores"]):
        np.testing.assert_array_equal(a, b)


def test_fit_with_teacher_minutes_spent_exits_75_keeping_its_parts_and_writes_no_student(classifier_writer, tmp_path,
                                                                                       capsys):
    corpus = tmp_path / "texts.txt"
    corpus.write_text("\n".join(texts(30)) + "\n")
    code = main(["fit", "--classifier", str(classifier_writer(tmp_path / "classifier", seed=1)), "--input",
                 str(corpus), "--teacher", "occlusion", "--held-out", "5", "--output", str(tmp_path / "student"),
                 "--device", "cpu", "--teacher-minutes", "1e-9"])
    assert code == TEACHER_UNFINISHED == 75 and not (tmp_path / "student").exists()
    [line] = [line for line in capsys.readouterr().err.splitlines() if line.startswith("stopped")]  # besides tqdm's
    assert line.startswith("stopped after --teacher-minutes 1e-09: teacher occlusion: 0 of 1 parts in ")
    assert line.endswith("run the same command again to continue")


def test_a_teacher_failing_on_some_texts_lists_them_and_keeps_the_rest(classifier, tmp_path, monkeypatch, caplog):
    from learned_attribution.core.explainers.perturbation import Occlusion

    examples, _ = unlabeled_examples(classifier, ["the movie is great", "a bad film so boring", "fun story"],
                                     ids=["ok1", "long", "ok2"])
    real = Occlusion.explain_content

    def fails_on_five_tokens(self, forward, content_ids, mask_token_id):
        if content_ids.shape[1] == 5:
            raise RuntimeError("teacher broke")
        return real(self, forward, content_ids, mask_token_id)

    monkeypatch.setattr(Occlusion, "explain_content", fails_on_five_tokens)
    run = teacher_attributions(classifier, examples, Teacher("occlusion"), tmp_path / "c", progress=False)
    assert run.scores["example_id"].tolist() == ["ok1", "ok2"]
    assert run.failures.to_dict("records") == [{"example_id": "long", "error": "RuntimeError: teacher broke"}]
    assert "failed on 1 of 3 texts" in caplog.text


@pytest.mark.slow
def test_the_teacher_on_dask_gives_the_in_process_scores(classifier, tmp_path):
    examples, _ = unlabeled_examples(classifier, texts(12, seed=1))
    teacher = Teacher("kernel_shap", {"n_samples": 16, "seed": 0})
    local = teacher_attributions(classifier, examples, teacher, tmp_path / "local", part_size=6, progress=False)
    dask = DaskSettings("local", n_workers=2, threads_per_worker=1, methods=None, batches_per_task=1, retries=0,
                        device="cpu")
    remote = teacher_attributions(classifier, examples, teacher, tmp_path / "dask", part_size=6, batch_size=2,
                                  dask=dask, progress=False)
    assert remote.scores["example_id"].tolist() == local.scores["example_id"].tolist()
    for a, b in zip(remote.scores["scores"], local.scores["scores"]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_fidelity_known_answers():
    reference = pd.DataFrame({"example_id": ["a", "b"], "scores": [np.array([1.0, 2, 3, 4]), np.array([3.0, 1, 2])]})
    reversed_ = reference.assign(scores=[s[::-1].copy() for s in reference["scores"]])
    table = fidelity_table({"same": reference, "reversed": reversed_}, reference, n_boot=20).set_index("method")
    assert table.at["same", "spearman"] == 1.0 and table.at["same", "top10"] == 1.0 and table.at["same", "top20"] == 1.0
    assert table.at["reversed", "spearman"] == pytest.approx((-1.0 + 0.5) / 2)
    assert table.at["same", "n_examples"] == 2
    assert table.at["reversed", "top5_tokens"] == 1.0  # k = 5 capped at each text's 4 and 3 tokens: all of them


def test_one_table_per_classifier_puts_each_measurement_of_each_method_in_its_cell():
    from learned_attribution.services.reporting.amortize import (amortize_summary, classifier_table,
                                                                  classifier_table_markdown)

    teacher = "teacher (kernel_shap (n_samples 200, seed 0))"

    def measured(methods, metric, values):  # each value with the interval [value - 0.05, value + 0.05]
        return pd.DataFrame({"method": methods, metric: values, f"{metric}_low": [v - 0.05 for v in values],
                             f"{metric}_high": [v + 0.05 for v in values]})

    fidelity = measured(["student", teacher], "spearman", [0.71, 0.62]).merge(
        measured(["student", teacher], "top5_tokens", [0.53, 0.44])).assign(n_examples=3, top10=0.9)
    faithfulness = measured(["student", teacher, "saliency"], "comprehensiveness", [0.31, 0.27, 0.19]).merge(
        measured(["student", teacher, "saliency"], "sufficiency", [0.11, 0.13, 0.17]))
    cost = pd.DataFrame({"method": ["forward", "student", "saliency", teacher], "n_examples": 3,
                         "ratio_to_forward": [1.0, 0.47, 0.45, 0.0081]})
    plausibility = measured(["student", "saliency", "expnet_plus", "student", "gae"], "auroc",
                            [0.61, 0.72, 0.66, 0.93, 0.58]).assign(subset=["all", "all", "all", "correct", "all"],
                                                                   rule="matched", f1=0.4)
    table = classifier_table(fidelity, faithfulness, cost, plausibility, task="sst2")
    assert list(table["method"]) == ["student", teacher, "saliency", "expnet_plus"]  # not forward, not gae
    cells = table.set_index("method")
    assert (cells["task"] == "sst2").all()
    assert cells.at["student", "spearman"] == 0.71 and cells.at[teacher, "spearman_low"] == pytest.approx(0.57)
    assert cells.at[teacher, "top5_tokens"] == 0.44 and cells.at["student", "top5_tokens_high"] == pytest.approx(0.58)
    assert cells.at["saliency", "comprehensiveness"] == 0.19 and cells.at[teacher, "sufficiency"] == 0.13
    assert cells.at[teacher, "ratio_to_forward"] == 0.0081 and cells.at["saliency", "ratio_to_forward"] == 0.45
    assert cells.at["student", "auroc"] == 0.61  # all texts, matched budget: not the correct subset's 0.93
    assert cells.at["expnet_plus", "auroc_high"] == pytest.approx(0.71)
    assert np.isnan(cells.at["saliency", "spearman"]) and np.isnan(cells.at["expnet_plus", "ratio_to_forward"])
    assert np.isnan(cells.at[teacher, "auroc"])  # the fold's rows have no teacher at this budget
    own = classifier_table(fidelity, faithfulness, cost, None, task="own")
    assert list(own.columns) == list(table.columns) and own["auroc"].isna().all()
    assert list(own["method"]) == ["student", teacher, "saliency"]
    markdown = classifier_table_markdown(table)
    assert "| student | 0.710 [0.660, 0.760] | 0.530 [0.480, 0.580] | 0.310 [0.260, 0.360] | 0.110 [0.060, 0.160] " \
           "| 0.4700 | 0.610 [0.560, 0.660] |" in markdown
    summary = amortize_summary(table, own)
    assert summary.index("## sst2") < summary.index("## own") and summary.count(markdown) == 1


@pytest.mark.slow
@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_a_student_is_fitted_saved_and_applied_to_new_text_on_two_families(family, tiny_classifier, classifier_writer,
                                                                           tmp_path):
    if family == "bert":
        classifier = load_classifier(classifier_writer(tmp_path / "classifier", seed=1))
    else:
        model, tokenizer = tiny_classifier("roberta", n_layers=2, n_heads=2)
        model.save_pretrained(tmp_path / "classifier")
        tokenizer.save_pretrained(tmp_path / "classifier")
        classifier = load_classifier(tmp_path / "classifier")
    settings = quick_settings()
    result = amortize.amortize(classifier, texts(40), None, settings, tmp_path / "cache", progress=False)
    assert result.n_train == 34 and result.n_held_out == 6
    assert result.variants["selected"].sum() == 1 and set(result.variants["variant"]) == set(DEFAULT_VARIANTS)
    teacher_row = result.fidelity[result.fidelity["method"].str.startswith("teacher")].iloc[0]
    assert teacher_row["spearman"] == pytest.approx(1.0)  # occlusion is exact: the reference is itself
    assert set(result.faithfulness["method"]) == {"student", "saliency", teacher_row["method"]}
    assert (result.cost.set_index("method").at["forward", "ratio_to_forward"]) == pytest.approx(1.0)
    folder = save_student(tmp_path / "student", result, settings, classifier)
    assert {p.name for p in folder.iterdir()} >= {"student", "fold.json", "report.md", "fidelity.csv", "cost.csv"}
    assert not list(folder.rglob("*.pkl")) and not list(folder.rglob("*.pt"))  # safetensors + JSON
    explainer = StudentExplainer.from_folder(folder)
    assert explainer.default_methods == ["student", "occlusion"] and "expnet_plus" not in explainer.methods
    [explained] = explainer.explain(["the movie is great and fun"])
    assert len(explained.word_scores["student"]) == 6 and sum(explained.rationale["student"]) == 1  # top 20%: 1 word
    # The same scores as the student gives the held-out texts through the evaluation path.
    held = unlabeled_examples(classifier, ["the movie is great and fun"])[0]
    scores, _ = scores_of(classifier, held, {"student": explainer.method("student")})
    np.testing.assert_allclose(scores["scores"].iloc[0], explained.token_scores["student"], rtol=1e-5)


@pytest.mark.slow
def test_the_variants_table_says_how_well_a_student_fits_its_own_labels(classifier, training_settings):
    """Known answer: a teacher whose scores are a signal the student reads (each token's relative position) is
    reproduced on the training texts (Spearman near 1); scores it cannot read (noise) are not."""
    from learned_attribution.services.config import student_variants
    from learned_attribution.services.amortize.student import fit_student, student_signals

    examples = unlabeled_examples(classifier, texts(40))[0]
    signals = student_signals(classifier, examples, ["position"], -1, 8)
    by_example = signals.groupby("example_id", sort=False)
    readable = pd.DataFrame({"example_id": list(by_example.groups),
                             "scores": [g.sort_values("position")["relative_position"].to_numpy() for _, g in by_example]})
    rng = np.random.default_rng(0)
    noise = readable.assign(scores=readable["scores"].map(lambda s: rng.normal(size=len(s))))
    variants = student_variants({"position_only": {"feature_sets": ["position"]}})
    training = training_settings(hidden=8, learning_rate=1e-2, batch_size=8, max_epochs=40, patience=40, seeds=1)
    fitted = [fit_student(classifier, examples, signals, labels, variants, training)[1].iloc[0]
              for labels in (readable, noise)]
    assert fitted[0]["train_spearman"] > 0.95 and fitted[0]["val_spearman"] > 0.95
    assert fitted[1]["train_spearman"] < 0.5


@pytest.mark.slow
def test_a_student_refuses_another_classifier_naming_both(classifier_writer, tmp_path):
    classifier = load_classifier(classifier_writer(tmp_path / "classifier", seed=1))
    settings = quick_settings(reference_factor=0)
    result = amortize.amortize(classifier, texts(30), None, settings, tmp_path / "cache", progress=False)
    assert result.fidelity.empty  # no reference asked for
    folder = save_student(tmp_path / "student", result, settings, classifier)
    other = load_classifier(classifier_writer(tmp_path / "other", seed=2))  # same shape, other weights
    explainer = StudentExplainer.from_folder(folder, classifier=other)
    assert "student" in explainer.incompatible and explainer.default_methods == ["occlusion"]
    with pytest.raises(artifacts.IncompatibleClassifierError, match=r"classifier.*fingerprint .*this classifier"):
        explainer.explain(["the movie is great"], methods=["student"])
    message = explainer.incompatible["student"]
    assert str(tmp_path / "classifier") in message and str(tmp_path / "other") in message


@pytest.fixture(scope="module", params=["student_encoder", "student_attention"])
def text_student(request, text_student_writer, tmp_path_factory):
    """A tiny text student (the encoder student, then the attention student) of a 2-layer, 2-head, 16-wide BERT
    classifier (tests/conftest.py)."""
    return text_student_writer(tmp_path_factory.mktemp(request.param), request.param)


@pytest.mark.parametrize("family, shape, which", [
    ("electra", {}, "another family (electra, not bert)"),  # the same tokenizer class, layers, heads and width
    ("bert", {"n_layers": 3}, "another shape (3 layers, not 2)"),
    ("bert", {"hidden": 32}, "another shape (hidden size 32, not 16)"),
    ("roberta", {"n_heads": 4}, "another family (roberta, not bert) and another shape (4 heads, not 2) and another "
                                "tokenizer (RobertaTokenizer, not BertTokenizer)"),
])
def test_a_student_asked_for_a_classifier_of_another_family_or_shape_refuses_in_one_line_saying_which(
        text_student, tiny_classifier, family, shape, which, tmp_path, capsys):
    model, tokenizer = tiny_classifier(family, **shape)
    model.save_pretrained(tmp_path / "other")
    tokenizer.save_pretrained(tmp_path / "other")
    explainer = StudentExplainer.from_folder(text_student, classifier=str(tmp_path / "other"))
    message = explainer.incompatible["student"]
    assert which in message and "\n" not in message and str(text_student.parent / "classifier") in message
    with pytest.raises(artifacts.IncompatibleClassifierError, match=re.escape(which)):
        explainer.explain(["the film was good"], methods=["student"])
    assert explainer.explain(["the film was good"], methods=["occlusion"])  # its baselines still run there
    capsys.readouterr()
    assert main(["explain", "--explainer", str(text_student), "--classifier", str(tmp_path / "other"),
                 "the film was good"]) == 2
    [line] = [line for line in capsys.readouterr().err.splitlines() if "error" in line]  # besides loading bars
    assert line.startswith("error: ") and which in line and "--method NAME" in line


def test_an_unsupported_family_is_refused_before_any_work(tmp_path):
    from transformers import AlbertConfig, AlbertForSequenceClassification

    model = AlbertForSequenceClassification(AlbertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1,
                                                         num_attention_heads=2, intermediate_size=16,
                                                         embedding_size=8))
    with pytest.raises(UnsupportedArchitectureError, match="albert"):
        amortize.amortize(TrainedClassifier(model, None), ["a b c"], None, quick_settings(), tmp_path / "c",
                          progress=False)


@pytest.mark.slow
def test_the_fit_command_trains_a_student_and_explain_applies_it(classifier_writer, tmp_path, capsys):
    classifier = classifier_writer(tmp_path / "classifier", seed=1)
    corpus = tmp_path / "texts.txt"
    corpus.write_text("\n".join(texts(30)) + "\n\n")
    student = tmp_path / "student"
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    code = main(["fit", "--classifier", str(classifier), "--input", str(corpus), "--teacher", "occlusion",
                 "--held-out", "5", "--reference-factor", "0", "--output", str(student), "--device", "cpu",
                 "--tracking-uri", uri])
    assert code == 0 and (student / "student" / "model.safetensors").is_file()
    from mlflow.tracking import MlflowClient

    [version] = MlflowClient(tracking_uri=uri).search_model_versions("name = 'amortize-student'")
    run = MlflowClient(tracking_uri=uri).get_run(version.run_id)
    assert run.info.status == "FINISHED" and "cost.student.ratio_to_forward" in run.data.metrics
    assert (tmp_path / "student.teacher").is_dir()  # the resumable parts, beside the output
    card = json.loads((student / "fold.json").read_text())
    assert card["kind"] == "student" and card["teacher"] == {"method": "occlusion", "settings": {}}
    out = tmp_path / "out.jsonl"
    assert main(["explain", "--explainer", str(student), "the movie is great", "--output", str(out)]) == 0
    record = json.loads(out.read_text().splitlines()[0])
    assert set(record["scores"]) == {"student", "occlusion"} and record["variants"] == {"student": card_variant(student)}
    capsys.readouterr()
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    assert main(["fit", "--classifier", str(classifier), "--input", str(empty), "--output", str(tmp_path / "s2")]) == 2
    assert "no texts" in capsys.readouterr().err
    short = tmp_path / "short.txt"
    short.write_text("good\nbad\n")
    assert main(["fit", "--classifier", str(classifier), "--input", str(short), "--output", str(tmp_path / "s3")]) == 2
    assert "2 or more real tokens" in capsys.readouterr().err
    unreadable = tmp_path / "binary.txt"
    unreadable.write_bytes(b"\xff\xfe bad bytes\n")
    assert main(["fit", "--classifier", str(classifier), "--input", str(unreadable), "--output",
                 str(tmp_path / "s4")]) == 2
    assert "not valid UTF-8" in capsys.readouterr().err
    assert main(["explain", "--explainer", str(student), "--fold", "heldout_sst2", "x y"]) == 2


@pytest.mark.slow
def test_the_python_fit_trains_the_student_the_fit_command_trains(classifier_writer, tmp_path, capsys):
    """`learned_attribution.fit` with a teacher that has no budget (occlusion) and partial training settings makes
    the same student, bit for bit, as the `fit` command with the same settings."""
    import learned_attribution

    classifier = classifier_writer(tmp_path / "classifier", seed=1)
    corpus = texts(30)
    (tmp_path / "texts.txt").write_text("\n".join(corpus) + "\n")
    student = learned_attribution.fit(str(classifier), corpus, tmp_path / "api", teacher="occlusion",
                                      held_out_texts=5, reference_factor=0, device="cpu")
    assert isinstance(student, learned_attribution.StudentExplainer)
    assert main(["fit", "--classifier", str(classifier), "--input", str(tmp_path / "texts.txt"), "--teacher",
                 "occlusion", "--held-out", "5", "--reference-factor", "0", "--output", str(tmp_path / "cli"),
                 "--device", "cpu"]) == 0
    capsys.readouterr()
    assert (tmp_path / "api/student/model.safetensors").read_bytes() == \
        (tmp_path / "cli/student/model.safetensors").read_bytes()
    [from_api] = student.explain(["the movie is great"], methods=["student"])
    [from_cli] = StudentExplainer.from_folder(tmp_path / "cli").explain(["the movie is great"], methods=["student"])
    assert from_api.token_scores == from_cli.token_scores
    small = learned_attribution.fit(str(classifier), corpus, tmp_path / "small", teacher="occlusion",
                                    held_out_texts=5, reference_factor=0, device="cpu",
                                    training={"hidden": 4, "seeds": 1, "max_epochs": 2})
    config = json.loads((tmp_path / "small/student/config.json").read_text())
    assert config["architecture"]["hidden"] == 4 and config["member_best_epochs"] == [config["best_epoch"]]
    assert len(config["history"]) <= 2  # max_epochs 2; the rest of the training settings are the defaults
    assert small.methods[0] == "student"


def test_the_default_student_settings_are_the_pipelines(project_root):
    """The `fit` command and the amortize pipeline make the same student: the defaults live in the code only, and the
    shipped `amortize` block, parsed as the pipeline parses it, gives them (at the explained layer)."""
    import yaml

    params = yaml.safe_load((project_root / "conf/base/parameters_amortize.yml").read_text())["amortize"]
    layer = yaml.safe_load((project_root / "conf/base/parameters.yml").read_text())["explained_layer"]
    parsed = amortize_settings(params, layer)  # and they parse
    assert parsed == AmortizeSettings(layer=layer)
    assert [v.name for v in parsed.variants] == list(DEFAULT_VARIANTS)
    assert {v.name: v.feature_sets for v in parsed.variants} == {name: tuple(recipe["feature_sets"])
                                                                 for name, recipe in DEFAULT_VARIANTS.items()}
    assert dict(parsed.training) == DEFAULT_TRAINING


def card_variant(folder) -> str:
    return json.loads((folder / "student" / "config.json").read_text())["variant"]["name"]


@pytest.mark.slow
def test_a_student_is_served_as_a_pyfunc_model_like_a_fold(classifier_writer, tmp_path):
    import mlflow.pyfunc

    from learned_attribution.adapters.serving import save_model

    classifier = load_classifier(classifier_writer(tmp_path / "classifier", seed=1))
    settings = quick_settings(reference_factor=0)
    result = amortize.amortize(classifier, texts(30), None, settings, tmp_path / "cache", progress=False)
    folder = save_student(tmp_path / "student", result, settings, classifier)
    model = mlflow.pyfunc.load_model(str(save_model(folder, tmp_path / "classifier", tmp_path / "model")))
    [record] = model.predict(pd.DataFrame({"text": ["the movie is great and fun"]}))
    direct = StudentExplainer.from_folder(folder).explain(["the movie is great and fun"])[0].record()
    assert record["scores"] == direct["scores"] and set(record["scores"]) == {"student", "occlusion"}


@pytest.mark.slow
@pytest.mark.parametrize("variant, description", [("student_encoder", "copy of the classifier's encoder"),
                                                  ("student_attention", "frozen hidden states, 2 new attention")])
def test_a_text_student_is_fitted_saved_explained_served_and_bound_to_its_classifier(variant, description,
                                                                                   classifier_writer, tmp_path):
    """A text student (the encoder student: a copy of the classifier's encoder with a token head; the attention
    student: new attention layers over its hidden states) through every path a student takes: amortize, its bundle,
    StudentExplainer, the served pyfunc model. Known answers: the API's token scores are the network's own (sigmoid of
    its scores for the predicted class), the served record is the API's, and another classifier of the same shape is
    refused."""
    import mlflow.pyfunc

    from learned_attribution.adapters.serving import save_model
    from learned_attribution.core.models.learned import score_texts

    classifier = load_classifier(classifier_writer(tmp_path / "classifier", seed=1))
    settings = quick_settings(variants=amortize_settings(
        {"student": {"variants": {variant: DEFAULT_VARIANTS[variant]}}}, -1).variants)
    result = amortize.amortize(classifier, texts(30), None, settings, tmp_path / "cache", progress=False)
    assert list(result.variants["variant"]) == [variant] and result.student.reads_token_ids
    assert description in result.variants.at[0, "description"]
    folder = save_student(tmp_path / "student", result, settings, classifier)
    explainer = StudentExplainer.from_folder(folder)
    held = unlabeled_examples(classifier, ["the movie is great and fun", "so boring"])[0]
    scores, _ = scores_of(classifier, held, {"student": explainer.method("student")})
    own = score_texts(result.student, held, classifier.tokenizer, classifier=classifier.model)
    own = own.set_index("example_id")["scores"]
    for example_id, api in zip(scores["example_id"], scores["scores"]):
        np.testing.assert_allclose(api, 1 / (1 + np.exp(-own[example_id])), rtol=1e-5, atol=1e-6)

    model = mlflow.pyfunc.load_model(str(save_model(folder, tmp_path / "classifier", tmp_path / "model")))
    [record] = model.predict(pd.DataFrame({"text": ["the movie is great and fun"]}))
    assert record["scores"] == explainer.explain(["the movie is great and fun"])[0].record()["scores"]

    other = load_classifier(classifier_writer(tmp_path / "other", seed=2))  # same shape, other weights
    assert "student" in StudentExplainer.from_folder(folder, classifier=other).incompatible


def test_the_long_configuration_is_one_parameter_away():
    """`amortize.sizes` names the texts and reference of a run: `quick` by default, `full` the long sizes; a run's own
    max_texts, held_out_texts or reference_factor win over its size's; an unknown size is refused, naming it."""
    from learned_attribution.services.config import SIZES

    quick, full = amortize_settings({}, -1), amortize_settings({"sizes": "full"}, -1)
    assert quick == AmortizeSettings() == amortize_settings({"sizes": "quick"}, -1)
    assert (full.max_texts, full.held_out_texts, full.reference_factor) == (4000, 200, 10)
    assert (quick.max_texts, quick.held_out_texts, quick.reference_factor) == tuple(SIZES["quick"].values())
    assert quick.max_texts < full.max_texts and quick.held_out_texts < full.held_out_texts
    mixed = amortize_settings({"sizes": "full", "held_out_texts": 50}, -1)
    assert (mixed.max_texts, mixed.held_out_texts) == (4000, 50)
    with pytest.raises(ValueError, match="amortize.sizes='long': must be one of quick, full"):
        amortize_settings({"sizes": "long"}, -1)


def test_the_held_out_texts_do_not_depend_on_how_many_texts_the_teacher_explains():
    """Students taught on more or fewer texts are judged on the same held-out texts (and share the reference
    teacher's cached parts)."""
    from learned_attribution.services.amortize.examples import held_out_split

    (few, held), (many, same_held) = (held_out_split(1000, AmortizeSettings(max_texts=m, held_out_texts=50))
                                      for m in (100, 400))
    assert np.array_equal(held, same_held) and len(held) == 50 and (len(few), len(many)) == (100, 400)
    assert not set(many) & set(held) and len(set(many)) == 400
    assert len(held_out_split(30, AmortizeSettings(held_out_texts=50))[1]) == 6  # a fifth of a small file
