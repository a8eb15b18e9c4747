"""Every registered attribution method on a tiny classifier of EVERY supported family, against a known answer
computed here: each text run alone (no padding) with plain torch autograd and no package code
(`conftest.DirectPass`), or by hand (occlusion's probability drops, the Riemann and Gauss-Legendre sums of
Integrated Gradients, LIME's weighted ridge on its samples, KernelSHAP's regression with captum called directly on
a forward written here). The package's answer comes from one padded batch of three texts of different lengths
(`tokenizer_batch`), explained for given classes that are not all the predicted ones, so a score moved to another
token, another text, another layer or another class fails; every check also asserts that its answer differs
across the tokens of a text (a permutation cannot pass)."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.linear_model import Ridge

from learned_attribution.core.explainers import METHODS, build_method
from learned_attribution.core.explainers.apply import explain_examples, tokenizer_batch
from learned_attribution.core.explainers.passes import PassMethod, explain_together
from learned_attribution.core.models.architectures import SUPPORTED_MODEL_TYPES
from learned_attribution.core.models.learned import (InputPipeline, LearnedModel, MLPSettings, Variant,
                                                     build_variant_network)
from learned_attribution.core.models.signals import model_columns, signal_rows, token_vocabulary

LAYERS, HEADS = 3, 2
TEXTS = ["The unbelievable film , and it was good .", "a bad movie", "it was not very good !"]
TARGETS = [0, 2, 1]
TOLERANCE = {"rtol": 1e-4, "atol": 1e-6}
BASELINES = {"raw_attention", "attention_rollout", "gae", "attcat", "attention_x_gradient", "saliency",
             "input_x_gradient", "integrated_gradients", "grad_cam", "occlusion", "lime", "kernel_shap", "afn_norm"}
LEARNED = {"expnet_paper", "expnet_plus", "student"}


@pytest.fixture(scope="module", params=SUPPORTED_MODEL_TYPES)
def family(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def classifier(family, known_answer_classifier):
    """(model, tokenizer) of `family`: 3 layers, 2 heads, 3 classes, far from uniform (see conftest)."""
    return known_answer_classifier(family, n_layers=LAYERS, n_heads=HEADS)


@pytest.fixture(scope="module")
def texts(classifier) -> list[list[int]]:
    _, tokenizer = classifier
    return [tokenizer(text)["input_ids"] for text in TEXTS]


@pytest.fixture(scope="module")
def batch(classifier, texts):
    batch = tokenizer_batch(texts, TARGETS, classifier[1])
    assert (batch.attention_mask == 0).any()
    return batch


@pytest.fixture(scope="module")
def runs(classifier, texts, direct_pass):
    """Per text: its direct pass and the gradients of the explained class's logit."""
    model, _ = classifier
    out = []
    for ids, target in zip(texts, TARGETS):
        run = direct_pass(model, ids)
        out.append((run, run.gradients(target)))
    return out


def content(ids: list[int]) -> range:
    """Positions of the real tokens between the frame tokens."""
    return range(1, len(ids) - 1)


def check(scores: torch.Tensor, texts: list[list[int]], expected: list[torch.Tensor], where: str,
          tolerance: dict = TOLERANCE, spread: float | None = 1e-4) -> None:
    """Batched scores [B, T] against the per-text answers (all of each text's positions), 0 at padding. The
    answers have teeth: at least two of the three texts vary across their real tokens by more than `spread` (a
    permutation of the tokens would fail; a positive part or a ReLU may leave a short text all 0), and the texts
    differ in length (a swap of two texts fails). `spread=None`: the answer is known to be flat (see the caller)."""
    assert scores.shape == (len(texts), max(map(len, texts))), where
    varied = 0
    for row, (ids, want) in enumerate(zip(texts, expected)):
        want = torch.as_tensor(want, dtype=torch.float32)
        torch.testing.assert_close(scores[row, :len(ids)].float(), want, **tolerance,
                                   msg=lambda m: f"{where}, text {row}: {m}")
        assert (scores[row, len(ids):] == 0).all(), f"{where}: padding of text {row}"
        inner = want[1:-1]
        varied += spread is not None and float(inner.max() - inner.min()) > spread
    assert spread is None or varied >= 2, f"{where}: the answers are flat: {expected}"
    assert len({len(ids) for ids in texts}) == len(texts)


