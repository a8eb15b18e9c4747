"""Perturbation-family explainers on a model that only reads one token (known answers) and a tiny BERT."""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from learned_attribution.core.explainers import Batch, build_method
from learned_attribution.core.explainers.base import padded_batch
from learned_attribution.core.explainers import perturbation as pert

PAD, CLS, SEP, MASK = 0, 1, 2, 3
READ_POSITION = 2
TOKEN_READ = 7  # the token at READ_POSITION in ROWS[0]
ROWS = [[CLS, 5, TOKEN_READ, 6, 8, SEP], [CLS, 9, TOKEN_READ, SEP]]
TARGETS = [1, 1]


class OneTokenModel(torch.nn.Module):
    """HF-like classifier whose logits are a lookup of the token at position 2 only.

    Logits: token 7 -> [0, 2], the mask token -> [1, 0], anything else -> [0, 0]. It records every
    input row it is run on.
    """

    def __init__(self) -> None:
        super().__init__()
        table = torch.zeros(40, 2)
        table[TOKEN_READ] = torch.tensor([0.0, 2.0])
        table[MASK] = torch.tensor([1.0, 0.0])
        self.table = torch.nn.Embedding.from_pretrained(table)
        self.seen: list[torch.Tensor] = []

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, **_) -> SimpleNamespace:
        self.seen.append(input_ids.clone())
        return SimpleNamespace(logits=self.table(input_ids[:, READ_POSITION]))


def make_batch(rows: list[list[int]], targets: list[int]) -> Batch:
    """Right-padded batch; [CLS], [SEP] and padding are special."""
    return padded_batch(rows, targets, pad_token_id=PAD, mask_token_id=MASK, frame_token_ids=(CLS, SEP, PAD))


# Hand-computed: p(class 1 | logits [0, 2]) - p(class 1 | logits [1, 0]).
EXPECTED_DROP = 1 / (1 + math.exp(-2)) - 1 / (1 + math.exp(1))


@pytest.fixture
def one_token_model() -> OneTokenModel:
    return OneTokenModel()


@pytest.fixture(scope="module")
def batch() -> Batch:
    return make_batch(ROWS, TARGETS)


def expected_one_hot(value: float) -> torch.Tensor:
    expected = torch.zeros(len(ROWS), max(map(len, ROWS)))
    expected[:, READ_POSITION] = value
    return expected


def test_occlusion_is_nonzero_only_at_the_token_the_model_reads(one_token_model, batch):
    attribution = build_method("occlusion", batch_size=3).explain(one_token_model, batch)
    torch.testing.assert_close(attribution.scores, expected_one_hot(EXPECTED_DROP))
    # one unperturbed pass plus one per content token: (4 + 1) and (2 + 1) rows
    assert attribution.model_calls == round((5 + 3) / 2)
    assert sum(len(rows) for rows in one_token_model.seen) == 5 + 3
    assert max(len(rows) for rows in one_token_model.seen) <= 3


@pytest.mark.parametrize("name", ["occlusion", "lime", "kernel_shap"])
def test_special_and_padding_tokens_are_never_perturbed(one_token_model, batch, name):
    build_method(name, **({} if name == "occlusion" else {"n_samples": 40})).explain(one_token_model, batch)
    for rows in one_token_model.seen:
        assert (rows[:, 0] == CLS).all() and (rows[:, -1] == SEP).all()  # padding was cut, [SEP] kept last
        assert not (rows == PAD).any()


def test_kernel_shap_recovers_the_exact_shapley_values(one_token_model, batch):
    # The model is exactly linear in "token 2 kept", so the regression is exact: all credit to token 2.
    attribution = build_method("kernel_shap", n_samples=60).explain(one_token_model, batch)
    torch.testing.assert_close(attribution.scores, expected_one_hot(EXPECTED_DROP), atol=1e-4, rtol=1e-4)
    assert attribution.model_calls == 60


def test_lime_ranks_the_read_token_first(one_token_model, batch):
    attribution = build_method("lime", n_samples=60).explain(one_token_model, batch)
    real = ~batch.special_mask
    for row in range(len(ROWS)):
        scores = attribution.scores[row].masked_fill(~real[row], -float("inf"))
        assert int(scores.argmax()) == READ_POSITION
        # ridge (alpha 1, as in LIME) shrinks the coefficient, but it keeps the sign of the effect
        assert 0 < attribution.scores[row, READ_POSITION] <= EXPECTED_DROP
    assert attribution.model_calls == 60


