"""Fixtures of the explainer tests: `planted_classifier(family)`, a three-class classifier of any family whose weights
are set by hand so that one planted word drives each class.

The construction (hidden size 24, 3 heads of 8, 2 layers, eager attention), in directions of the residual stream that
are all zero-mean, so that every LayerNorm (gain 1, bias 0) keeps them:
- word embeddings: [CLS] is a direction `z`; the planted word of class c (PLANTED_WORDS) is u_c + r; every other token
  (fillers, [SEP], padding, the mask token) is a random multiple of r alone. Every absolute position embedding is the
  same vector p, token types and relative-position terms are 0. (p keeps the planted embedding from being the
  LayerNorm's whole input, which would make gradient . input 0: DeBERTa-v3 has no absolute positions, so there it
  is 0, `INPUT_GRADIENT_BLIND`; r keeps a gradient along u_c from being projected out by that LayerNorm.)
- block 1 passes its input through (every attention and feed-forward projection 0), so AttCAT, which reads the
  gradients at the non-last layers, has a layer to read;
- block 2, head c: [CLS]'s query reads z and every key reads u_c, so [CLS] attends in head c to the word of class c
  alone (a saturated softmax); its value reads u_c and its output writes u_c into [CLS];
- the head (pooler / dense, then the output layer) turns [CLS]'s u_c into logit c, in the increasing range of its
  activation (tanh, GELU or ReLU).

So logit c rises with the word of class c and with no other token (up to the final LayerNorm's coupling of the
three), and every class-aware method asked for class c has one right answer among the three planted words.
"""
from __future__ import annotations

import pytest

from learned_attribution.core.models.architectures import SUPPORTED_MODEL_TYPES

PLANTED_WORDS = ("good", "bad", "fun")  # the word that drives class 0, 1, 2
PLANTED_TEXT = "The film good was bad and it fun ."  # holds all three, none first (byte-level BPE's bare first word)
PLANTED_HIDDEN, PLANTED_HEADS = 24, 3
# Families whose embedding output is LayerNorm(word embeddings) alone (DeBERTa-v3: no absolute positions, no token
# types): LayerNorm is scale-invariant, so gradient . input (input x gradient) is 0 at every token, whatever the class.
INPUT_GRADIENT_BLIND = ("deberta-v2",)

# The linear layers of a block, by the suffixes the families name them with.
_LINEARS = {"query": ("attention.self.query", "q_lin", "query_proj", "attn.q"),
            "key": ("attention.self.key", "k_lin", "key_proj", "attn.k"),
            "value": ("attention.self.value", "v_lin", "value_proj", "attn.v"),
            "out": ("attention.output.dense", "out_lin", "attn.o"),
            "feed_forward_out": ("output.dense", "ffn.lin2")}
# (first layer, output layer) of each family's classification head
_HEADS = (("bert.pooler.dense", "classifier"), ("classifier.dense", "classifier.out_proj"),
          ("pre_classifier", "classifier"), ("pooler.dense", "classifier"))
_ZEROED = ("position_embeddings", "token_type_embeddings", "relative_attention_bias", "pos_key_proj", "pos_query_proj")


def _direction(index: int, width: int):
    """The zero-mean direction e_index - e_(index+1) of a `width`-wide stream."""
    import torch

    vector = torch.zeros(width)
    vector[index], vector[index + 1] = 1.0, -1.0
    return vector


def _linear(block, kind: str):
    import torch

    for name, module in block.named_modules():
        if not isinstance(module, torch.nn.Linear) or (kind == "feed_forward_out" and "attention" in name):
            continue
        if any(name == suffix or name.endswith("." + suffix) for suffix in _LINEARS[kind]):
            return module
    raise LookupError(f"no {kind} projection in {type(block).__name__}")


def planted_word_id(tokenizer, word: str) -> int:
    """The id of `word` as the tokenizer spells it after a space (WordPiece, `Ġ`, `▁`)."""
    for token in (word, f"Ġ{word}", f"▁{word}"):
        index = tokenizer.convert_tokens_to_ids(token)
        if index is not None and index != tokenizer.unk_token_id:
            return index
    raise LookupError(f"{word!r} is not one token of {type(tokenizer).__name__}")


