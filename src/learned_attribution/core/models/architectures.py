"""What the package reads inside a classifier and its tokenizer, per model family: one table (`ARCHITECTURES`).

Nothing else in the package names a family's attributes; the signals, the attention features, the explainers,
AFN, word-to-subword projection, the explain API and the benchmarks ask this module. The pattern is inseq's
`model_config.yaml`: one entry per Hugging Face `model_type`, checked against the transformers 5 sources.

| model_type  | blocks, under `model.base_model` | tokenizer: word boundaries  | word lists need   | position ids   |
|-------------|----------------------------------|-----------------------------|-------------------|----------------|
| bert        | encoder.layer                    | WordPiece, `##` continues   | -                 | 0, 1, ...      |
| roberta     | encoder.layer                    | byte-level BPE, `Ġ` starts  | add_prefix_space  | after pad (1)  |
| xlm-roberta | encoder.layer                    | SentencePiece, `▁` starts   | -                 | after pad (1)  |
| camembert   | encoder.layer                    | SentencePiece, `▁` starts   | -                 | after pad (1)  |
| distilbert  | transformer.layer                | WordPiece, `##` continues   | -                 | 0, 1, ...      |
| electra     | encoder.layer                    | WordPiece, `##` continues   | -                 | 0, 1, ...      |
| deberta-v2  | encoder.layer                    | SentencePiece, `▁` starts   | -                 | 0, 1 / relative|
| mpnet       | encoder.layer                    | WordPiece, `##` continues   | -                 | after pad (1)  |

Shared by every family in the table (checked in each `modeling_<family>.py`): the word embeddings are
`model.get_input_embeddings()` (an `nn.Embedding` whose output is the "input embedding" of the gradient methods;
ELECTRA's and DeBERTa's may be narrower than the hidden size); a block is called with its input hidden states as
positional argument 0 (`hidden_states` by keyword for a caller that names it); attention probabilities come back
per block as `output.attentions` ([B, H, T, T], rows summing to 1) when the model runs the eager attention
implementation with `output_attentions=True`; `output.hidden_states` holds the embedding output then every
block's output; a single text is framed `cls ... sep` (`<s> ... </s>` for RoBERTa, XLM-R, CamemBERT and MPNet),
so [CLS] sits at position 0.

A block's feed-forward width is the config's `intermediate_size` (DistilBERT's `hidden_dim`); hidden size, heads
and depth are read through the config's standard names (`hidden_size`, `num_attention_heads`, `num_hidden_layers`),
which DistilBERT's config maps onto its own.

Not in the table: ALBERT (one block shared across depth, `encoder.albert_layer_groups`: a hook on "block l" would
fire at every layer, and there is no per-layer module to read) and decoder families (GPT-2, T5, ...).

Tokenizer conventions are read from the tokenizer itself (`token_convention`: its `tokenizers` model and
pre-tokenizer), so a classifier shipped with an unusual tokenizer is read correctly; the table's convention is the
fallback for a tokenizer without a `tokenizers` backend.
"""
from __future__ import annotations

import copy
import json
import logging
import weakref
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)


class UnsupportedArchitectureError(ValueError):
    """A classifier whose model family is not in `ARCHITECTURES`."""

    def __init__(self, model_type: object):
        self.model_type = model_type
        super().__init__(f"model type {model_type!r} is not supported: learned-attribution reads the internals of "
                         f"{', '.join(SUPPORTED_MODEL_TYPES)} encoders (core/models/architectures.py)")


# ----------------------------------------------------------------------------------------------------
# Tokenizer conventions
# ----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Piece:
    """One vocabulary entry as a word boundary reader sees it."""

    text: str  # the piece's characters without its boundary mark (`##`, `Ġ`, `▁`)
    continues: bool  # the piece continues the word of the piece before it
    boundary: bool  # a whitespace-only piece (a lone `Ġ` / `▁`): it marks a word start and carries no word
    partial: bool = False  # byte-level bytes of a character split across pieces (no readable text)


@lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-to-unicode table, inverted: the byte each byte-level BPE character stands for."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    codes = list(printable)
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            codes.append(256 + extra)
            extra += 1
    return {chr(code): byte for byte, code in zip(printable, codes)}