# ----------------------------------------------------------------------------------------------------------------
# Attention family
# ----------------------------------------------------------------------------------------------------------------

def head_mean_cls_row(attention: torch.Tensor) -> torch.Tensor:
    """[1, H, T, T] -> [T]: attention from [CLS] (position 0) to every token, mean over heads."""
    return attention[0, :, 0, :].detach().mean(0)


@pytest.mark.parametrize("layer", [-1, 0])
def test_raw_attention_is_the_models_own_cls_row(family, classifier, texts, batch, runs, layer):
    model, _ = classifier
    scores = build_method("raw_attention", layer=layer).explain(model, batch).scores
    check(scores, texts, [head_mean_cls_row(run.attentions[layer]) for run, _ in runs], f"{family} layer {layer}")


def rollout_by_hand(attentions: list[torch.Tensor]) -> np.ndarray:
    """Abnar & Zuidema: per layer 0.5 mean-head A + 0.5 I, rows renormalised, multiplied last-to-first; [CLS] row."""
    product = None
    for attention in attentions:
        mixed = 0.5 * attention[0].detach().double().numpy().mean(0) + 0.5 * np.eye(attention.shape[-1])
        mixed /= mixed.sum(1, keepdims=True)
        product = mixed if product is None else mixed @ product
    return product[0]


def test_attention_rollout_is_the_product_of_the_residual_attention_matrices(family, classifier, texts, batch, runs):
    model, _ = classifier
    check(build_method("attention_rollout").explain(model, batch).scores, texts,
          [rollout_by_hand(run.attentions) for run, _ in runs], family)
    check(build_method("attention_rollout", layer=1).explain(model, batch).scores, texts,
          [rollout_by_hand(run.attentions[:2]) for run, _ in runs], f"{family} through layer 1")


def test_gae_is_chefers_relevance_from_the_attention_gradients(family, classifier, texts, batch, runs):
    model, _ = classifier
    expected = []
    for run, grads in runs:
        n = run.input_ids.shape[1]
        relevance = torch.eye(n)
        for attention, gradient in zip(run.attentions, grads["attentions"]):
            weighted = (attention[0].detach() * gradient).clamp(min=0).mean(0)
            relevance = relevance + weighted @ relevance
        expected.append(relevance[0])
    check(build_method("gae").explain(model, batch).scores, texts, expected, family)


def test_attcat_sums_class_activation_times_cls_attention_over_the_layers(family, classifier, texts, batch, runs):
    model, _ = classifier
    expected = []
    for run, grads in runs:
        total = 0
        for output, gradient, attention in zip(run.block_outputs, grads["block_outputs"], run.attentions):
            total = total + (gradient * output[0].detach()).sum(-1) * head_mean_cls_row(attention)
        expected.append(total)
    check(build_method("attcat").explain(model, batch).scores, texts, expected, family)


@pytest.mark.parametrize("layer", [-1, 1])
def test_attention_x_gradient_is_the_positive_cls_row_product(family, classifier, texts, batch, runs, layer):
    model, _ = classifier
    expected = [(run.attentions[layer][0].detach() * grads["attentions"][layer])[:, 0, :].clamp(min=0).mean(0)
                for run, grads in runs]
    check(build_method("attention_x_gradient", layer=layer).explain(model, batch).scores, texts, expected,
          f"{family} layer {layer}")


# ----------------------------------------------------------------------------------------------------------------
# Gradient family
# ----------------------------------------------------------------------------------------------------------------

def test_saliency_is_the_norm_of_the_word_embedding_gradient(family, classifier, texts, batch, runs):
    model, _ = classifier
    attribution = build_method("saliency").explain(model, batch)
    check(attribution.scores, texts, [grads["words"].norm(dim=-1) for _, grads in runs], family)
    for row, (run, _) in enumerate(runs):  # the logits of its own pass come back (it classifies)
        torch.testing.assert_close(attribution.logits[row], run.logits[0].detach(), **TOLERANCE)


