"""ExpNet+ feature sets against direct computations on a tiny random BERT."""
import pytest
import torch

from learned_attribution.core.models.signals import (FEATURE_SETS, WIDE_SETS, TokenVocabulary, columns_for, model_columns,
                                               position_signals, signal_columns, token_signals, token_vocabulary)

HEADS, LAYERS = 2, 3


@pytest.fixture
def model(tiny_bert_classifier):
    return tiny_bert_classifier(num_hidden_layers=LAYERS, seed=3)


@pytest.fixture
def batch():
    # [CLS]=1, [SEP]=2, pad 0; the second example is shorter (padded)
    input_ids = torch.tensor([[1, 5, 6, 7, 8, 2], [1, 9, 10, 2, 0, 0]])
    attention_mask = (input_ids != 0).long()
    return input_ids, attention_mask, torch.tensor([1, 0])


def _reference(model, input_ids, attention_mask, target):
    """Everything by a plain full-graph pass: attentions, hidden states and gradients w.r.t. them."""
    captured = {}

    def keep(index):
        def hook(module, args, kwargs):
            captured[index] = args[0] if args else kwargs["hidden_states"]
        return hook

    hooks = [block.register_forward_pre_hook(keep(i), with_kwargs=True)
             for i, block in enumerate(model.bert.encoder.layer)]
    words = model.bert.embeddings.word_embeddings(input_ids).detach().requires_grad_(True)
    captured["words"] = words
    hooks.append(model.bert.embeddings.word_embeddings.register_forward_hook(lambda module, inputs, output: words))
    output = model(input_ids=input_ids, attention_mask=attention_mask, output_attentions=True,
                   output_hidden_states=True)
    for hook in hooks:
        hook.remove()
    logit = output.logits.gather(1, target[:, None]).sum()
    g_attention, g_last, g_first = torch.autograd.grad(logit, [output.attentions[-1], captured[LAYERS - 1],
                                                                captured["words"]])
    return output, captured, g_attention, g_last, g_first


def test_every_set_equals_a_direct_computation(model, batch):
    input_ids, attention_mask, target = batch
    signals = token_signals(model, input_ids, attention_mask, target, FEATURE_SETS, layer=-1,
                            vocabulary=TokenVocabulary(continuation=torch.tensor([7, 10]),
                                                       punctuation=torch.tensor([8, 2]), closed_class=torch.tensor([5])))
    names = columns_for(FEATURE_SETS, HEADS, LAYERS)
    assert signals.shape == (2, 6, len(names))
    column = {name: signals[..., i] for i, name in enumerate(names)}
    output, captured, g_attention, g_last, g_first = _reference(model, input_ids, attention_mask, target)
    last = output.attentions[-1]
    for h in range(HEADS):
        torch.testing.assert_close(column[f"cls_to_tok_h{h}"], last[:, h, 0, :])
        torch.testing.assert_close(column[f"tok_to_cls_h{h}"], last[:, h, :, 0])
        torch.testing.assert_close(column[f"axg_h{h}"], last[:, h, 0, :] * g_attention[:, h, 0, :])
    torch.testing.assert_close(column["layer_grad_norm"], g_last.norm(dim=-1))
    torch.testing.assert_close(column["layer_grad_x_input"], (g_last * captured[LAYERS - 1]).sum(-1))
    torch.testing.assert_close(column["embedding_grad_norm"], g_first.norm(dim=-1))
    torch.testing.assert_close(column["embedding_grad_x_input"], (g_first * captured["words"]).sum(-1))
    for layer in range(LAYERS):
        torch.testing.assert_close(column[f"raw_attention_l{layer}"], output.attentions[layer][:, :, 0, :].mean(1))
    for layer in range(LAYERS + 1):
        torch.testing.assert_close(column[f"afn_norm_l{layer}"], output.hidden_states[layer].norm(dim=-1))
    # position: 4 real tokens in row 0, 2 in row 1
    torch.testing.assert_close(column["relative_position"][0, 1:5], torch.tensor([0, 1 / 3, 2 / 3, 1]))
    torch.testing.assert_close(column["relative_position"][1, 1:3], torch.tensor([0.0, 1.0]))
    assert column["inverse_length"][0, 1].item() == pytest.approx(0.25)
    assert column["is_continuation"][0].tolist() == [0, 0, 0, 1, 0, 0]
    assert column["is_continuation"][1].tolist() == [0, 0, 1, 0, 0, 0]
    assert column["is_last"][0].tolist() == [0, 0, 0, 0, 1, 0]
    # token kinds: ids 8 and 2 listed as punctuation, 5 as closed-class; content tokens lie between [CLS] and [SEP]
    assert column["is_punctuation"][0].tolist() == [0, 0, 0, 0, 1, 1]
    assert column["is_closed_class"][0].tolist() == [0, 1, 0, 0, 0, 0]
    assert column["is_content"][0].tolist() == [0, 0, 1, 1, 0, 0]
    assert column["is_content"][1].tolist() == [0, 1, 1, 0, 0, 0]