@dataclass(frozen=True)
class TokenConvention:
    """How a tokenizer's vocabulary marks word boundaries: WordPiece marks the pieces that continue a word
    (`continuation_prefix`), byte-level BPE and SentencePiece mark the pieces that start one
    (`word_start_marker`)."""

    name: str
    continuation_prefix: str = ""
    word_start_marker: str = ""
    byte_level: bool = False  # pieces are GPT-2 byte-to-unicode strings: decoded to text before they are read

    @property
    def marks_word_starts(self) -> bool:
        """A piece without the marker continues a word, except the text's first piece: with no prefix space
        the first word of a plain text carries no marker, so callers treat the first real token as a word start."""
        return bool(self.word_start_marker)

    def read(self, token: str) -> Piece:
        """The `Piece` of a vocabulary string. WordPiece strings are read raw (a `##` piece keeps its `##` for
        the punctuation and closed-class lookups, as it always has); marker conventions strip their marker."""
        if not self.marks_word_starts:
            return Piece(token, bool(self.continuation_prefix) and token.startswith(self.continuation_prefix), False)
        text, marker, partial = token, self.word_start_marker, False
        if self.byte_level:
            decoder = _byte_decoder()
            if all(char in decoder for char in token):
                text = bytes(decoder[char] for char in token).decode("utf-8", errors="replace")
                marker, partial = " ", "\ufffd" in text
        starts = text.startswith(marker)
        body = text[len(marker):] if starts else text
        boundary = not body.strip()
        return Piece(body, not starts and not boundary, boundary, partial)


WORDPIECE = TokenConvention("WordPiece", continuation_prefix="##")
BYTE_LEVEL_BPE = TokenConvention("byte-level BPE", word_start_marker="Ġ", byte_level=True)
SENTENCEPIECE = TokenConvention("SentencePiece", word_start_marker="▁")


def _state(component: Any) -> dict:
    """The JSON state of a `tokenizers` component (pre-tokenizer, decoder); {} when it has none."""
    if component is None:
        return {}
    try:
        return json.loads(component.__getstate__())
    except (AttributeError, TypeError, ValueError):
        return {}


def _parts(state: Any) -> list[dict]:
    """Every component dict (with a "type") inside a nested `tokenizers` state, the state itself included."""
    found = []
    if isinstance(state, dict):
        if "type" in state:
            found.append(state)
        for value in state.values():
            found.extend(_parts(value))
    elif isinstance(state, list):
        for value in state:
            found.extend(_parts(value))
    return found


def token_convention(tokenizer, default: TokenConvention = WORDPIECE) -> TokenConvention:
    """The word-boundary convention of a fast tokenizer, read from its `tokenizers` backend: a WordPiece model
    (or a BPE with a continuing-subword prefix) marks continuations with that prefix; a BPE or Unigram model behind
    a ByteLevel pre-tokenizer/decoder marks word starts with `Ġ`, behind a Metaspace one with its replacement
    character (`▁`). `default` (WordPiece, the package's original reading) when the backend says nothing."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return default
    model = backend.model
    kind = type(model).__name__
    prefix = getattr(model, "continuing_subword_prefix", None) or ""
    if kind == "WordPiece":
        return TokenConvention("WordPiece", continuation_prefix=prefix or "##")
    if kind == "BPE" and prefix:
        return TokenConvention("BPE with continuation prefix", continuation_prefix=prefix)
    parts = _parts(_state(backend.pre_tokenizer)) + _parts(_state(backend.decoder))
    types = {part["type"] for part in parts}
    if "ByteLevel" in types:
        return BYTE_LEVEL_BPE
    replacement = next((part.get("replacement") for part in parts if part["type"] == "Metaspace"), None)
    if replacement:
        custom = TokenConvention("SentencePiece", word_start_marker=replacement)
        return SENTENCEPIECE if custom == SENTENCEPIECE else custom
    return default


# ----------------------------------------------------------------------------------------------------
# Word lists (`is_split_into_words`)
# ----------------------------------------------------------------------------------------------------

# tokenizer -> its word-list copy (None: the tokenizer itself does); weak keys, so tokenizers are not kept alive.
_WORD_LIST_TOKENIZERS: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()


def _prefix_every_word(state: Any) -> bool:
    """Switch on, in place, every setting of a pre-tokenizer state that keeps a word of a word list from getting
    its word-start marker (ByteLevel `add_prefix_space`, Metaspace `prepend_scheme: never`); True if any was off."""
    changed = False
    for part in _parts(state):
        if part.get("add_prefix_space") is False:
            part["add_prefix_space"] = True
            changed = True
        if part["type"] == "Metaspace" and part.get("prepend_scheme") == "never":
            part["prepend_scheme"] = "always"
            changed = True
    return changed


def _word_list_copy(tokenizer):
    """A copy of `tokenizer` whose pre-tokenizer gives every word its marker, or None when it already does."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    state = _state(getattr(backend, "pre_tokenizer", None))
    if not state or not _prefix_every_word(state):
        return None
    prepared = copy.deepcopy(tokenizer)
    pre_tokenizer = prepared.backend_tokenizer.pre_tokenizer
    # The state is replaced whole, so a ByteLevel nested in a Sequence is switched too; the copy's pre-tokenizer
    # object is new (deepcopy), so the caller's tokenizer is untouched.
    pre_tokenizer.__setstate__(json.dumps(state).encode())
    prepared.backend_tokenizer.pre_tokenizer = pre_tokenizer
    if hasattr(prepared, "add_prefix_space"):
        prepared.add_prefix_space = True
    logger.debug("%s: word lists are tokenised with a prefix space on every word", type(tokenizer).__name__)
    return prepared