def test_input_x_gradient_is_the_gradient_dot_the_word_embedding(family, classifier, texts, batch, runs):
    model, _ = classifier
    expected = [(grads["words"] * run.words[0].detach()).sum(-1) for run, grads in runs]
    # DeBERTa-v3 puts the word embeddings straight into a LayerNorm (no absolute positions, no token types): the
    # gradient is orthogonal to every embedding and the known answer is 0 at every token.
    flat = family == "deberta-v2"
    if flat:
        assert all(float(e.abs().max()) < 1e-5 for e in expected)
    scores = build_method("input_x_gradient").explain(model, batch).scores
    check(scores, texts, expected, family, spread=None if flat else 1e-4,
          tolerance={"rtol": 1e-4, "atol": 1e-5 if flat else 1e-6})


def integrated_gradients_by_hand(model, ids: list[int], target: int, pad_id: int, alphas, weights) -> torch.Tensor:
    """sum_k w_k * d logit[target] / d e (b + a_k (x - b)) . (x - b), summed over the hidden units: x the text's word
    embeddings, b the same with [PAD]'s embedding at every real token between the frame tokens."""
    embedding = model.get_input_embeddings()
    ids = torch.tensor([ids])
    baseline_ids = ids.clone()
    baseline_ids[0, 1:-1] = pad_id
    with torch.no_grad():
        x, b = embedding(ids), embedding(baseline_ids)
    alphas = torch.as_tensor(np.asarray(alphas), dtype=x.dtype)[:, None, None]
    weights = torch.as_tensor(np.asarray(weights), dtype=x.dtype)[:, None, None]
    points = (b + alphas * (x - b)).requires_grad_(True)  # every step of the path, one row each
    logits = model(inputs_embeds=points, attention_mask=torch.ones(len(points), ids.shape[1], dtype=torch.long)).logits
    (gradients,) = torch.autograd.grad(logits[:, target].sum(), points)  # the rows never interact
    return ((weights * gradients).sum(0) * (x - b)[0]).sum(-1)


@pytest.mark.parametrize("method, n_steps", [("riemann_right", 5), ("gausslegendre", 4)])
def test_integrated_gradients_is_the_path_sum_by_hand(family, classifier, texts, batch, method, n_steps):
    model, tokenizer = classifier
    if method == "riemann_right":  # a right Riemann sum: alphas k/n, k = 1..n, each step 1/n
        alphas, weights = [k / n_steps for k in range(1, n_steps + 1)], [1 / n_steps] * n_steps
    else:  # Gauss-Legendre nodes and weights moved from [-1, 1] to [0, 1]
        nodes, node_weights = np.polynomial.legendre.leggauss(n_steps)
        alphas, weights = (nodes + 1) / 2, node_weights / 2
    explainer = build_method("integrated_gradients", n_steps=n_steps, method=method, internal_batch_size=None)
    scores = explainer.explain(model, batch).scores
    expected = [integrated_gradients_by_hand(model, ids, target, tokenizer.pad_token_id, alphas, weights)
                for ids, target in zip(texts, TARGETS)]
    flat = family == "deberta-v2"
    if flat:
        # DeBERTa-v3's [PAD] embedding is 0 (the padding row of the embedding) and its word embeddings go straight
        # into a LayerNorm: the path from the baseline is a rescaling of the text's embeddings, which the LayerNorm
        # cannot see (but for its epsilon near the baseline), so every token's IG is about 0 (under 1e-3, where the
        # other families' reach 1e-2), by hand as by the method.
        assert float(model.get_input_embeddings().weight[tokenizer.pad_token_id].abs().max()) == 0
        assert all(float(e.abs().max()) < 1e-3 for e in expected)
    check(scores, texts, expected, f"{family} {method}", tolerance={"rtol": 1e-4, "atol": 1e-5},
          spread=None if flat else 1e-4)


