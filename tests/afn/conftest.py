"""A tiny random BERT and a matching WordPiece tokenizer for the AFN unit tests (no download)."""
import pytest
import torch
from transformers import BertConfig, BertModel, BertTokenizer

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