def prepare_tokenizer(tokenizer):
    """The tokenizer to call with `is_split_into_words=True`: `tokenizer` itself, or (byte-level BPE loaded without
    `add_prefix_space`, RoBERTa's default) a copy whose pre-tokenizer adds the prefix space to every word.

    Without it transformers 5 tokenises each word of a list as if it continued the previous one ("film" instead of
    "Ġfilm"): pieces the model rarely saw, and no word-start marks. The setting cannot be passed per call, and for a
    fast tokenizer it lives in the backend's pre-tokenizer, so the copy is made once per tokenizer (cached)."""
    try:
        prepared = _WORD_LIST_TOKENIZERS[tokenizer]
    except KeyError:
        prepared = _word_list_copy(tokenizer)
        _WORD_LIST_TOKENIZERS[tokenizer] = prepared
    except TypeError:  # not weak-referenceable (an unusual tokenizer object): prepare it every time
        prepared = _word_list_copy(tokenizer)
    return tokenizer if prepared is None else prepared


def mask_token_id(tokenizer) -> int:
    """The id that replaces a "removed" token (perturbation methods): the tokenizer's mask token, else its pad."""
    return tokenizer.mask_token_id if tokenizer.mask_token_id is not None else tokenizer.pad_token_id


# ----------------------------------------------------------------------------------------------------
# Model internals
# ----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Architecture:
    """One model family's entry (see the module table)."""

    model_type: str
    name: str
    blocks_path: str  # dotted attribute path from `model.base_model` to the nn.ModuleList of transformer blocks
    convention: TokenConvention  # the tokenizer its checkpoints ship with (the tokenizer itself is read first)
    prefix_space: bool = False  # its tokenizer needs add_prefix_space=True for word lists (`prepare_tokenizer`)
    # Position ids start after the padding index (RoBERTa-style): a config attribute name, a fixed index, or None
    # (positions start at 0 or are relative). The rows up to it are unusable by a text.
    position_padding_idx: str | int | None = None
    hidden_states_argument: str = "hidden_states"  # a block's input hidden states: positional 0, or this keyword
    feed_forward_attribute: str = "intermediate_size"  # the config field holding a block's feed-forward width

    def blocks(self, model: torch.nn.Module) -> torch.nn.ModuleList:
        """The classifier's transformer blocks, first to last."""
        module = getattr(model, "base_model", model)
        try:
            for name in self.blocks_path.split("."):
                module = getattr(module, name)
        except AttributeError as error:
            raise ValueError(f"{type(model).__name__} (model type {self.model_type!r}) has no base_model."
                             f"{self.blocks_path}: a {self.name} classifier keeps its blocks there") from error
        return module

    def replace_blocks(self, model: torch.nn.Module, blocks: torch.nn.ModuleList) -> None:
        """Put `blocks` where the classifier keeps its transformer blocks (the config's depth is the caller's)."""
        *path, last = self.blocks_path.split(".")
        parent = getattr(model, "base_model", model)
        for name in path:
            parent = getattr(parent, name)
        setattr(parent, last, blocks)

    def input_embeddings(self, model: torch.nn.Module) -> torch.nn.Module:
        """The word-embedding layer (before position embeddings and LayerNorm)."""
        return model.get_input_embeddings()

    def block_hidden_states(self, args: tuple, kwargs: dict) -> torch.Tensor:
        """A block's input hidden states, from the arguments a forward pre-hook (`with_kwargs=True`) receives."""
        return args[0] if args else kwargs[self.hidden_states_argument]

    def replace_block_hidden_states(self, args: tuple, kwargs: dict, hidden: torch.Tensor) -> tuple[tuple, dict]:
        """The pre-hook's (args, kwargs) with the block's input hidden states replaced by `hidden`."""
        if args:
            return (hidden, *args[1:]), kwargs
        return args, {**kwargs, self.hidden_states_argument: hidden}

    def feed_forward_width(self, config: Any) -> int:
        """The width of a block's feed-forward layer; 4 x the hidden size (the Transformer's ratio) where the config
        does not say."""
        width = getattr(config, self.feed_forward_attribute, None)
        return int(width) if width else 4 * int(config.hidden_size)

    def reserved_positions(self, config: Any) -> int:
        """Rows of the position embeddings no text can use (RoBERTa-style ids start at padding_idx + 1)."""
        index = self.position_padding_idx
        if isinstance(index, str):
            index = getattr(config, index, None)
        return int(index) + 1 if isinstance(index, int) else 0