def _build(family: str, make_tiny_classifier, seed: int = 0, attend: float = 2.0, carry: float = 0.5,
           read: float = 0.15, gain: float = 10.0):
    """(model, tokenizer): the planted classifier of `family` (see the module docstring), built on the root conftest's
    `make_tiny_classifier` (passed in: a fixture)."""
    import torch

    from learned_attribution.core.models.architectures import architecture

    model, tokenizer = make_tiny_classifier(family, n_layers=2, n_heads=PLANTED_HEADS, hidden=PLANTED_HIDDEN,
                                            num_labels=3, seed=seed)
    z, p, r = _direction(0, 12), _direction(2, 12), _direction(4, 12)
    planted = [_direction(6 + 2 * c, 12) for c in range(3)]

    def wide(vector, width: int):  # every direction lives in the first 12 units (ELECTRA's embedding width)
        return torch.cat([vector, torch.zeros(width - len(vector))])

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if any(part in name for part in _ZEROED):
                parameter.zero_()
            if "position_embeddings" in name:
                parameter.copy_(wide(p, parameter.shape[1]).expand_as(parameter))
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.fill_(1.0)
                module.bias.zero_()
        embeddings = model.get_input_embeddings().weight
        width = embeddings.shape[1]
        embeddings.copy_(wide(r, width) * (0.5 + torch.rand(embeddings.shape[0], 1, generator=generator)))
        embeddings[tokenizer.cls_token_id] = wide(z, width)
        for c, word in enumerate(PLANTED_WORDS):
            embeddings[planted_word_id(tokenizer, word)] = wide(planted[c] + r, width)
        project = getattr(getattr(model, "electra", None), "embeddings_project", None)
        if project is not None:  # ELECTRA's narrower embeddings enter the stream's first units unchanged
            project.weight.zero_()
            project.bias.zero_()
            project.weight[:width, :width] = torch.eye(width)
        blocks = architecture(model).blocks(model)
        head_width = PLANTED_HIDDEN // PLANTED_HEADS
        for index, block in enumerate(blocks):
            for kind in _LINEARS:
                _linear(block, kind).weight.zero_()
                _linear(block, kind).bias.zero_()
            if index < len(blocks) - 1:
                continue
            for c in range(PLANTED_HEADS):
                row = head_width * c
                _linear(block, "query").weight[row] = attend * wide(z, PLANTED_HIDDEN)
                _linear(block, "key").weight[row] = attend * wide(planted[c], PLANTED_HIDDEN)
                _linear(block, "value").weight[row] = carry * wide(planted[c], PLANTED_HIDDEN)
                _linear(block, "out").weight[:, row] = carry * wide(planted[c], PLANTED_HIDDEN)
        modules = dict(model.named_modules())
        first, output = next((modules[a], modules[b]) for a, b in _HEADS if a in modules and b in modules)
        for layer in (first, output):
            layer.weight.zero_()
            layer.bias.zero_()
        for c in range(3):
            first.weight[c] = read * wide(planted[c], PLANTED_HIDDEN)
            first.bias[c] = 0.5  # tanh, GELU and ReLU all increase there
            output.weight[c, c] = gain
    return model.eval(), tokenizer


@pytest.fixture(scope="session")
def planted_classifier(tiny_classifier):
    """Factory fixture: `planted_classifier(family, seed=0) -> (model, tokenizer)` (see the module docstring)."""

    def make(family: str, seed: int = 0):
        return _build(family, tiny_classifier, seed)

    return make


@pytest.fixture(scope="session")
def planted_words() -> tuple[str, str, str]:
    """The words that drive class 0, 1 and 2 of `planted_classifier`."""
    return PLANTED_WORDS


@pytest.fixture(scope="session")
def planted_text() -> str:
    """A text that holds the three planted words."""
    return PLANTED_TEXT


@pytest.fixture(scope="session")
def input_gradient_blind() -> tuple[str, ...]:
    """The families whose input x gradient is 0 at every token (`INPUT_GRADIENT_BLIND`)."""
    return INPUT_GRADIENT_BLIND


# The planted-class tests (test_target_classes.py, test_contrast_classes.py) run once per family on its planted
# classifier; test_every_family.py defines its own `family` and `classifier` over the known-answer classifiers.
@pytest.fixture(scope="module", params=SUPPORTED_MODEL_TYPES)
def family(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def classifier(family, planted_classifier):
    return planted_classifier(family)
