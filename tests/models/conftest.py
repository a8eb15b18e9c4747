"""Fixtures of the text students' tests (the encoder and the attention student)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch


@pytest.fixture
def teacher_texts(sentiment_sentences):
    """`teacher_texts(tokenizer, n, seed, by="sentiment")`: `n` sentiment sentences (tests/conftest.py), each explained
    for a random class; the teacher's score of a token (one per scored token: not [CLS], [SEP]) is 1 at a sentiment
    word and 0 elsewhere, or (`by="position"`) its position in the text."""
    def make(tokenizer, n: int, seed: int, by: str = "sentiment") -> pd.DataFrame:
        sentences = sentiment_sentences(tokenizer, n, seed, classes=2)
        scores = [np.arange(len(marks) - 2, dtype=float) if by == "position" else np.asarray(marks[1:-1], float)
                  for marks in sentences["sentiment"]]
        return pd.DataFrame({"example_id": [f"t{seed}_{i}" for i in sentences["index"]],
                             "input_ids": sentences["input_ids"], "predicted": sentences["predicted"],
                             "scores": scores})
    return make


@pytest.fixture
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: threads cost more than they give
    yield
    torch.set_num_threads(threads)