def test_grad_cam_weighs_the_last_layers_features_by_their_mean_gradient(family, classifier, texts, direct_pass):
    """Explained for every class: the ReLU leaves some (text, class) answers all 0, never most of them."""
    model, tokenizer = classifier
    varied = 0
    for targets in ([(t + shift) % 3 for t in TARGETS] for shift in range(3)):
        expected = []
        for ids, target in zip(texts, targets):
            run = direct_pass(model, ids)
            hidden, gradient = run.block_outputs[-1][0].detach(), run.gradients(target)["block_outputs"][-1]
            expected.append(torch.relu(hidden @ gradient.mean(0)))
        scores = build_method("grad_cam").explain(model, tokenizer_batch(texts, targets, tokenizer)).scores
        check(scores, texts, expected, f"{family} classes {targets}", tolerance={"rtol": 1e-4, "atol": 1e-5},
              spread=None)
        varied += sum(float(e[1:-1].max() - e[1:-1].min()) > 1e-4 for e in expected)
    assert varied >= 3, f"{family}: grad-cam's answers are flat"


# ----------------------------------------------------------------------------------------------------------------
# Activation family
# ----------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("layer", [None, 0, LAYERS])
def test_afn_norm_is_the_hidden_state_norm_at_its_layer(family, classifier, texts, batch, runs, layer):
    """Layer 0 is the embedding output (block 0's input), layer l the output of block l - 1; by default round(2/3
    of the depth): 2 of 3."""
    model, _ = classifier
    at = 2 if layer is None else layer
    expected = [(run.block_inputs[0] if at == 0 else run.block_outputs[at - 1])[0].detach().norm(dim=-1)
                for run, _ in runs]
    settings = {} if layer is None else {"layer": layer}
    check(build_method("afn_norm", **settings).explain(model, batch).scores, texts, expected,
          f"{family} layer {at}", tolerance={"rtol": 1e-4, "atol": 1e-5})


# ----------------------------------------------------------------------------------------------------------------
# Perturbation family: only the real tokens between the frame tokens are removed (replaced by the mask token)
# ----------------------------------------------------------------------------------------------------------------

def removed(ids: list[int], keep: list[int] | np.ndarray, mask_id: int) -> list[int]:
    """`ids` with the content token j replaced by `mask_id` wherever keep[j - 1] is 0."""
    out = list(ids)
    for j, kept in zip(content(ids), keep):
        if not kept:
            out[j] = mask_id
    return out


def test_occlusion_is_the_drop_in_the_target_probability_by_hand(family, classifier, texts, batch,
                                                                target_probability):
    model, tokenizer = classifier
    mask_id = tokenizer.mask_token_id
    assert mask_id is not None and batch.mask_token_id == mask_id
    expected = []
    for ids, target in zip(texts, TARGETS):
        full = target_probability(model, ids, target)
        occluded = target_probability(model, [[*ids[:j], mask_id, *ids[j + 1:]] for j in content(ids)], target)
        drops = torch.zeros(len(ids))
        drops[1:-1] = full - torch.tensor(occluded)
        expected.append(drops)
    check(build_method("occlusion", batch_size=3).explain(model, batch).scores, texts, expected, family,
          tolerance={"rtol": 1e-4, "atol": 1e-6}, spread=1e-5)


def lime_by_hand(model, ids: list[int], target: int, mask_id: int, n_samples: int, seed: int,
                 target_probability) -> torch.Tensor:
    """The `lime` package's text explainer on the content tokens: the original then samples with a uniform number
    (1..n) of random tokens removed, drawn in that order from torch's generator seeded with `seed`; weight
    sqrt(exp(-d^2 / 25^2)) with d = 100 x the cosine distance to the original; ridge (alpha 1, intercept) fitted
    to the target probability; the score of a token is its coefficient."""
    n = len(ids) - 2
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        samples = [np.ones(n)]
        for _ in range(n_samples - 1):
            k = int(torch.randint(1, n + 1, ()).item())
            sample = np.ones(n)
            sample[torch.randperm(n)[:k].numpy()] = 0
            samples.append(sample)
    samples = np.stack(samples)
    cosine = samples.sum(1) / (math.sqrt(n) * np.linalg.norm(samples, axis=1).clip(min=1e-12))
    weights = np.sqrt(np.exp(-((100 * (1 - cosine)) ** 2) / 25.0 ** 2))
    outputs = np.array(target_probability(model, [removed(ids, s, mask_id) for s in samples], target))
    coefficients = Ridge(alpha=1.0).fit(samples, outputs, sample_weight=weights).coef_
    scores = torch.zeros(len(ids))
    scores[1:-1] = torch.as_tensor(coefficients, dtype=torch.float32)
    return scores