_RELATIVE_TO_PAD = "pad_token_id"

ARCHITECTURES: dict[str, Architecture] = {entry.model_type: entry for entry in (
    Architecture("bert", "BERT", "encoder.layer", WORDPIECE),
    Architecture("roberta", "RoBERTa", "encoder.layer", BYTE_LEVEL_BPE, prefix_space=True,
                 position_padding_idx=_RELATIVE_TO_PAD),
    Architecture("xlm-roberta", "XLM-RoBERTa", "encoder.layer", SENTENCEPIECE, position_padding_idx=_RELATIVE_TO_PAD),
    Architecture("camembert", "CamemBERT", "encoder.layer", SENTENCEPIECE, position_padding_idx=_RELATIVE_TO_PAD),
    Architecture("distilbert", "DistilBERT", "transformer.layer", WORDPIECE, feed_forward_attribute="hidden_dim"),
    Architecture("electra", "ELECTRA", "encoder.layer", WORDPIECE),
    Architecture("deberta-v2", "DeBERTa-v2/v3", "encoder.layer", SENTENCEPIECE),
    Architecture("mpnet", "MPNet", "encoder.layer", WORDPIECE, position_padding_idx=1),  # MPNetEmbeddings: fixed 1
)}
SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(ARCHITECTURES)


def model_type_of(model_or_config: Any) -> object:
    """The `model_type` of a model, a config, or a model-type string."""
    if isinstance(model_or_config, str):
        return model_or_config
    config = getattr(model_or_config, "config", model_or_config)
    return getattr(config, "model_type", None)


def architecture(model_or_config: Any) -> Architecture:
    """The table entry of a model, config or model type; `UnsupportedArchitectureError` names an unknown one."""
    model_type = model_type_of(model_or_config)
    try:
        return ARCHITECTURES[model_type]
    except (KeyError, TypeError):
        raise UnsupportedArchitectureError(model_type) from None


def reserved_positions(model_or_config: Any) -> int:
    """`Architecture.reserved_positions` of a model or config; 0 for a family outside the table (nothing known)."""
    config = getattr(model_or_config, "config", model_or_config)
    entry = ARCHITECTURES.get(model_type_of(model_or_config))
    return entry.reserved_positions(config) if entry is not None else 0


# ----------------------------------------------------------------------------------------------------
# Attention probabilities
# ----------------------------------------------------------------------------------------------------

class NoAttentionsError(RuntimeError):
    """A model run for its attention probabilities returned none (not the eager attention implementation)."""


def no_attentions_message(model: torch.nn.Module, needing: Sequence[str] = ()) -> str:
    """Why a model returned no attentions, and (when given) which methods need them."""
    implementation = getattr(getattr(model, "config", None), "_attn_implementation", "unknown")
    methods = (f" The methods that read attentions: {', '.join(needing)}; the others run without them."
               if needing else "")
    return (f"the model returned no attentions (attention implementation {implementation!r}): load it with "
            f"attn_implementation='eager'.{methods}")
