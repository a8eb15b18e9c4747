"""`fit --rationales` and `fit_rationales`: a fold's ExpNet+ refit on a user's annotated examples (the tiny fold of
conftest.py), written as a fold folder the explainer reads, the prior's other explainers kept; the fold's stored
few-shot choice decides the prior and schedule (the nearest k below the number of examples); a bad file, a file
without a usable example, test examples passed as training examples and a run without test examples to check
against are refused with the file, line or id."""
import json

import numpy as np
import pytest
import torch

from learned_attribution.adapters.cli import main
from learned_attribution.core.errors import InputError
from learned_attribution.core.models.learned.fewshot import FewShotSettings
from learned_attribution.services.explain import FoldExplainer
from learned_attribution.services.fewshot.refit import fit_rationales

WORDS = ["the", "movie", "is", "great", "and", "fun", "but", "the", "plot", "is", "slow", "dull", "sad", "love"]


def rationale_file(path, n, seed=0, marked=("great", "fun", "dull", "love")):
    rng = np.random.default_rng(seed)
    with path.open("w") as handle:
        for i in range(n):
            words = list(rng.choice(WORDS, size=int(rng.integers(4, 9))))
            rationale = [int(w in marked) for w in words]
            if not any(rationale):
                words[0], rationale[0] = "great", 1
            handle.write(json.dumps({"id": f"u{i}", "words": words, "rationale": rationale,
                                     "label": int(rng.integers(0, 2))}) + "\n")
    return path


def test_the_refit_is_written_as_a_fold_and_moves_only_expnet_plus(tiny_models_dir, tmp_path):
    file = rationale_file(tmp_path / "mine.jsonl", 12)
    prior = FoldExplainer.from_fold("heldout_sst2", models_dir=tiny_models_dir)
    refit = fit_rationales("heldout_sst2", file, tmp_path / "mine_fold", models_dir=tiny_models_dir,
                           settings=FewShotSettings(steps=100, step_scale=5.0, prior_weight=0.0), test_check=False)
    assert refit.card["fewshot"]["n_examples"] == 12 and refit.card["held_out_task"] == "sst2"
    # no choice stored in the fold's folder: the fold's own ExpNet+, the schedule given; no test check ran
    assert {key: refit.card["fewshot"][key] for key in ("k", "prior", "schedule_given", "test_check")} == \
        {"k": None, "prior": "fold", "schedule_given": True, "test_check": False}
    assert refit.card["fewshot"]["choice"].startswith("none")
    before = dict(prior.learned["expnet_plus"].net.named_parameters())
    after = dict(refit.learned["expnet_plus"].net.named_parameters())
    assert any(not torch.equal(after[name], value) for name, value in before.items())
    for name in ("expnet_paper",):
        assert all(torch.equal(a, b) for a, b in zip(prior.learned[name].net.parameters(),
                                                     refit.learned[name].net.parameters()))
    # in sample, the refit ranks the words the file marks higher than the prior did (its objective, on its data)
    records = [json.loads(line) for line in file.read_text().splitlines()]
    texts = [r["words"] for r in records]

    def margin(explainer):
        scores = [np.asarray(e.word_scores["expnet_plus"]) for e in explainer.explain(texts, methods=["expnet_plus"])]
        return np.mean([s[np.array(r["rationale"]) == 1].mean() - s[np.array(r["rationale"]) == 0].mean()
                        for s, r in zip(scores, records) if 0 < sum(r["rationale"]) < len(r["rationale"])])
    assert margin(refit) > margin(prior) + 0.01
    reloaded = FoldExplainer.from_fold(tmp_path / "mine_fold", models_dir=tiny_models_dir)
    assert reloaded.explain(texts, methods=["expnet_plus"])[0].word_scores == \
        refit.explain(texts, methods=["expnet_plus"])[0].word_scores