def test_lime_is_the_weighted_ridge_of_its_samples_by_hand(family, classifier, texts, batch, target_probability):
    model, tokenizer = classifier
    explainer = build_method("lime", n_samples=40, batch_size=16, seed=5)
    expected = [lime_by_hand(model, ids, target, tokenizer.mask_token_id, 40, 5, target_probability)
                for ids, target in zip(texts, TARGETS)]
    check(explainer.explain(model, batch).scores, texts, expected, family, tolerance={"rtol": 1e-3, "atol": 1e-6},
          spread=1e-6)


def test_kernel_shap_is_captums_regression_on_the_content_tokens_and_is_efficient(family, classifier, texts, batch,
                                                                                target_probability):
    """The reference calls captum's KernelShap directly (seeded as the method seeds each text) on a forward written
    here: the target probability with the removed content tokens replaced by the mask token. KernelSHAP pins the
    all-kept and all-removed samples, so a text's scores also sum to p(text) - p(every content token masked)."""
    from captum.attr import KernelShap

    model, tokenizer = classifier
    mask_id = tokenizer.mask_token_id
    expected = []
    for ids, target in zip(texts, TARGETS):

        def forward(content_ids: torch.Tensor, ids=ids, target=target) -> torch.Tensor:
            rows = torch.tensor([ids] * content_ids.shape[0])
            rows[:, 1:-1] = content_ids
            with torch.no_grad():
                logits = model(input_ids=rows, attention_mask=torch.ones_like(rows)).logits
            return torch.softmax(logits.float(), -1)[:, target]

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(7)
            values = KernelShap(forward).attribute(torch.tensor([ids[1:-1]]), baselines=mask_id, n_samples=50,
                                                    perturbations_per_eval=16)[0]
        scores = torch.zeros(len(ids))
        scores[1:-1] = values.float()
        expected.append(scores)
        efficiency = (target_probability(model, ids, target)
                      - target_probability(model, removed(ids, np.zeros(len(ids) - 2), mask_id), target))
        assert float(scores.sum()) == pytest.approx(efficiency, abs=1e-4)
    attribution = build_method("kernel_shap", n_samples=50, batch_size=16, seed=7).explain(model, batch)
    check(attribution.scores, texts, expected, family, tolerance={"rtol": 1e-3, "atol": 1e-6}, spread=1e-6)


# ----------------------------------------------------------------------------------------------------------------
# Learned methods: the LearnedModel's own `predict` on the signal rows extracted for the family
# ----------------------------------------------------------------------------------------------------------------

LEARNED_VARIANTS = {
    # The paper's ExpNet: the 2H attention columns of one layer.
    "expnet_paper": Variant(name="expnet_paper", stopping="token_auroc"),
    # ExpNet+: per-head gates over signals of every kind, within-example z-scores (reads whole examples).
    "expnet_plus": Variant(name="signals", feature_sets=("attention", "attention_x_gradient", "layer_gradient",
                                                         "saliency", "raw_attention_layers", "afn_norm", "position",
                                                         "token_kind"), network_settings=MLPSettings(gating=True),
                           example_z=True, signs="magnitude"),
    # A student reading its classifier's hidden states beside the scalar signals.
    "student": Variant(name="student", feature_sets=("attention_stats", "saliency", "position", "hidden_state"),
                       objective="distill", stopping="example_spearman"),
}


