"""Fixtures shared by the whole test suite.

`tiny_classifier(family, ...)` is the one tiny-model factory: a randomly initialised sequence classifier of any
family in `learned_attribution.core.models.architectures` (built from its config, eager attention) with a tokenizer of
its kind built from a small vocabulary (`tiny_tokenizer(family)`): WordPiece for BERT, DistilBERT, ELECTRA and
MPNet, byte-level BPE for RoBERTa (loaded without `add_prefix_space`, as RoBERTa checkpoints ship), SentencePiece
Unigram for XLM-R, CamemBERT and DeBERTa-v2. Nothing is downloaded or trained.

`tiny_bert_config` and `tiny_bert_classifier` are the BERT factories most unit tests use (call them with keyword
overrides): tiny BERT models built from a `BertConfig`, on bare token ids (no tokenizer).

Every factory here is session-scoped (a factory holds no state), so module-scoped fixtures can use it too.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("KEDRO_DISABLE_TELEMETRY", "1")
# Nothing is downloaded in tests; set before transformers is imported, which reads it once.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

PROJECT_ROOT = Path(__file__).resolve().parents[1]

TINY_BERT_DEFAULTS = {
    "vocab_size": 40,
    "hidden_size": 16,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 32,
    "max_position_embeddings": 32,
    "type_vocab_size": 2,
    "pad_token_id": 0,
    "attn_implementation": "eager",
}


def make_tiny_bert_config(**overrides):
    """A tiny BERT config (vocab 40, hidden 16, 2 layers, 2 heads, eager attention); keywords override fields."""
    from transformers import BertConfig

    return BertConfig(**{**TINY_BERT_DEFAULTS, **overrides})


def make_tiny_bert_classifier(num_labels: int = 2, seed: int = 0, **overrides):
    """A randomly initialised `BertForSequenceClassification` (eval mode) on a tiny config, seeded."""
    import torch
    from transformers import BertForSequenceClassification

    torch.manual_seed(seed)
    return BertForSequenceClassification(make_tiny_bert_config(num_labels=num_labels, **overrides)).eval()


@pytest.fixture(scope="session")
def tiny_bert_config():
    """Factory fixture: `tiny_bert_config(**overrides) -> BertConfig`."""
    return make_tiny_bert_config


@pytest.fixture(scope="session")
def tiny_bert_classifier():
    """Factory fixture: `tiny_bert_classifier(num_labels=2, seed=0, **overrides) -> BertForSequenceClassification`."""
    return make_tiny_bert_classifier


# ---- every family: a tiny classifier and a tokenizer of its kind ------------------------------------------------

# The words the tiny vocabularies know whole (lower case; WordPiece lower-cases, the others also know "The").
TINY_WORDS = ("the", "a", "film", "movie", "was", "is", "good", "bad", "great", "boring", "not", "very", "and",
              "but", "it", "this", "plot", "actors", "fun", "end")
TINY_PUNCTUATION = (",", ".", "!", "?")
# "unbelievable" is known only in pieces, in every kind: un + believ + able.
WORDPIECE_EXTRA = ("un", "##believ", "##able", "##s")
SPECIALS = {  # in id order; the configs' pad/bos/eos ids follow them
    "wordpiece": ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"),
    "mpnet": ("<s>", "<pad>", "</s>", "[UNK]", "<mask>"),  # MPNet's padding index is 1 (position ids start at 2)
    "roberta": ("<s>", "<pad>", "</s>", "<unk>", "<mask>"),  # XLM-R's tokenizer fixes unk_id=3
    "deberta": ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"),
}


def _wordpiece_vocab(specials) -> dict[str, int]:
    tokens = [*specials, *TINY_WORDS, *TINY_PUNCTUATION, *WORDPIECE_EXTRA]
    return {token: index for index, token in enumerate(tokens)}


def _byte_level_merges() -> tuple[dict[str, int], list[tuple[str, str]]]:
    """A byte-level BPE vocabulary (the 256 byte characters, then every merge's result) and merges that spell
    `Ġ<word>` for every tiny word, "ĠThe", "Ġun" and "Ġ<punctuation>", then the bare pieces "believ", "able" and
    "The". Each target is built left to right, one character per merge; the `Ġ` chains rank first, so a bare merge
    never fires inside a `Ġ` word before its chain is complete."""
    from tokenizers import pre_tokenizers

    starts = [f"Ġ{w}" for w in (*TINY_WORDS, "The", "un", *TINY_PUNCTUATION)]
    merges: dict[tuple[str, str], None] = {}
    for target in [*starts, "believ", "able", "The"]:
        for end in range(2, len(target) + 1):
            merges[(target[:end - 1], target[end - 1])] = None
    vocab = {token: index for index, token in enumerate(SPECIALS["roberta"])}
    for token in [*sorted(pre_tokenizers.ByteLevel.alphabet()), *("".join(pair) for pair in merges)]:
        vocab.setdefault(token, len(vocab))
    return vocab, list(merges)


def _unigram_vocab(specials) -> list[tuple[str, float]]:
    """A SentencePiece Unigram vocabulary: the specials (score 0), `▁<word>` for every tiny word and "▁The", the
    pieces "▁un", "believ", "able", "s", the punctuation, a lone "▁" (so "▁," is "▁" + ","), then every ASCII letter
    and digit as a fallback piece. Scores make the known pieces win: "unbelievable" is "▁un" "believ" "able"."""
    import string

    scores: dict[str, float] = {token: 0.0 for token in specials}
    for piece in [*(f"▁{w}" for w in (*TINY_WORDS, "The")), "▁un", "believ", "able", "s", *TINY_PUNCTUATION]:
        scores.setdefault(piece, -2.0)
    scores.setdefault("▁", -5.0)
    for char in string.ascii_letters + string.digits:
        scores.setdefault(char, -8.0)
    return list(scores.items())


def make_tiny_tokenizer(family: str):
    """A fast tokenizer of the kind `family`'s checkpoints ship with, on a tiny vocabulary (see the module doc)."""
    import transformers

    if family in ("bert", "electra"):
        return transformers.BertTokenizer(vocab=_wordpiece_vocab(SPECIALS["wordpiece"]), do_lower_case=True)
    if family == "distilbert":
        return transformers.DistilBertTokenizer(vocab=_wordpiece_vocab(SPECIALS["wordpiece"]), do_lower_case=True)
    if family == "mpnet":
        return transformers.MPNetTokenizer(vocab=_wordpiece_vocab(SPECIALS["mpnet"]), do_lower_case=True)
    if family == "roberta":
        vocab, merges = _byte_level_merges()
        return transformers.RobertaTokenizer(vocab=vocab, merges=merges, add_prefix_space=False)
    if family == "xlm-roberta":
        return transformers.XLMRobertaTokenizer(vocab=_unigram_vocab(SPECIALS["roberta"]))
    if family == "camembert":
        return transformers.CamembertTokenizer(vocab=_unigram_vocab(SPECIALS["roberta"]))
    if family == "deberta-v2":
        return transformers.DebertaV2Tokenizer(vocab=_unigram_vocab(SPECIALS["deberta"]))
    raise ValueError(f"no tiny tokenizer for family {family!r}")


# family -> (config class, classifier class); the keys are the families of models/architectures.py
TINY_MODEL_CLASSES = {
    "bert": ("BertConfig", "BertForSequenceClassification"),
    "roberta": ("RobertaConfig", "RobertaForSequenceClassification"),
    "xlm-roberta": ("XLMRobertaConfig", "XLMRobertaForSequenceClassification"),
    "camembert": ("CamembertConfig", "CamembertForSequenceClassification"),
    "distilbert": ("DistilBertConfig", "DistilBertForSequenceClassification"),
    "electra": ("ElectraConfig", "ElectraForSequenceClassification"),
    "deberta-v2": ("DebertaV2Config", "DebertaV2ForSequenceClassification"),
    "mpnet": ("MPNetConfig", "MPNetForSequenceClassification"),
}


def make_tiny_classifier(family: str, n_layers: int = 2, n_heads: int = 2, hidden: int = 16, intermediate: int = 32,
                         num_labels: int = 2, seed: int = 0, **overrides):
    """(model, tokenizer): a randomly initialised `family` sequence classifier (eval mode, eager attention, 64
    positions, seeded) sized by the arguments, with `make_tiny_tokenizer(family)`; keywords override config
    fields (in the family's own names)."""
    import torch
    import transformers

    if family not in TINY_MODEL_CLASSES:
        raise ValueError(f"no tiny classifier for family {family!r}; known: {sorted(TINY_MODEL_CLASSES)}")
    tokenizer = make_tiny_tokenizer(family)
    config_name, model_name = TINY_MODEL_CLASSES[family]
    if family == "distilbert":  # DistilBERT's own field names
        shape = {"dim": hidden, "n_layers": n_layers, "n_heads": n_heads, "hidden_dim": intermediate}
    else:
        shape = {"hidden_size": hidden, "num_hidden_layers": n_layers, "num_attention_heads": n_heads,
                 "intermediate_size": intermediate}
    if family == "electra":  # ELECTRA's embeddings are narrower than its hidden states (a projection between)
        shape["embedding_size"] = max(hidden // 2, n_heads)
    if family == "deberta-v2":  # DeBERTa-v3's disentangled relative attention, no absolute positions
        shape.update(relative_attention=True, pos_att_type=["p2c", "c2p"], position_biased_input=False)
    settings = {"vocab_size": len(tokenizer), "max_position_embeddings": 64, "num_labels": num_labels,
                "pad_token_id": tokenizer.pad_token_id, "attn_implementation": "eager", **shape, **overrides}
    config = getattr(transformers, config_name)(**settings)
    torch.manual_seed(seed)
    model = getattr(transformers, model_name)(config).eval()
    return model, tokenizer


@pytest.fixture(scope="session")
def tiny_tokenizer():
    """Factory fixture: `tiny_tokenizer(family) -> tokenizer` (see make_tiny_tokenizer)."""
    return make_tiny_tokenizer


@pytest.fixture(scope="session")
def tiny_classifier():
    """Factory fixture: `tiny_classifier(family, n_layers=2, n_heads=2, hidden=16, ...) -> (model, tokenizer)`."""
    return make_tiny_classifier


@pytest.fixture(scope="session")
def project_root() -> Path:
    """The Kedro project's root folder (holds pyproject.toml, conf/, data/)."""
    return PROJECT_ROOT