def test_hidden_state_is_the_explained_layers_output(model, batch):
    """The wide set: each token's hidden state at the output of `layer` (the last by default), beside the other
    sets in the one pass; its columns come from the classifier's hidden size."""
    input_ids, attention_mask, target = batch
    output = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
    hidden_size = model.config.hidden_size
    names = model_columns(["saliency", "hidden_state"], model.config)
    assert names == columns_for(["saliency"], HEADS, LAYERS) + [f"hidden_{i}" for i in range(hidden_size)]
    signals = token_signals(model, input_ids, attention_mask, target, ["saliency", "hidden_state"])
    assert signals.shape == (2, 6, len(names))
    torch.testing.assert_close(signals[..., 2:], output.hidden_states[LAYERS].detach())
    middle = token_signals(model, input_ids, attention_mask, target, ["hidden_state"], layer=1)
    torch.testing.assert_close(middle, output.hidden_states[2].detach())
    assert set(WIDE_SETS).isdisjoint(FEATURE_SETS)  # the classifiers pipeline never stores them per rationale token


def test_hidden_state_columns_need_the_hidden_size():
    with pytest.raises(ValueError, match="hidden_size"):
        columns_for(["attention", "hidden_state"], HEADS, LAYERS)
    assert signal_columns("hidden_state", HEADS, LAYERS, hidden_size=3) == ["hidden_0", "hidden_1", "hidden_2"]


def test_cheap_gradients_match_and_leave_the_model_untouched(model, batch):
    """The last-layer-only backward gives the same gradient as the full graph, and restores requires_grad."""
    input_ids, attention_mask, target = batch
    cheap = token_signals(model, input_ids, attention_mask, target, ["attention_x_gradient", "layer_gradient"])
    full = token_signals(model, input_ids, attention_mask, target, ["attention_x_gradient", "layer_gradient", "saliency"])
    torch.testing.assert_close(cheap, full[..., :cheap.shape[-1]])
    assert all(p.requires_grad for p in model.parameters())
    assert all(p.grad is None for p in model.parameters())


def test_padding_does_not_change_real_tokens(model):
    short = torch.tensor([[1, 9, 10, 2]])
    padded = torch.tensor([[1, 9, 10, 2, 0, 0]])
    a = token_signals(model, short, torch.ones_like(short), torch.tensor([1]), FEATURE_SETS)
    b = token_signals(model, padded, (padded != 0).long(), torch.tensor([1]), FEATURE_SETS)
    torch.testing.assert_close(a[0], b[0, :4], atol=1e-5, rtol=1e-4)


def test_unknown_set_and_layer_are_errors(model, batch):
    input_ids, attention_mask, target = batch
    with pytest.raises(ValueError, match="unknown feature sets"):
        token_signals(model, input_ids, attention_mask, target, ["attention", "magic"])
    with pytest.raises(ValueError, match="layer=7"):
        token_signals(model, input_ids, attention_mask, target, ["attention"], layer=7)


def test_position_without_vocabulary_has_no_continuations():
    ids = torch.tensor([[1, 5, 2]])
    signals = position_signals(ids, torch.ones_like(ids), None)
    assert signals[0, 1].tolist() == [0.0, 1.0, 0.0, 1.0]


def test_saliency_set_is_the_saliency_baseline(model, batch):
    from learned_attribution.core.explainers import build_method
    from learned_attribution.core.explainers.base import padded_batch

    input_ids, attention_mask, target = batch
    rows = [row[mask.bool()].tolist() for row, mask in zip(input_ids, attention_mask)]
    baseline = build_method("saliency").explain(
        model, padded_batch(rows, target.tolist(), pad_token_id=0, mask_token_id=3, frame_token_ids=[1, 2, 0]))
    signals = token_signals(model, input_ids, attention_mask, target, ["saliency"])
    real = attention_mask.bool()
    torch.testing.assert_close(signals[..., 0][real], baseline.scores[real], rtol=1e-4, atol=1e-6)


def test_token_vocabulary_of_a_wordpiece_tokenizer(tmp_path):
    from transformers import BertTokenizerFast

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "movie", "##s", ".", "!?", "of", "great", "2",
             "how", "like"]
    (tmp_path / "vocab.txt").write_text("\n".join(words) + "\n")
    tokenizer = BertTokenizerFast(str(tmp_path / "vocab.txt"))
    vocabulary = token_vocabulary(tokenizer)
    index = {w: i for i, w in enumerate(words)}
    assert vocabulary.continuation.tolist() == [index["##s"]]
    assert vocabulary.punctuation.tolist() == [index["."], index["!?"]]  # special tokens are never punctuation
    # closed-class = the AFN pipeline's FUNCTION_WORDS ("how" is in it, the verb/preposition "like" is not)
    assert vocabulary.closed_class.tolist() == [index["the"], index["of"], index["how"]]