def test_the_cli_refits_and_refuses_what_it_cannot_use(tiny_models_dir, tmp_path, capsys):
    file = rationale_file(tmp_path / "mine.jsonl", 8)
    output = tmp_path / "refit"
    common = ["fit", "--rationales", str(file), "--fold", "heldout_sst2", "--models-dir", str(tiny_models_dir)]
    # no run's test examples to check against (07_model_output beside the models): refused unless --no-test-check
    assert main([*common, "--output", str(output)]) == 2
    predictions = tiny_models_dir.parent / "07_model_output" / "rationale_predictions_sst2.parquet"
    assert capsys.readouterr().err == (
        f"error: no test examples to check your examples against ({predictions} does not exist): give the models "
        "folder of the run that trained the fold (--models-dir), or fit without the check with --no-test-check "
        "(API: test_check=False, or test_ids=)\n")
    assert not output.exists()
    assert main([*common, "--no-test-check", "--output", str(output)]) == 0
    assert "refit on 8 annotated examples with no few-shot choice stored for the fold: its own ExpNet+ with the " \
           "default schedule; test examples not checked)" in capsys.readouterr().err
    assert (output / "fold.json").is_file() and (output / "expnet_plus").is_dir()
    assert json.loads((output / "fold.json").read_text())["fewshot"]["test_check"] is False
    assert main(["fit", "--classifier", "sst2", "--input", "texts.txt", "--no-test-check", "--output",
                 str(tmp_path / "w")]) == 2
    assert "--no-test-check goes with --rationales" in capsys.readouterr().err
    assert main(["fit", "--rationales", str(file), "--output", str(tmp_path / "x")]) == 2
    assert "needs --fold" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text(file.read_text().splitlines()[0] + "\n" + '{"words": ["a"], "rationale": [1, 0], "label": 0}\n')
    assert main(["fit", "--rationales", str(bad), "--fold", "heldout_sst2", "--models-dir", str(tiny_models_dir),
                 "--no-test-check", "--output", str(tmp_path / "y")]) == 2
    assert "bad.jsonl" in (err := capsys.readouterr().err) and "line 2" in err
    # the run's own test examples (07_model_output beside the models) are refused by id
    import pandas as pd
    (tiny_models_dir.parent / "07_model_output").mkdir()
    pd.DataFrame({"example_id": ["u3", "t9"], "role": ["rationale_test", "rationale_test"]}).to_parquet(
        tiny_models_dir.parent / "07_model_output" / "rationale_predictions_sst2.parquet")
    assert main(["fit", "--rationales", str(file), "--fold", "heldout_sst2", "--models-dir", str(tiny_models_dir),
                 "--output", str(tmp_path / "z")]) == 2
    assert "are test examples, e.g. ['u3']" in capsys.readouterr().err
    assert not (tmp_path / "z").exists()
    three = rationale_file(tmp_path / "three.jsonl", 3)  # u0, u1, u2: none a test example
    assert main(["fit", "--rationales", str(three), *common[3:], "--output", str(tmp_path / "checked")]) == 0
    assert json.loads((tmp_path / "checked" / "fold.json").read_text())["fewshot"]["test_check"] is True


def test_a_file_without_a_usable_example_is_refused(tiny_models_dir, tmp_path):
    empty = tmp_path / "none.jsonl"
    empty.write_text(json.dumps({"words": ["the", "movie"], "rationale": [0, 0], "label": 1}) + "\n")
    with pytest.raises(InputError, match="none.jsonl: none of the 1 examples marks a rationale word"):
        fit_rationales("heldout_sst2", empty, tmp_path / "out", models_dir=tiny_models_dir, test_check=False)
    with pytest.raises(InputError, match="test examples"):
        fit_rationales("heldout_sst2", rationale_file(tmp_path / "m.jsonl", 3), tmp_path / "out",
                       models_dir=tiny_models_dir, test_ids=["u1"])