def test_kernel_shap_ranks_the_read_token_first_with_few_samples(one_token_model):
    batch = make_batch([[CLS, 11, TOKEN_READ, 12, 13, 14, 15, 16, 17, SEP]], [1])
    scores = build_method("kernel_shap", n_samples=30).explain(one_token_model, batch).scores[0]
    assert int(scores[1:-1].argmax()) + 1 == READ_POSITION


def test_examples_without_content_tokens_get_zeros(one_token_model):
    batch = make_batch([[CLS, SEP], [CLS, 5, TOKEN_READ, SEP]], [1, 1])
    for name in ["occlusion", "lime", "kernel_shap"]:
        settings = {} if name == "occlusion" else {"n_samples": 30}
        scores = build_method(name, **settings).explain(one_token_model, batch).scores
        assert (scores[0] == 0).all()
        assert int(scores[1].argmax()) == READ_POSITION


def test_kernel_shap_with_one_content_token_is_exact(one_token_model):
    batch = make_batch([[CLS, 9, TOKEN_READ, SEP]], [1])
    batch.special_mask[0, 1] = True  # token 9 counts as special: token 7 is the only player
    attribution = build_method("kernel_shap", n_samples=30).explain(one_token_model, batch)
    torch.testing.assert_close(attribution.scores[0], torch.tensor([0.0, 0.0, EXPECTED_DROP, 0.0]))
    assert attribution.model_calls == 2
    assert all((rows[:, 1] == 9).all() for rows in one_token_model.seen)


@pytest.mark.parametrize("name", ["lime", "kernel_shap"])
def test_sampling_is_seeded_per_example_and_leaves_global_rng_alone(one_token_model, batch, name):
    state = torch.get_rng_state()
    first = build_method(name, n_samples=30, seed=3).explain(one_token_model, batch).scores
    assert torch.equal(torch.get_rng_state(), state)
    again = build_method(name, n_samples=30, seed=3).explain(one_token_model, batch).scores
    other_seed = build_method(name, n_samples=30, seed=4).explain(one_token_model, batch).scores
    alone = build_method(name, n_samples=30, seed=3).explain(one_token_model, make_batch(ROWS[1:], TARGETS[1:]))
    torch.testing.assert_close(again, first, rtol=0, atol=0)
    assert not torch.equal(other_seed, first)
    torch.testing.assert_close(alone.scores[0], first[1, :len(ROWS[1])], rtol=0, atol=0)


def test_lime_kernel_matches_the_lime_package_formula():
    kernel = pert.lime_text_kernel(25.0)
    sample = torch.tensor([[1, 1, 0, 0]])
    distance = 100 * (1 - 2 / (2 * math.sqrt(2)))  # 100 x cosine distance between 1111 and 1100
    assert kernel(None, None, sample) == pytest.approx(math.sqrt(math.exp(-distance ** 2 / 25 ** 2)))
    assert kernel(None, None, torch.ones(1, 4, dtype=torch.long)) == pytest.approx(1.0)


def test_occlusion_padding_invariance_on_a_tiny_bert(tiny_bert_classifier):
    model = tiny_bert_classifier(num_labels=3, seed=0, max_position_embeddings=16, initializer_range=0.5)
    rows, targets = [[CLS, 7, 12, 30, 5, 9, SEP], [CLS, 22, 8, SEP]], [0, 2]
    batched = build_method("occlusion").explain(model, make_batch(rows, targets)).scores
    assert batched.abs().max() > 1e-3
    for row, tokens in enumerate(rows):
        single = build_method("occlusion").explain(model, make_batch([tokens], [targets[row]])).scores[0]
        torch.testing.assert_close(batched[row, :len(tokens)], single, rtol=1e-4, atol=1e-6)
        assert (batched[row, len(tokens):] == 0).all()
        assert batched[row, 0] == 0 and batched[row, len(tokens) - 1] == 0


@pytest.mark.parametrize("name, cls", [("occlusion", pert.Occlusion), ("lime", pert.LimeTokens),
                                       ("kernel_shap", pert.KernelShapTokens)])
def test_registry_builds_each_perturbation_method(name, cls):
    explainer = build_method(name)
    assert isinstance(explainer, cls) and explainer.name == name and explainer.family == "perturbation"


def test_defaults_and_bad_settings():
    assert build_method("lime").n_samples == 500 and build_method("kernel_shap").n_samples == 500
    assert build_method("lime").kernel_width == 25.0
    with pytest.raises(ValueError, match="n_samples"):
        build_method("lime", n_samples=0)
    with pytest.raises(ValueError, match="batch_size"):
        build_method("occlusion", batch_size=0)
    with pytest.raises(ValueError, match="seed"):
        build_method("kernel_shap", seed="x")
