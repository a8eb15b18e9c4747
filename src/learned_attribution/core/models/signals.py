"""Per-token input signals for ExpNet+, in named feature sets, from one pass of the explained classifier.

Feature sets (columns per token; H heads, L layers, `layer` = the attention layer ExpNet reads):
- `attention` (2H): the paper's inputs, A_h[CLS -> j] and A_h[j -> CLS] at `layer` (SPEC §5).
- `attention_x_gradient` (H): A_h[CLS -> j] * d logit / d A_h[CLS -> j] at `layer`, per head, signed.
- `layer_gradient` (2): ||g_j|| and g_j . h_j, g = d logit / d h at the input of `layer` (h_j its hidden state).
- `saliency` (2): the same at the word-embedding output (the `saliency` baseline's gradient, before position
  embeddings and LayerNorm): a full backward pass.
- `raw_attention_layers` (L): mean over heads of A[CLS -> j] at every layer.
- `afn_norm` (L + 1): ||h_j|| at every layer (0 = embedding output), the AFN strength of SPEC §10.
- `position` (4): relative position among the non-special tokens, 1 / their number, continuation flag (the
  piece continues the word of the piece before it, by the tokenizer's own convention: `##` for WordPiece, no
  `Ġ` / `▁` word-start marker for byte-level BPE / SentencePiece, see `token_vocabulary`), last-token flag.
- `token_kind` (3): punctuation (every character a Unicode punctuation or symbol), closed-class word
  (`afn.words.FUNCTION_WORDS`, the AFN pipeline's list: determiners, pronouns, prepositions, conjunctions,
  auxiliaries, particles; only a piece that starts a word), and content token (a real token that is neither). A
  word piece is classed as a word of its own: the "t" of "don ' t" is a content token, its "'" punctuation.
  Task-independent facts about the token that post-hoc attributions are known to over- or under-weight
  (structural tokens), so a network can learn to correct for them.

Shape-free sets: columns that do not depend on the number of layers or heads, so an explainer over them
reads a classifier of any depth and head count (`SHAPE_FREE_SETS`: these four and `layer_gradient`, `saliency`,
`position`, `token_kind`):
- `attention_stats` (6): mean, max and standard deviation over the heads of A_h[CLS -> j] and of A_h[j -> CLS] at
  `layer` (the per-head columns of `attention`, summarised).
- `attention_x_gradient_stats` (3): mean, max and min over the heads of `attention_x_gradient`, signed.
- `raw_attention_depths` (4): `raw_attention_layers` read at the relative depths `RELATIVE_DEPTHS` (0 = the first
  layer, 1 = the last), linearly interpolated between layers.
- `afn_norm_depths` (4): `afn_norm` read the same way over the hidden states (0 = the embedding output).

Wide set: `hidden_state` (the classifier's hidden size): the token's hidden state at the output of `layer` (the last
by default: what the classification head reads), the token in its context. The amortized students read it: a
per-token network over scalar signals alone sees nothing of a token's neighbours, and underfits the teacher.

Gradients are of the explained (predicted) class's logit, so the signed columns (`signed_columns`: attention x
gradient, gradient . input) flip with the prediction: on a mispredicted example they point away from the
evidence for the true class, while the norms do not. With a contrast class (`signals_and_logits(contrast=...)`) they
are of the target's margin over it, logit[target] - logit[contrast] (`model_pass.explained_logit`). The sets
without a gradient (`GRADIENT_SETS` aside) are the same for every class.

Every set reads one pass of the classifier (`model_pass.run_pass`, the engine the pass baselines of
`core/explainers/passes.py` read too; `pass_needs`: what the sets ask of it). Only the sets that need them run a
backward pass, and only from the earliest layer they need: the attention/layer-gradient sets backpropagate
through the last layers alone (the classifier's weights are frozen during the pass and the graph starts
at that layer's input), which is what keeps ExpNet+ near a forward pass in cost.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import torch

from learned_attribution.core.data.words import FUNCTION_WORDS, is_punctuation

from .architectures import architecture, token_convention
from .features import cls_attention_features, extract_token_rows, feature_names, frame_token_ids
from .model_pass import (ATTENTIONS, BLOCK_ATTENTION_GRADIENTS, BLOCK_INPUT_GRADIENTS, EMBEDDING_GRADIENTS,
                         HIDDEN_STATES, PassInputs, run_pass)
from .runner import model_device

FEATURE_SETS = ("attention", "attention_x_gradient", "layer_gradient", "saliency", "raw_attention_layers", "afn_norm",
                "position", "token_kind", "attention_stats", "attention_x_gradient_stats", "raw_attention_depths",
                "afn_norm_depths")
SHAPE_FREE_SETS = ("attention_stats", "attention_x_gradient_stats", "layer_gradient", "saliency",
                   "raw_attention_depths", "afn_norm_depths", "position", "token_kind")
# Wide sets: one column per hidden unit of the classifier. They are read by explainers bound to one classifier (the
# amortized students), and not among the FEATURE_SETS the classifiers pipeline extracts for every rationale token.
WIDE_SETS = ("hidden_state",)
KNOWN_SETS = FEATURE_SETS + WIDE_SETS
# What a set reads of the pass beyond the attentions (`pass_needs`); the block needs are at the explained layer.
_SET_NEEDS = {"attention_x_gradient": BLOCK_ATTENTION_GRADIENTS, "attention_x_gradient_stats": BLOCK_ATTENTION_GRADIENTS,
              "layer_gradient": BLOCK_INPUT_GRADIENTS, "saliency": EMBEDDING_GRADIENTS, "afn_norm": HIDDEN_STATES,
              "afn_norm_depths": HIDDEN_STATES, "hidden_state": HIDDEN_STATES}
# The sets that run a backward pass (their values follow the explained class), read off what they need.
GRADIENT_SETS = frozenset(name for name, need in _SET_NEEDS.items()
                          if need in (BLOCK_ATTENTION_GRADIENTS, BLOCK_INPUT_GRADIENTS, EMBEDDING_GRADIENTS))
RELATIVE_DEPTHS = (0.0, 1 / 3, 2 / 3, 1.0)
_DEPTH_NAMES = tuple(f"d{round(100 * depth)}" for depth in RELATIVE_DEPTHS)


def signal_columns(feature_set: str, n_heads: int, n_layers: int, hidden_size: int | None = None) -> list[str]:
    """Column names of one feature set (`hidden_size`: the classifier's, needed by the wide sets only)."""
    if feature_set == "hidden_state":
        if hidden_size is None:
            raise ValueError("feature set 'hidden_state' has one column per hidden unit: its columns need the "
                             "classifier's hidden_size (it is not among the signals the classifiers pipeline extracts)")
        return [f"hidden_{unit}" for unit in range(hidden_size)]
    columns = {
        "attention": feature_names(n_heads),
        "attention_x_gradient": [f"axg_h{h}" for h in range(n_heads)],
        "layer_gradient": ["layer_grad_norm", "layer_grad_x_input"],
        "saliency": ["embedding_grad_norm", "embedding_grad_x_input"],
        "raw_attention_layers": [f"raw_attention_l{layer}" for layer in range(n_layers)],
        "afn_norm": [f"afn_norm_l{layer}" for layer in range(n_layers + 1)],
        "position": ["relative_position", "inverse_length", "is_continuation", "is_last"],
        "token_kind": ["is_punctuation", "is_closed_class", "is_content"],
        "attention_stats": [f"{direction}_{stat}" for direction in ("cls_to_tok", "tok_to_cls")
                            for stat in ("mean", "max", "sd")],
        "attention_x_gradient_stats": ["axg_mean", "axg_max", "axg_min"],
        "raw_attention_depths": [f"raw_attention_{name}" for name in _DEPTH_NAMES],
        "afn_norm_depths": [f"afn_norm_{name}" for name in _DEPTH_NAMES],
    }
    if feature_set not in columns:
        raise ValueError(f"unknown feature set {feature_set!r}; known: {list(KNOWN_SETS)}")
    return columns[feature_set]


def signed_columns(columns: Sequence[str]) -> list[str]:
    """The columns among `columns` whose sign follows the explained class (attention x gradient per head, gradient
    . input at the layer and at the word embeddings)."""
    return [column for column in columns if column.startswith("axg_") or column.endswith("_grad_x_input")]


def columns_for(feature_sets: Sequence[str], n_heads: int, n_layers: int, hidden_size: int | None = None) -> list[str]:
    """Column names of several feature sets, in the order given."""
    return [column for name in feature_sets for column in signal_columns(name, n_heads, n_layers, hidden_size)]


def model_columns(feature_sets: Sequence[str], config) -> list[str]:
    """`columns_for` a classifier's config (its heads, layers and hidden size)."""
    return columns_for(feature_sets, config.num_attention_heads, config.num_hidden_layers, config.hidden_size)


@dataclass(frozen=True)
class TokenVocabulary:
    """Ids of a vocabulary's continuation pieces, punctuation tokens and closed-class words (the `position` and
    `token_kind` sets read them); empty: no token is any of them.

    `marks_word_starts` (byte-level BPE, SentencePiece): a piece without the word-start marker continues a word,
    except at the first real token (a text's first word has no marker without a prefix space) and right after a
    `boundary` piece (a lone `Ġ` / `▁`, which carries the word start of the piece after it). WordPiece vocabularies
    (the default) mark continuations themselves and need neither rule."""

    continuation: torch.Tensor = field(default_factory=lambda: torch.empty(0, dtype=torch.long))
    punctuation: torch.Tensor = field(default_factory=lambda: torch.empty(0, dtype=torch.long))
    closed_class: torch.Tensor = field(default_factory=lambda: torch.empty(0, dtype=torch.long))
    boundary: torch.Tensor = field(default_factory=lambda: torch.empty(0, dtype=torch.long))
    marks_word_starts: bool = False


def token_vocabulary(tokenizer) -> TokenVocabulary:
    """The `TokenVocabulary` of a tokenizer (one scan of its vocabulary), by its own word-boundary convention
    (`architectures.token_convention`, read from its `tokenizers` backend): WordPiece strings are read raw (a `##`
    piece continues a word); byte-level BPE (`Ġ`) and SentencePiece (`▁`) pieces have their word-start marker
    stripped (byte-level pieces decoded to text) before the punctuation and closed-class lookups, and a piece
    without it continues a word. Special tokens are none of the three."""
    convention = token_convention(tokenizer)
    special = set(getattr(tokenizer, "all_special_tokens", []))
    continuation, punctuation, closed_class, boundary = [], [], [], []
    for token, index in tokenizer.get_vocab().items():
        if token in special:
            continue
        piece = convention.read(token)
        if piece.continues:
            continuation.append(index)
        if piece.boundary:
            boundary.append(index)
        # A boundary piece is structural (it carries a word start and no word): counted with punctuation.
        if piece.boundary or (not piece.partial and is_punctuation(piece.text)):
            punctuation.append(index)
        if piece.text.lower() in FUNCTION_WORDS:
            closed_class.append(index)

    def ids(values: list[int]) -> torch.Tensor:
        return torch.as_tensor(sorted(values), dtype=torch.long)

    return TokenVocabulary(ids(continuation), ids(punctuation), ids(closed_class), ids(boundary),
                           convention.marks_word_starts)


def token_signals(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, target: torch.Tensor,
                  feature_sets: Sequence[str], layer: int = -1, vocabulary: TokenVocabulary | None = None, *,
                  contrast: torch.Tensor | None = None) -> torch.Tensor:
    """[B, T, F] float32 signals for `feature_sets` (columns as `columns_for`), one pass of the classifier."""
    return signals_and_logits(model, input_ids, attention_mask, target, feature_sets, layer, vocabulary,
                              contrast=contrast)[0]


def signal_rows(model: torch.nn.Module, tokenizer, examples, feature_sets: Sequence[str], layer: int = -1,
                batch_size: int = 32, chunk_size: int = 2000, description: str = "explainer signals"):
    """Token-per-row tables of `feature_sets` (`features.extract_token_rows`: example_id, position, token,
    token_label, the signal columns), each example explained for its `predicted` class, one table per
    `chunk_size` examples (a generator: memory stays bounded)."""
    vocabulary = token_vocabulary(tokenizer)
    names = model_columns(feature_sets, model.config)

    def signals_of(input_ids, attention_mask, target):
        return token_signals(model, input_ids, attention_mask, target, feature_sets, layer, vocabulary)

    return extract_token_rows(examples, signals_of, names, batch_size, tokenizer.pad_token_id,
                              frame_token_ids(tokenizer), tokenizer, chunk_size, description)


def pass_needs(feature_sets: Sequence[str]) -> frozenset[str]:
    """What one `run_pass` provides to `feature_sets`: the attentions always (a model that cannot return them is
    refused whatever the sets, as the explainers over the signals read them), the explained block's attention and
    input gradients for the attention x gradient and layer-gradient sets, the word-embedding gradients for
    `saliency` (the one set whose backward pass runs through every layer), the hidden states for the norm sets and
    `hidden_state`."""
    return frozenset({ATTENTIONS, *(_SET_NEEDS[name] for name in feature_sets if name in _SET_NEEDS)})


def explained_block(layer: int, n_layers: int) -> int:
    """The block index (0 the first) of an explained `layer` (negative: counted from the last); its output is
    `hidden_states[index + 1]` (`hidden_states[0]` is the embedding output)."""
    if not -n_layers <= layer < n_layers:
        raise ValueError(f"parameter layer={layer} is out of range for a model with {n_layers} layers")
    return layer % n_layers


def signals_and_logits(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                       target: torch.Tensor | None, feature_sets: Sequence[str], layer: int = -1,
                       vocabulary: TokenVocabulary | None = None, *,
                       contrast: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """`token_signals` and the classifier's logits [B, C] of the same pass; `target=None` explains the
    predicted class (read from those logits), so classifying and explaining new text is one pass; `contrast` [B]
    (needs a target): the gradient sets explain the target's margin over that class."""
    unknown = set(feature_sets) - set(KNOWN_SETS)
    if unknown:
        raise ValueError(f"unknown feature sets {sorted(unknown)}; known: {list(KNOWN_SETS)}")
    family = architecture(model)  # an unsupported family fails here, naming the supported ones
    layer = explained_block(layer, len(family.blocks(model)))
    device = model_device(model)  # every signal part on the model's device (position flags included)
    input_ids, attention_mask = input_ids.to(device), attention_mask.to(device)
    # Every set's columns in the dtype the model computed them in, cast to float32 once at the end.
    run = run_pass(model, PassInputs(input_ids, attention_mask, target, contrast), pass_needs(feature_sets),
                   block=layer, float32=False)
    attentions = run.attentions
    parts = []
    for name in feature_sets:
        if name == "attention":
            parts.append(cls_attention_features(attentions[layer]))
        elif name == "attention_x_gradient":
            parts.append((attentions[layer][:, :, 0, :] * run.block_attention_gradients[:, :, 0, :]).transpose(1, 2))
        elif name == "attention_stats":
            attention = attentions[layer]
            parts.append(torch.cat([_head_statistics(attention[:, :, 0, :], ("mean", "max", "sd")),
                                    _head_statistics(attention[:, :, :, 0], ("mean", "max", "sd"))], dim=-1))
        elif name == "attention_x_gradient_stats":
            product = attentions[layer][:, :, 0, :] * run.block_attention_gradients[:, :, 0, :]
            parts.append(_head_statistics(product, ("mean", "max", "min")))
        elif name in ("layer_gradient", "saliency"):
            gradient, hidden = ((run.block_input_gradients, run.block_input) if name == "layer_gradient"
                                else (run.embedding_gradients, run.word_embeddings))
            parts.append(torch.stack([gradient.norm(dim=-1), (gradient * hidden).sum(-1)], dim=-1))
        elif name == "raw_attention_layers":
            parts.append(torch.stack([a[:, :, 0, :].mean(1) for a in attentions], dim=-1))
        elif name == "afn_norm":
            parts.append(torch.stack([h.norm(dim=-1) for h in run.hidden_states], dim=-1))
        elif name == "raw_attention_depths":
            parts.append(at_relative_depths(torch.stack([a[:, :, 0, :].mean(1) for a in attentions], dim=-1)))
        elif name == "afn_norm_depths":
            parts.append(at_relative_depths(torch.stack([h.norm(dim=-1) for h in run.hidden_states], dim=-1)))
        elif name == "hidden_state":  # the output of the explained layer (hidden_states[0] is the embeddings)
            parts.append(run.hidden_states[layer + 1])
        elif name == "position":
            parts.append(position_signals(input_ids, attention_mask, vocabulary))
        elif name == "token_kind":
            parts.append(token_kind_signals(input_ids, attention_mask, vocabulary))
    if not parts:  # no feature set (an encoder student's table): the token rows alone
        parts.append(torch.zeros((*input_ids.shape, 0)))
    return torch.cat([p.float() for p in parts], dim=-1), run.logits.float()


def _head_statistics(values: torch.Tensor, statistics: Sequence[str]) -> torch.Tensor:
    """[B, H, T] per-head values -> [B, T, len(statistics)] over the heads (`sd`: population standard deviation,
    0 for one head)."""
    computed = {"mean": lambda: values.mean(1), "max": lambda: values.amax(1), "min": lambda: values.amin(1),
                "sd": lambda: values.std(1, unbiased=False)}
    return torch.stack([computed[name]() for name in statistics], dim=-1)


def at_relative_depths(values: torch.Tensor, depths: Sequence[float] = RELATIVE_DEPTHS) -> torch.Tensor:
    """[..., K] values of K consecutive layers -> [..., len(depths)] read at relative depths in [0, 1] (0 the first,
    1 the last), linearly interpolated between the two nearest layers, so models of any depth give the same
    columns."""
    last = values.shape[-1] - 1
    columns = []
    for depth in depths:
        position = depth * last
        low = int(position)
        high = min(low + 1, last)
        weight = position - low
        columns.append(values[..., low] * (1 - weight) + values[..., high] * weight)
    return torch.stack(columns, dim=-1)


def continuation_signals(input_ids: torch.Tensor, vocabulary: TokenVocabulary | None) -> torch.Tensor:
    """[B, T] 1 where a token continues the word of the token before it (see `TokenVocabulary`)."""
    vocabulary = vocabulary or TokenVocabulary()
    continuation = _member(input_ids, vocabulary.continuation)
    if vocabulary.marks_word_starts and input_ids.shape[1] > 1:
        starts = torch.zeros_like(continuation)
        starts[:, 1] = 1  # the first real token starts a word, marker or not
        starts[:, 2:] = _member(input_ids[:, 1:-1], vocabulary.boundary)  # the piece after a lone marker
        continuation = continuation * (1 - starts)
    return continuation


def position_signals(input_ids: torch.Tensor, attention_mask: torch.Tensor,
                     vocabulary: TokenVocabulary | None) -> torch.Tensor:
    """[B, T, 4]: relative position among the non-special tokens (0 first .. 1 last), 1 / their number,
    continuation flag, last-token flag. Sequences are [CLS] tokens... [SEP] then padding."""
    n_real = attention_mask.sum(1, keepdim=True).float() - 2  # minus [CLS] and [SEP]
    index = torch.arange(input_ids.shape[1], dtype=torch.float32, device=input_ids.device)[None, :] - 1  # 0 at the first real token
    relative = (index / (n_real - 1).clamp(min=1)).clamp(0, 1)
    inverse_length = (1 / n_real.clamp(min=1)).expand_as(relative)
    continuation = continuation_signals(input_ids, vocabulary)
    last = (index == n_real - 1).float()
    return torch.stack([relative, inverse_length, continuation, last], dim=-1)


def token_kind_signals(input_ids: torch.Tensor, attention_mask: torch.Tensor,
                       vocabulary: TokenVocabulary | None) -> torch.Tensor:
    """[B, T, 3]: punctuation, closed-class word (a closed-class piece that starts a word), content token (a real
    token that is neither; [CLS], [SEP] and padding are 0)."""
    vocabulary = vocabulary or TokenVocabulary()
    punctuation = _member(input_ids, vocabulary.punctuation)
    # A continuation piece that spells "a" or "the" is part of another word (WordPiece's "##a" never matched).
    closed = _member(input_ids, vocabulary.closed_class) * (1 - continuation_signals(input_ids, vocabulary))
    index = torch.arange(input_ids.shape[1], device=input_ids.device)[None, :]
    real = (attention_mask > 0) & (index > 0) & (index < attention_mask.sum(1, keepdim=True) - 1)
    return torch.stack([punctuation, closed, real.float() * (1 - punctuation) * (1 - closed)], dim=-1)


def _member(input_ids: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    return torch.isin(input_ids, ids.to(input_ids.device)).float()