def test_the_cli_refits_on_a_span_export_with_its_labels(tiny_models_dir, tmp_path, capsys, project_root):
    doccano = project_root / "tests" / "data" / "rationale_spans" / "doccano.jsonl"
    common = ["--fold", "heldout_sst2", "--models-dir", str(tiny_models_dir), "--no-test-check"]
    assert main(["fit", "--rationales", str(doccano), *common, "--output", str(tmp_path / "a")]) == 2
    assert "doccano.jsonl: the export has 2 labels ['Rationale', 'Target']" in capsys.readouterr().err
    assert main(["fit", "--rationales", str(doccano), *common, "--rationale-labels", "Rationale", "--class-field",
                 "class", "--output", str(tmp_path / "b")]) == 0
    assert "refit on 3 annotated examples" in capsys.readouterr().err
    assert FoldExplainer.from_fold(tmp_path / "b", models_dir=tiny_models_dir).card["fewshot"]["n_examples"] == 3
    assert main(["fit", "--classifier", "sst2", "--input", "texts.txt", "--rationale-labels", "Rationale",
                 "--output", str(tmp_path / "c")]) == 2
    assert "--rationale-labels and --class-field describe a --rationales file" in capsys.readouterr().err


def test_the_folds_stored_choice_is_refit_at_the_nearest_k_below(tiny_models_dir, tmp_path, caplog, capsys):
    # the fewshot pipeline's choice in the fold's folder: k = 4 the fold's own ExpNet+ with a gentle schedule,
    # k = 16 another prior (here a renamed copy) with a free one
    import dataclasses
    import logging

    from learned_attribution.core.models.learned.fewshot import ChosenRefit, FewShotChoice
    from learned_attribution.services import bundle as bundles

    fold = FoldExplainer.from_fold("heldout_sst2", models_dir=tiny_models_dir)
    own = fold.learned["expnet_plus"]
    other = dataclasses.replace(own, variant=dataclasses.replace(own.variant, name="other_variant"))
    gentle = FewShotSettings(steps=5, prior_weight=30.0, seed=3)
    free = FewShotSettings(steps=40, step_scale=10.0, prior_weight=0.0, seed=3)
    bundles.write_fewshot_choice(FewShotChoice("heldout_sst2", {4: ChosenRefit("fold", own.variant.name, gentle),
                                                                16: ChosenRefit("other", "other_variant", free)},
                                               {"other": other}), fold.folder / bundles.FEWSHOT)
    for n, k, prior, variant, schedule in ((2, 4, "fold", own.variant.name, gentle),
                                           (20, 16, "other", "other_variant", free)):
        file = rationale_file(tmp_path / f"n{n}.jsonl", n, seed=n)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="learned_attribution.services.explain"):
            refit = fit_rationales("heldout_sst2", file, tmp_path / f"out{n}", models_dir=tiny_models_dir,
                                   test_check=False)
        card = refit.card["fewshot"]
        assert (card["n_examples"], card["k"], card["prior"], card["variant"]) == (n, k, prior, variant)
        assert card["schedule"] == dataclasses.asdict(schedule) and card["choice"] == "stored"
        assert card["choice_ks"] == [4, 16] and card["schedule_given"] is False
        warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        if n < 4:  # fewer examples than every k: the smallest k's choice, said in one line
            assert warned == [f"{file}: 2 annotated examples, fewer than the smallest k of the fold's few-shot "
                              "choice [4, 16]: refit with the choice at k = 4"]
        else:
            assert warned == []
        assert refit.learned["expnet_plus"].variant.name == variant
        assert refit.explain([["the", "movie", "is", "great"]], methods=["expnet_plus"])[0].word_scores
    # the CLI says which k it used
    file = rationale_file(tmp_path / "n8.jsonl", 8)
    assert main(["fit", "--rationales", str(file), "--fold", "heldout_sst2", "--models-dir", str(tiny_models_dir),
                 "--no-test-check", "--output", str(tmp_path / "cli")]) == 0
    assert (f"ExpNet+ refit on 8 annotated examples with the fold's few-shot choice at k = 4: prior "
            f"{own.variant.name}; test examples not checked)") in capsys.readouterr().err
    # a refit's folder holds no choice of its own: refitting it again is the default refit, said so
    assert not (tmp_path / "cli" / bundles.FEWSHOT).exists()
