"""Every ExpNet+ signal set (`core/models/signals.py`: `token_signals`, `signals_and_logits`, `signal_rows`) on a tiny
classifier of EVERY supported family, against a direct computation written here: each text run alone (no
padding) with plain torch autograd (`conftest.DirectPass`: word embeddings fed as `inputs_embeds`, block inputs and
outputs caught by module hooks, the model's own `output_attentions`), and the token flags read from the token
strings by each tokenizer kind's own rule. The package's answer comes from one padded batch of texts of different
lengths, so a score moved to another token, another text or another layer fails."""
from __future__ import annotations

import unicodedata

import numpy as np
import pandas as pd
import pytest
import torch

from learned_attribution.core.data.words import FUNCTION_WORDS
from learned_attribution.core.explainers.apply import tokenizer_batch
from learned_attribution.core.models.architectures import SUPPORTED_MODEL_TYPES
from learned_attribution.core.models.signals import (KNOWN_SETS, model_columns, signal_rows, signals_and_logits,
                                                     token_signals, token_vocabulary)

LAYERS, HEADS = 3, 2  # not the factory's default depth: nothing passes by assuming 2 layers
TEXTS = ["The unbelievable film , and it was good .", "a bad movie", "it was not very good !"]
TARGETS = [0, 2, 1]  # not the predicted classes everywhere: the explained class must be the one given
WORDPIECE_FAMILIES = {"bert", "distilbert", "electra", "mpnet"}
MARKERS = {"roberta": "Ġ", "xlm-roberta": "▁", "camembert": "▁", "deberta-v2": "▁"}  # word-start markers
TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}


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


def _is_punctuation(text: str) -> bool:
    return bool(text) and all(unicodedata.category(c)[0] in "PS" for c in text)


def token_flags(family: str, tokens: list[str]) -> dict[str, list[float]]:
    """Continuation, punctuation, closed-class and content flags of the real tokens between the frame tokens
    (`tokens` without them), by the tokenizer kind's convention: WordPiece marks a continuation with `##` (and
    its pieces are read raw); byte-level BPE and SentencePiece mark a word start (`Ġ` / `▁`), the first token and
    the token after a lone marker start words, a lone marker is punctuation (it carries no word)."""
    flags = {"is_continuation": [], "is_punctuation": [], "is_closed_class": [], "is_content": []}
    marker = MARKERS.get(family)
    for index, token in enumerate(tokens):
        if marker is None:
            continues, text, lone = token.startswith("##"), token, False
        else:
            lone = token == marker
            starts = token.startswith(marker)
            text = token[len(marker):] if starts else token
            continues = not starts and index > 0 and tokens[index - 1] != marker
        punctuation = lone or _is_punctuation(text)
        closed = not continues and text.lower() in FUNCTION_WORDS
        flags["is_continuation"].append(float(continues))
        flags["is_punctuation"].append(float(punctuation))
        flags["is_closed_class"].append(float(closed))
        flags["is_content"].append(float(not punctuation and not closed))
    return flags


def interpolate(values: torch.Tensor, depth: float) -> torch.Tensor:
    """values [T, K] read at relative depth `depth` of the K layers, by hand."""
    position = depth * (values.shape[1] - 1)
    low = int(np.floor(position + 1e-9))
    high = min(low + 1, values.shape[1] - 1)
    weight = position - low
    return values[:, low] * (1 - weight) + values[:, high] * weight


