"""A fold trained on tiny BERTs applied to classifiers of other families and shapes: every baseline
explains them through the API, the CLI and the served model; `expnet_plus` explains them with the fold's shape-free
variant (named in the output); a learned explainer that cannot read the shape (the paper's ExpNet, or ExpNet+ of a
fold saved without a shape-free variant) is refused by name, and the default methods leave it out.

The API's answers are known: the predicted class is the classifier's argmax, each method's token scores are the
core method's on the API's own tokens for that class (the shape-free ExpNet+ loaded from the fold's folder), and a
word's score is the maximum of its tokens' (the sum for a signed method)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from learned_attribution.core.explainers import build_method
from learned_attribution.core.explainers.apply import tokenizer_batch
from learned_attribution.core.models.artifacts import IncompatibleClassifierError, load_learned
from learned_attribution.core.models.signals import token_vocabulary
from learned_attribution.services.explain import FoldExplainer

TEXTS = ["the movie was good", "a boring plot , but the actors were fun !"]
# Other families, depths and head counts than the fold's 2-layer, 2-head BERT.
OTHERS = [("roberta", 3, 4), ("distilbert", 1, 4), ("xlm-roberta", 2, 1), ("deberta-v2", 3, 2), ("electra", 2, 4),
          ("mpnet", 3, 2)]
BASELINES = ["saliency", "gae", "attention_x_gradient", "raw_attention", "integrated_gradients", "occlusion"]
SETTINGS = {"integrated_gradients": {"n_steps": 4}}  # the fold's baselines block (tests/explain/conftest.py)


@pytest.fixture(scope="module")
def saved_classifiers(tmp_path_factory, tiny_classifier):
    """family -> a folder saved with save_pretrained (model and tokenizer), as a user brings their own."""
    folders = {}
    for family, layers, heads in OTHERS:
        model, tokenizer = tiny_classifier(family, n_layers=layers, n_heads=heads, hidden=16)
        folder = tmp_path_factory.mktemp(family.replace("-", "_"))
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        folders[family] = folder
    return folders


@pytest.mark.parametrize("family", [family for family, _, _ in OTHERS])
def test_every_baseline_and_the_shape_free_expnet_plus_explain_another_family_through_the_api(
        tiny_models_dir, saved_classifiers, family):
    explainer = FoldExplainer.from_fold("heldout_sst2", classifier=saved_classifiers[family], models_dir=tiny_models_dir,
                                        device="cpu")
    assert set(explainer.incompatible) == {"expnet_paper"}
    assert explainer.default_methods == ["expnet_plus", "saliency"]  # ExpNet+ (shape-free) and the best baseline
    methods = ["expnet_plus", *BASELINES]
    results = explainer.explain(TEXTS, methods=methods)
    model, tokenizer = explainer.classifier.model, explainer.classifier.tokenizer
    ids = [[tokenizer.cls_token_id, *tokenizer.convert_tokens_to_ids(r.tokens), tokenizer.sep_token_id]
           for r in results]
    with torch.no_grad():
        unexplained = tokenizer_batch(ids, None, tokenizer)
        logits = model(input_ids=unexplained.input_ids, attention_mask=unexplained.attention_mask).logits
    predicted = logits.argmax(-1).tolist()
    batch = tokenizer_batch(ids, predicted, tokenizer)
    core = {method: build_method(method, **SETTINGS.get(method, {})) for method in BASELINES}
    core["expnet_plus"] = build_method("expnet_plus", layer=-1, vocabulary=token_vocabulary(tokenizer),
                                       model=load_learned(tiny_models_dir / "heldout_sst2" / "expnet_plus_shape_free"))
    for row, (text, result) in enumerate(zip(TEXTS, results)):
        assert result.text == text and len(result.words) == len(result.offsets)
        assert result.variants == {"expnet_plus": "shape_free_stack"}
        assert result.predicted == predicted[row]
        assert result.probability == pytest.approx(float(torch.softmax(logits[row], -1).max()), rel=1e-5)
    for method in methods:
        scores = core[method].explain(model, batch).scores
        for row, result in enumerate(results):
            expected = scores[row, 1:len(ids[row]) - 1].numpy()
            np.testing.assert_allclose(result.token_scores[method], expected, rtol=1e-4, atol=1e-6,
                                       err_msg=f"{family} {method} text {row}")
            words = {}
            for score, word in zip(expected, result.token_words):
                words.setdefault(word, []).append(float(score))
            aggregate = sum if core[method].signed else max
            np.testing.assert_allclose(result.word_scores[method], [aggregate(words[w]) for w in sorted(words)],
                                       rtol=1e-4, atol=1e-6, err_msg=f"{family} {method} words of text {row}")
            assert len(set(np.round(expected, 8))) > 1, f"{family} {method}: flat scores for text {row}"
    with pytest.raises(IncompatibleClassifierError, match=r"heldout_sst2/expnet_paper was trained for a bert "
                                                          r"classifier with 2 layers and 2 heads .* The other methods "
                                                          r"run on this classifier: \[.*'saliency'"):
        explainer.explain(TEXTS, methods=["expnet_paper"])


def test_a_fold_without_a_shape_free_variant_refuses_expnet_plus_and_defaults_to_its_best_baseline(
        tiny_models_dir, saved_classifiers):
    import shutil

    shutil.rmtree(tiny_models_dir / "heldout_sst2" / "expnet_plus_shape_free")  # as a fold saved before shape-free variants existed
    explainer = FoldExplainer.from_fold("heldout_sst2", classifier=saved_classifiers["roberta"],
                                        models_dir=tiny_models_dir, device="cpu")
    assert set(explainer.incompatible) == {"expnet_plus", "expnet_paper"}
    assert explainer.default_methods == ["saliency"]
    with pytest.raises(IncompatibleClassifierError, match=r"expnet_plus was trained for a bert classifier .*its "
                                                          r"variant 'gated_signals' reads one column per layer or head"):
        explainer.explain(TEXTS, methods=["expnet_plus"])


def test_the_cli_runs_the_baselines_on_a_roberta_and_names_the_learned_refusal(tiny_models_dir, saved_classifiers,
                                                                              tmp_path, capsys):
    """The trial of the issue: --classifier TINY_ROBERTA --method saliency --method gae exited 2."""
    from learned_attribution.adapters.cli import main
    output = tmp_path / "out.jsonl"
    code = main(["explain", "--fold", "heldout_sst2", "--models-dir", str(tiny_models_dir), "--classifier",
                 str(saved_classifiers["roberta"]), "--method", "saliency", "--method", "gae", "--output", str(output),
                 *TEXTS])
    assert code == 0
    records = [json.loads(line) for line in output.read_text().splitlines()]
    assert [r["text"] for r in records] == TEXTS and set(records[0]["scores"]) == {"saliency", "gae"}
    code = main(["explain", "--fold", "heldout_sst2", "--models-dir", str(tiny_models_dir), "--classifier",
                 str(saved_classifiers["roberta"]), "--method", "expnet_paper", TEXTS[0]])
    assert code == 2 and "cannot read this one" in capsys.readouterr().err


@pytest.mark.slow  # an MLflow pyfunc model saved and loaded: over 5 s on a 2-core machine
def test_a_served_fold_bundled_with_another_family_answers_with_its_baselines(tiny_models_dir, saved_classifiers,
                                                                             tmp_path):
    import mlflow.pyfunc

    from learned_attribution.adapters.serving import ServedError, save_model

    model = mlflow.pyfunc.load_model(str(save_model(tiny_models_dir / "heldout_sst2",
                                                         saved_classifiers["distilbert"], tmp_path / "model")))
    served = model.predict(pd.DataFrame({"text": TEXTS}))
    api = FoldExplainer.from_fold("heldout_sst2", classifier=saved_classifiers["distilbert"],
                                  models_dir=tiny_models_dir, device="cpu").explain(TEXTS, ids=["0", "1"])
    assert json.dumps(served) == json.dumps([e.record() for e in api])
    assert set(served[0]["scores"]) == {"expnet_plus", "saliency"}
    assert served[0]["variants"] == {"expnet_plus": "shape_free_stack"}
    with pytest.raises(ServedError, match="cannot read this one"):
        model.predict(pd.DataFrame({"text": TEXTS}), params={"methods": "expnet_paper"})
