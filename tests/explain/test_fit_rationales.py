"""`fit --rationales` and `fit_rationales`: a fold's ExpNet+ refit on a user's annotated examples (the tiny fold of
conftest.py), written as a fold folder the explainer reads, the prior's other explainers kept; a bad file, a file
without a usable example and test examples passed as training examples are refused with the file, line or id."""
import json

import numpy as np
import pytest
import torch

from learned_attribution.adapters.cli import main
from learned_attribution.core.errors import InputError
from learned_attribution.core.models.learned.fewshot import FewShotSettings
from learned_attribution.services.explain import FoldExplainer, fit_rationales

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
                           settings=FewShotSettings(steps=100, prior_weight=0.0))
    assert refit.card["fewshot"]["n_examples"] == 12 and refit.card["held_out_task"] == "sst2"
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
    assert main(["fit", "--rationales", str(file), "--fold", "heldout_sst2", "--models-dir", str(tiny_models_dir),
                 "--output", str(output)]) == 0
    assert "refit on 8 annotated examples" in capsys.readouterr().err
    assert (output / "fold.json").is_file() and (output / "expnet_plus").is_dir()
    assert main(["fit", "--rationales", str(file), "--output", str(tmp_path / "x")]) == 2
    assert "needs --fold" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text(file.read_text().splitlines()[0] + "\n" + '{"words": ["a"], "rationale": [1, 0], "label": 0}\n')
    assert main(["fit", "--rationales", str(bad), "--fold", "heldout_sst2", "--models-dir", str(tiny_models_dir),
                 "--output", str(tmp_path / "y")]) == 2
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


def test_a_file_without_a_usable_example_is_refused(tiny_models_dir, tmp_path):
    empty = tmp_path / "none.jsonl"
    empty.write_text(json.dumps({"words": ["the", "movie"], "rationale": [0, 0], "label": 1}) + "\n")
    with pytest.raises(InputError, match="none.jsonl: none of the 1 examples marks a rationale word"):
        fit_rationales("heldout_sst2", empty, tmp_path / "out", models_dir=tiny_models_dir)
    with pytest.raises(InputError, match="test examples"):
        fit_rationales("heldout_sst2", rationale_file(tmp_path / "m.jsonl", 3), tmp_path / "out",
                       models_dir=tiny_models_dir, test_ids=["u1"])


def test_the_cli_refits_on_a_span_export_with_its_labels(tiny_models_dir, tmp_path, capsys, project_root):
    doccano = project_root / "tests" / "data" / "rationale_spans" / "doccano.jsonl"
    common = ["--fold", "heldout_sst2", "--models-dir", str(tiny_models_dir)]
    assert main(["fit", "--rationales", str(doccano), *common, "--output", str(tmp_path / "a")]) == 2
    assert "doccano.jsonl: the export has 2 labels ['Rationale', 'Target']" in capsys.readouterr().err
    assert main(["fit", "--rationales", str(doccano), *common, "--rationale-labels", "Rationale", "--class-field",
                 "class", "--output", str(tmp_path / "b")]) == 0
    assert "refit on 3 annotated examples" in capsys.readouterr().err
    assert FoldExplainer.from_fold(tmp_path / "b", models_dir=tiny_models_dir).card["fewshot"]["n_examples"] == 3
    assert main(["fit", "--classifier", "sst2", "--input", "texts.txt", "--rationale-labels", "Rationale",
                 "--output", str(tmp_path / "c")]) == 2
    assert "--rationale-labels and --class-field describe a --rationales file" in capsys.readouterr().err