def direct_signals(family: str, model, tokenizer, ids: list[int], target: int, layer: int, direct_pass
                   ) -> dict[str, torch.Tensor]:
    """Every signal column [T] of one text (all its positions, frame tokens included), computed directly; the
    `position` and `token_kind` columns are given at the real tokens between the frame tokens only."""
    run = direct_pass(model, ids)
    grads = run.gradients(target)
    columns: dict[str, torch.Tensor] = {}
    attention, attention_grad = run.attentions[layer][0].detach(), grads["attentions"][layer]
    for h in range(HEADS):
        columns[f"cls_to_tok_h{h}"] = attention[h, 0, :]
        columns[f"tok_to_cls_h{h}"] = attention[h, :, 0]
        columns[f"axg_h{h}"] = attention[h, 0, :] * attention_grad[h, 0, :]
    block_input = run.block_inputs[layer][0].detach()
    columns["layer_grad_norm"] = grads["block_inputs"][layer].norm(dim=-1)
    columns["layer_grad_x_input"] = (grads["block_inputs"][layer] * block_input).sum(-1)
    columns["embedding_grad_norm"] = grads["words"].norm(dim=-1)
    columns["embedding_grad_x_input"] = (grads["words"] * run.words[0].detach()).sum(-1)
    raw = torch.stack([a[0, :, 0, :].detach().mean(0) for a in run.attentions], dim=1)  # [T, L]
    hidden = [run.block_inputs[0][0].detach(), *(out[0].detach() for out in run.block_outputs)]
    norms = torch.stack([h.norm(dim=-1) for h in hidden], dim=1)  # [T, L + 1]
    for index in range(LAYERS):
        columns[f"raw_attention_l{index}"] = raw[:, index]
    for index in range(LAYERS + 1):
        columns[f"afn_norm_l{index}"] = norms[:, index]
    from_cls, to_cls = attention[:, 0, :], attention[:, :, 0]  # [H, T]
    axg = from_cls * attention_grad[:, 0, :]
    for name, values in (("cls_to_tok", from_cls), ("tok_to_cls", to_cls)):
        columns[f"{name}_mean"], columns[f"{name}_max"] = values.mean(0), values.max(0).values
        columns[f"{name}_sd"] = values.std(0, unbiased=False)
    columns["axg_mean"], columns["axg_max"], columns["axg_min"] = axg.mean(0), axg.max(0).values, axg.min(0).values
    for depth, name in ((0.0, "d0"), (1 / 3, "d33"), (2 / 3, "d67"), (1.0, "d100")):
        columns[f"raw_attention_{name}"] = interpolate(raw, depth)
        columns[f"afn_norm_{name}"] = interpolate(norms, depth)
    explained = run.block_outputs[layer][0].detach()
    for unit in range(model.config.hidden_size):
        columns[f"hidden_{unit}"] = explained[:, unit]
    n_real = len(ids) - 2
    inner = torch.zeros(len(ids))
    inner[1:-1] = 1

    def real(values: list[float]) -> torch.Tensor:  # [T]: the values at the real tokens, NaN at the frame tokens
        out = torch.full((len(ids),), float("nan"))
        out[1:-1] = torch.tensor(values)
        return out

    columns["relative_position"] = real([j / max(n_real - 1, 1) for j in range(n_real)])
    columns["inverse_length"] = real([1 / n_real] * n_real)
    columns["is_last"] = real([float(j == n_real - 1) for j in range(n_real)])
    flags = token_flags(family, tokenizer.convert_ids_to_tokens(ids)[1:-1])
    for name, values in flags.items():
        columns[name] = real(values)
    return columns


def assert_columns_equal(got: torch.Tensor, columns: list[str], expected: dict[str, torch.Tensor], where: str):
    """`got` [T, F] against the expected columns; NaN in an expected column: not compared at that position."""
    assert set(columns) <= set(expected), sorted(set(columns) - set(expected))
    for index, name in enumerate(columns):
        want = expected[name].float()
        known = ~torch.isnan(want)
        torch.testing.assert_close(got[known, index], want[known], **TOLERANCE, msg=lambda m: f"{where}: column {name}: {m}")


