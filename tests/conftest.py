"""Fixtures shared by the whole test suite.

`tiny_bert_config` and `tiny_bert_classifier` are factories (call them with keyword overrides): tiny,
randomly initialised BERT models with eager attention, built from a `BertConfig`, nothing downloaded.
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


@pytest.fixture
def tiny_bert_config():
    """Factory fixture: `tiny_bert_config(**overrides) -> BertConfig`."""
    return make_tiny_bert_config


@pytest.fixture
def tiny_bert_classifier():
    """Factory fixture: `tiny_bert_classifier(num_labels=2, seed=0, **overrides) -> BertForSequenceClassification`."""
    return make_tiny_bert_classifier


@pytest.fixture(scope="session")
def project_root() -> Path:
    """The Kedro project's root folder (holds pyproject.toml, conf/, data/)."""
    return PROJECT_ROOT