def learned_model(variant: Variant, model, rows: pd.DataFrame, training_settings) -> LearnedModel:
    """An untrained (seeded) network of `variant` for `model`, its input statistics fitted on `rows`: the answer
    does not need a trained network, only the one the method applies."""
    columns = model_columns(variant.feature_sets, model.config)
    torch.manual_seed(3)
    net = build_variant_network(variant, columns, training_settings(hidden=6, seeds=2)).eval()
    inputs = InputPipeline.for_variant(variant, columns)
    inputs.mean, inputs.std = inputs.fitted_statistics(rows[columns].to_numpy(np.float32),
                                                       rows["example_id"].to_numpy())
    return LearnedModel(variant, inputs, net)


@pytest.mark.parametrize("name", sorted(LEARNED))
def test_a_learned_method_is_its_models_prediction_on_the_familys_signal_rows(family, classifier, texts, batch,
                                                                            training_settings, name):
    model, tokenizer = classifier
    variant = LEARNED_VARIANTS[name]
    vocabulary = token_vocabulary(tokenizer)
    examples = pd.DataFrame({"example_id": [f"e{i}" for i in range(len(texts))], "input_ids": texts,
                             "predicted": TARGETS, "token_labels": [None] * len(texts)})
    # One batch of the three texts, padded as the method's batch is: DeBERTa's embedding gradient x input is 0
    # up to float error, and standardising that column magnifies the error, so the rows must come from the same
    # padded pass for the answer to hold to 1e-4 (signal_rows itself is checked in test_signals_every_family.py).
    rows = pd.concat(signal_rows(model, tokenizer, examples, variant.feature_sets, layer=-1, batch_size=len(texts)),
                     ignore_index=True)
    trained = learned_model(variant, model, rows, training_settings)
    predicted = trained.predict(rows[trained.columns].to_numpy(np.float32), rows["example_id"].to_numpy())
    expected = []
    for index, ids in enumerate(texts):
        scores = torch.zeros(len(ids))
        mine = (rows["example_id"] == f"e{index}").to_numpy()
        scores[rows.loc[mine, "position"].to_numpy()] = torch.as_tensor(np.array(predicted[mine]))
        expected.append(scores)
    method = build_method(name, model=trained, layer=-1, vocabulary=vocabulary)
    attribution = method.explain(model, batch)
    check(attribution.scores, texts, expected, f"{family} {name}", tolerance={"rtol": 1e-4, "atol": 1e-6},
          spread=1e-4)
    assert attribution.model_calls == 1

    # Without a class the method explains the one its own pass predicts, and returns that pass's logits.
    unlabelled = tokenizer_batch(texts, None, tokenizer)
    free = method.explain(model, unlabelled)
    predicted_classes = free.logits.argmax(-1)
    again = method.explain(model, tokenizer_batch(texts, predicted_classes.tolist(), tokenizer))
    torch.testing.assert_close(free.scores, again.scores, rtol=0, atol=0)
    with torch.no_grad():
        logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    torch.testing.assert_close(free.logits, logits, rtol=1e-5, atol=1e-5)


def test_the_baselines_that_read_one_pass_give_their_own_scores_when_they_share_it(family, classifier, batch):
    """Explained together (one forward and one backward pass for all of them), every pass method gives the scores it
    gives alone (each checked against its known answer above), and so do the methods that run their own passes."""
    model, _ = classifier
    methods = {name: build_method(name, **CHEAP.get(name, {})) for name in sorted(BASELINES)}
    shared = {name for name, method in methods.items() if isinstance(method, PassMethod)}
    assert shared == {"raw_attention", "attention_rollout", "gae", "attcat", "attention_x_gradient", "saliency",
                      "input_x_gradient", "grad_cam", "afn_norm"}
    together = explain_together(model, batch, methods)
    assert list(together) == list(methods)
    for name, method in methods.items():
        alone = method.explain(model, batch)
        torch.testing.assert_close(together[name].scores, alone.scores, rtol=1e-5, atol=1e-7,
                                   msg=lambda m: f"{family} {name}: {m}")
        if name in shared:  # the shared pass's logits: one classification for every method of the batch
            torch.testing.assert_close(together[name].logits, together["saliency"].logits)


