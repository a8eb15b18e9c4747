"""A class's margin over a contrast class (`Batch.contrast`, `core/explainers/objective.py`), on the planted
three-class classifier of EVERY supported family (conftest.py: `planted_classifier`).

Known answers: the methods linear in what they explain give the target's scores minus the contrast's (input x
gradient and AttCAT, linear in the gradient of logit[target] - logit[contrast]; Integrated Gradients, whose scores
then sum to the margin's difference between the text and the baseline; occlusion, LIME and KernelSHAP, linear in
p[target] - p[contrast] for a fixed seed), occlusion's drops and KernelSHAP's efficiency are the margin's, computed
here; the gradient signals' signed columns are differences too; the shared pass honours the contrast; a contrast
that cannot be explained is refused."""
from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from learned_attribution.core.explainers import build_method
from learned_attribution.core.explainers.apply import tokenizer_batch
from learned_attribution.core.explainers.passes import explain_together
from learned_attribution.core.models.signals import (GRADIENT_SETS, model_columns, signals_and_logits, signed_columns,
                                                     token_vocabulary)

OTHER_TEXTS = ["a bad movie", "it was not very good fun !"]  # beside the planted text: three lengths, padding
TARGETS, CONTRASTS = [0, 2, 1], [1, 0, 2]
CHEAP = {"integrated_gradients": {"n_steps": 16}, "lime": {"n_samples": 60, "seed": 5},
         "kernel_shap": {"n_samples": 60, "seed": 7}}
LINEAR = ("input_x_gradient", "attcat", "integrated_gradients", "occlusion", "lime", "kernel_shap")


@pytest.fixture(scope="module")
def texts(classifier, planted_text) -> list[list[int]]:
    return [classifier[1](text)["input_ids"] for text in [planted_text, *OTHER_TEXTS]]


def batch_of(classifier, texts, target, contrast=None):
    return tokenizer_batch(texts, target, classifier[1], contrast=contrast)


def margin_of(logits: torch.Tensor, target: int, contrast: int) -> float:
    return float(logits[target] - logits[contrast])


@pytest.mark.parametrize("name", LINEAR)
def test_a_linear_methods_margin_is_the_targets_scores_minus_the_contrasts(family, classifier, texts,
                                                                          input_gradient_blind, name):
    model, _ = classifier
    method = build_method(name, **CHEAP.get(name, {}))
    margin = method.explain(model, batch_of(classifier, texts, TARGETS, CONTRASTS)).scores
    target = method.explain(model, batch_of(classifier, texts, TARGETS)).scores
    contrast = method.explain(model, batch_of(classifier, texts, CONTRASTS)).scores
    torch.testing.assert_close(margin, target - contrast, rtol=1e-4, atol=1e-5, msg=lambda m: f"{family} {name}: {m}")
    if name == "input_x_gradient" and family in input_gradient_blind:  # 0 for every class (conftest): no teeth
        return
    assert not torch.allclose(margin, target, rtol=1e-3, atol=1e-4), f"{family} {name}: the contrast was ignored"


def test_integrated_gradients_completeness_holds_for_the_margin(family, classifier, texts):
    """One text alone ("a bad movie", class 1's word and no other): the scores sum to margin(text) -
    margin(baseline), the baseline's [PAD] word embeddings fed in place of the text's (the path's start), to the
    quadrature error the method reports."""
    model, tokenizer = classifier
    ids = texts[1]
    method = build_method("integrated_gradients", n_steps=32)
    scores = method.explain(model, tokenizer_batch([ids], [1], tokenizer, contrast=[0])).scores[0]
    embedding = model.get_input_embeddings()
    baseline_ids = [ids[0], *[tokenizer.pad_token_id] * (len(ids) - 2), ids[-1]]
    with torch.no_grad():
        at_text = model(inputs_embeds=embedding(torch.tensor([ids]))).logits[0]
        at_baseline = model(inputs_embeds=embedding(torch.tensor([baseline_ids]))).logits[0]
    difference = margin_of(at_text, 1, 0) - margin_of(at_baseline, 1, 0)
    assert abs(difference) > 1.0
    assert float(scores.sum()) == pytest.approx(difference, abs=1e-3 * abs(difference) + 1e-4)
    assert float(method.last_convergence_delta[0]) == pytest.approx(float(scores.sum()) - difference, abs=1e-4)


def probabilities(model, rows: list[list[int]]) -> torch.Tensor:
    with torch.no_grad():
        return torch.softmax(model(input_ids=torch.tensor(rows)).logits.float(), dim=-1)


