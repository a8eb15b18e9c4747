"""A tiny random BERT and a matching WordPiece tokenizer for the AFN unit tests (no download), and the AFN
parameters of conf/base with overrides: the fixtures `afn_params` and `make_settings` are functions taking the
overrides."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
import yaml
from transformers import BertConfig, BertModel, BertTokenizer

from learned_attribution.services.config import AfnSettings, afn_settings

PROJECT = Path(__file__).resolve().parents[2]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "day", "walk", "at", "the", "park", "beach",
         "summarize", "translate", ":", ".", "un", "##believ", "##able", "good", "film", "is"]


@pytest.fixture(scope="session")
def tiny_tokenizer():
    return BertTokenizer(vocab={token: i for i, token in enumerate(VOCAB)})


@pytest.fixture(scope="session")
def tiny_bert():
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=64, attn_implementation="eager")
    return BertModel(config).eval()


def _base_params() -> dict:
    """The run's parameters the afn pipeline reads, as conf/base sets them."""
    shared = yaml.safe_load((PROJECT / "conf/base/parameters.yml").read_text())
    afn = yaml.safe_load((PROJECT / "conf/base/parameters_afn.yml").read_text())["afn"]
    return {"afn": afn, **{key: shared[key] for key in ("encoder", "max_length", "seed", "compute", "mlflow")}}


def _afn_params(corpus: dict | None = None, pairs: dict | None = None, **afn) -> dict:
    """`_base_params()` with keys of `afn`, `afn.corpus` and `afn.pairs` replaced (`max_length`, `seed` and
    `encoder` among `afn` go to the top level)."""
    params = copy.deepcopy(_base_params())
    for key in ("max_length", "seed", "encoder"):
        if key in afn:
            params[key] = afn.pop(key)
    params["afn"].update(afn)
    params["afn"]["corpus"].update(corpus or {})
    params["afn"]["pairs"].update(pairs or {})
    return params


def _make_settings(corpus: dict | None = None, pairs: dict | None = None, **afn) -> AfnSettings:
    return afn_settings(_afn_params(corpus, pairs, **afn))


@pytest.fixture
def afn_params():
    return _afn_params


@pytest.fixture
def make_settings():
    return _make_settings