def test_explain_examples_shares_the_pass_and_times_each_method_alone_on_the_timing_examples(family, classifier,
                                                                                              texts):
    model, tokenizer = classifier
    examples = pd.DataFrame({"example_id": [f"e{i}" for i in range(len(texts))], "input_ids": texts,
                             "predicted": TARGETS})
    methods = {name: build_method(name) for name in ("saliency", "gae", "occlusion", "afn_norm")}
    alone = explain_examples(model, tokenizer, examples, methods, batch_size=2)
    shared = explain_examples(model, tokenizer, examples, methods, batch_size=2, timing=examples.head(1))
    assert list(shared.seconds) == list(methods) and all(seconds > 0 for seconds in shared.seconds.values())
    assert shared.timed == {"saliency": 1, "gae": 1, "occlusion": 3, "afn_norm": 1}
    assert alone.timed == dict.fromkeys(methods, 3)
    assert list(shared.scores["method"]) == list(alone.scores["method"])  # each method's rows together, in order
    assert list(shared.scores["example_id"]) == list(alone.scores["example_id"])
    for together, apart in zip(shared.scores["scores"], alone.scores["scores"]):
        np.testing.assert_allclose(together, apart, rtol=1e-5, atol=1e-7)


def test_a_shared_pass_explains_the_predicted_class_without_a_target(family, classifier, batch):
    model, _ = classifier
    untargeted = replace(batch, target=None)
    methods = {name: build_method(name) for name in ("gae", "saliency", "afn_norm")}
    together = explain_together(model, untargeted, methods)
    predicted = together["gae"].logits.argmax(-1)
    with_predicted = explain_together(model, replace(batch, target=predicted), methods)
    for name in methods:
        torch.testing.assert_close(together[name].scores, with_predicted[name].scores)


def test_every_registered_method_has_a_known_answer_here():
    assert set(METHODS) == BASELINES | LEARNED


# ----------------------------------------------------------------------------------------------------------------
# On a GPU: the CPU's known answers (skipped without CUDA)
# ----------------------------------------------------------------------------------------------------------------

CHEAP = {"integrated_gradients": {"n_steps": 4}, "lime": {"n_samples": 40, "seed": 5},
         "kernel_shap": {"n_samples": 50, "seed": 7}}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_every_method_on_cuda_gives_the_scores_it_gives_on_the_cpu(family, classifier, texts, batch,
                                                                  training_settings):
    """The CPU scores are the known answers above; on CUDA (TF32 off) every method must give them again."""
    import copy

    model, tokenizer = classifier
    vocabulary = token_vocabulary(tokenizer)
    examples = pd.DataFrame({"example_id": [f"e{i}" for i in range(len(texts))], "input_ids": texts,
                             "predicted": TARGETS, "token_labels": [None] * len(texts)})
    learned = {}
    for name in sorted(LEARNED):
        rows = pd.concat(signal_rows(model, tokenizer, examples, LEARNED_VARIANTS[name].feature_sets, layer=-1,
                                     batch_size=len(texts)), ignore_index=True)
        learned[name] = learned_model(LEARNED_VARIANTS[name], model, rows, training_settings)
    on_gpu = copy.deepcopy(model).to("cuda")
    allow_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        for name in sorted(BASELINES | LEARNED):
            settings = ({"model": learned[name], "layer": -1, "vocabulary": vocabulary} if name in LEARNED
                        else CHEAP.get(name, {}))
            cpu = build_method(name, **settings).explain(model, batch).scores
            gpu = build_method(name, **settings).explain(on_gpu, batch.to(torch.device("cuda"))).scores.cpu()
            torch.testing.assert_close(gpu, cpu, rtol=1e-3, atol=1e-5, msg=lambda m: f"{family} {name}: {m}")
    finally:
        torch.backends.cuda.matmul.allow_tf32 = allow_tf32