def test_occlusion_and_kernel_shap_explain_the_probability_margin(family, classifier, texts):
    """Occlusion: each token's drop in p[target] - p[contrast] when it is masked; KernelSHAP (pinned ends): the scores
    sum to that margin at the text minus with every content token masked. The text holds the words of classes 0
    and 2, so the margin of class 2 over class 1 moves with either."""
    model, tokenizer = classifier
    ids, mask = texts[2], tokenizer.mask_token_id
    batch = tokenizer_batch([ids], [2], tokenizer, contrast=[1])
    masked_each = [ids[:j] + [mask] + ids[j + 1:] for j in range(1, len(ids) - 1)]
    margins = [float(p[2] - p[1]) for p in probabilities(model, [ids, *masked_each])]
    drops = torch.tensor([margins[0] - margin for margin in margins[1:]])
    occlusion = build_method("occlusion").explain(model, batch).scores[0]
    torch.testing.assert_close(occlusion[1:-1], drops, rtol=1e-4, atol=1e-6)
    assert float(drops.max() - drops.min()) > 0.1
    all_masked = probabilities(model, [[ids[0], *[mask] * (len(ids) - 2), ids[-1]]])[0]
    efficiency = margins[0] - float(all_masked[2] - all_masked[1])
    assert abs(efficiency) > 0.1
    shap = build_method("kernel_shap", n_samples=60, seed=7).explain(model, batch).scores[0]
    assert float(shap.sum()) == pytest.approx(efficiency, abs=1e-4)


def test_the_signed_gradient_signals_of_a_margin_are_differences(family, classifier, texts):
    model, tokenizer = classifier
    batch = batch_of(classifier, texts, TARGETS)
    sets = sorted(GRADIENT_SETS)
    vocabulary = token_vocabulary(tokenizer)

    def signals(target, contrast=None):
        return signals_and_logits(model, batch.input_ids, batch.attention_mask, torch.tensor(target), sets, -1,
                                  vocabulary, contrast=None if contrast is None else torch.tensor(contrast))[0]

    columns = model_columns(sets, model.config)
    # the signed columns but the heads' max and min: A x gradient per head, gradient . input, their head mean
    linear = [columns.index(column) for column in signed_columns(columns) if column not in ("axg_max", "axg_min")]
    assert "axg_mean" in columns[linear[0]:] and len(linear) == 3 + 1 + 2
    margin, target, contrast = signals(TARGETS, CONTRASTS), signals(TARGETS), signals(CONTRASTS)
    real = batch.attention_mask.bool()
    torch.testing.assert_close(margin[real][:, linear], (target - contrast)[real][:, linear], rtol=1e-4, atol=1e-5)
    assert not torch.allclose(margin[real], target[real])


def test_a_shared_pass_explains_the_margin_as_each_method_alone(family, classifier, texts):
    model, _ = classifier
    batch = batch_of(classifier, texts, TARGETS, CONTRASTS)
    methods = {name: build_method(name) for name in ("gae", "attcat", "saliency", "input_x_gradient", "grad_cam")}
    together = explain_together(model, batch, methods)
    for name, method in methods.items():
        torch.testing.assert_close(together[name].scores, method.explain(model, batch).scores, rtol=1e-5, atol=1e-7)
    without = explain_together(model, replace(batch, contrast=None), methods)
    assert not torch.allclose(together["saliency"].scores, without["saliency"].scores)


@pytest.mark.parametrize("name", ["saliency", "integrated_gradients", "occlusion"])
def test_a_contrast_that_cannot_be_explained_is_refused(family, classifier, texts, name):
    model, _ = classifier
    method = build_method(name, **CHEAP.get(name, {}))
    with pytest.raises(ValueError, match=r"batch.contrast equals batch.target in rows \[1\]"):
        method.explain(model, batch_of(classifier, texts, TARGETS, [1, 2, 0]))
    with pytest.raises(ValueError, match="batch.contrast needs batch.target"):
        method.explain(model, batch_of(classifier, texts, None, CONTRASTS))
    with pytest.raises(ValueError, match=r"batch.contrast holds (\[1, 3, 2\]|3), outside 0..2 for a 3-class model"):
        method.explain(model, batch_of(classifier, texts, TARGETS, [1, 3, 2]))
    with pytest.raises(ValueError, match=r"batch.contrast must be \[B\] = \[3\]"):
        method.explain(model, replace(batch_of(classifier, texts, TARGETS), contrast=torch.tensor([1, 0])))