@pytest.mark.parametrize("layer", [-1, 1])
def test_every_signal_set_equals_its_direct_computation_on_every_family(family, classifier, texts, direct_pass,
                                                                        layer):
    model, tokenizer = classifier
    batch = tokenizer_batch(texts, TARGETS, tokenizer)
    assert (batch.attention_mask == 0).any()  # a padded batch: padding must not reach the real tokens
    signals, logits = signals_and_logits(model, batch.input_ids, batch.attention_mask, batch.target, KNOWN_SETS,
                                         layer, token_vocabulary(tokenizer))
    columns = model_columns(KNOWN_SETS, model.config)
    assert signals.shape == (len(TEXTS), batch.input_ids.shape[1], len(columns))
    for row, (ids, target) in enumerate(zip(texts, TARGETS)):
        expected = direct_signals(family, model, tokenizer, ids, target, layer, direct_pass)
        assert_columns_equal(signals[row, :len(ids)], columns, expected, f"{family} text {row}")
        torch.testing.assert_close(logits[row], direct_pass(model, ids).logits[0].detach(), **TOLERANCE)
        # The known answers have teeth: the per-token columns differ across the tokens of the text.
        for name in ("cls_to_tok_h0", "axg_h1", "layer_grad_norm", "embedding_grad_norm", "afn_norm_l2",
                     *(() if family == "deberta-v2" else ("embedding_grad_x_input",))):
            spread = expected[name].max() - expected[name].min()
            assert spread > 1e-3, (family, name, float(spread))
        if family == "deberta-v2":
            # DeBERTa-v3 (no absolute positions, no token types) feeds the word embeddings straight into a
            # LayerNorm, which is blind to their scale: the gradient is orthogonal to each embedding, and
            # gradient x input is 0 at every token (the direct computation says so too).
            assert expected["embedding_grad_x_input"].abs().max() < 1e-5


def test_without_a_target_the_signals_explain_the_predicted_class(family, classifier, texts):
    model, tokenizer = classifier
    batch = tokenizer_batch(texts, None, tokenizer)
    sets = ["attention_x_gradient", "layer_gradient", "saliency"]
    signals, logits = signals_and_logits(model, batch.input_ids, batch.attention_mask, None, sets)
    predicted = logits.argmax(-1)
    given = token_signals(model, batch.input_ids, batch.attention_mask, predicted, sets)
    torch.testing.assert_close(signals, given, rtol=0, atol=0)
    other = token_signals(model, batch.input_ids, batch.attention_mask, (predicted + 1) % 3, sets)
    assert not torch.allclose(other, given, atol=1e-4)  # the class matters: the check above has teeth


def test_signal_rows_hold_each_real_tokens_direct_signals_on_every_family(family, classifier, texts, direct_pass):
    """The token-per-row tables the classifiers pipeline stores: one row per real token (frame tokens dropped) in
    text and position order, each text explained for its `predicted` class, batched two texts at a time."""
    model, tokenizer = classifier
    sets = ["attention", "saliency", "afn_norm_depths", "position", "token_kind"]
    examples = pd.DataFrame({"example_id": [f"e{i}" for i in range(len(texts))], "input_ids": texts,
                             "predicted": TARGETS, "token_labels": [None] * len(texts), "task": "t"})
    table = pd.concat(signal_rows(model, tokenizer, examples, sets, layer=-1, batch_size=2, chunk_size=2),
                      ignore_index=True)
    columns = model_columns(sets, model.config)
    # Every real token once; the texts come in the batches' (length-grouped) order, each text's rows together.
    assert sorted(table["example_id"]) == sorted(f"e{i}" for i, ids in enumerate(texts) for _ in ids[2:])
    assert table["example_id"].ne(table["example_id"].shift()).sum() == len(texts)
    for row, (ids, target) in enumerate(zip(texts, TARGETS)):
        rows = table[table["example_id"] == f"e{row}"]
        assert rows["position"].tolist() == list(range(1, len(ids) - 1))
        assert rows["token"].tolist() == tokenizer.convert_ids_to_tokens(ids)[1:-1]
        assert (rows["task"] == "t").all() and (rows["token_label"] == -1).all()
        expected = direct_signals(family, model, tokenizer, ids, target, -1, direct_pass)
        inner = {name: values[1:-1] for name, values in expected.items()}
        assert_columns_equal(torch.as_tensor(rows[columns].to_numpy(np.float32)), columns, inner,
                             f"{family} rows of text {row}")
