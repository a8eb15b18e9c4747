"""ERASER comprehensiveness / sufficiency on models whose answers are known."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from learned_attribution.core.models.faithfulness import faithfulness, fraction_label

CLS, SEP, PAD, TRIGGER = 1, 2, 0, 7


class TriggerModel(torch.nn.Module):
    """Class-1 logit +10 if TRIGGER is among the attended tokens, else -10; class-0 logit 0."""

    def forward(self, input_ids, attention_mask):
        present = ((input_ids == TRIGGER) & attention_mask.bool()).any(dim=1)
        class_one = torch.where(present, 10.0, -10.0)
        return SimpleNamespace(logits=torch.stack([torch.zeros_like(class_one), class_one], dim=1))


class AdditiveModel(torch.nn.Module):
    """Class-1 logit = sum of hand-set per-token weights over attended tokens; class-0 logit 0."""

    def __init__(self, weights: dict[int, float], vocab: int = 20):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(vocab), requires_grad=False)
        for token, value in weights.items():
            self.weight.data[token] = value

    def forward(self, input_ids, attention_mask):
        class_one = (self.weight[input_ids] * attention_mask).sum(dim=1)
        return SimpleNamespace(logits=torch.stack([torch.zeros_like(class_one), class_one], dim=1))


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


NEAR_ONE = sigmoid(10) - sigmoid(-10)  # 0.99991


def test_fraction_labels():
    assert [fraction_label(f) for f in (0.01, 0.05, 0.1, 0.2, 0.5, 0.025)] == \
        ["1pct", "5pct", "10pct", "20pct", "50pct", "2.5pct"]


def test_scores_ranking_the_trigger_first_are_comprehensive_and_sufficient():
    body = [3, 4, 5, TRIGGER, 6, 8, 9, 10, 11, 12]
    scores = np.array([0.1, 0.2, 0.3, 0.9, 0.4, 0.0, 0.0, 0.0, 0.0, 0.0])
    table = faithfulness(TriggerModel(), [[CLS, *body, SEP]], [scores], [1])
    row = table.iloc[0]
    assert row["p_full"] == pytest.approx(sigmoid(10))
    assert row["comprehensiveness"] == pytest.approx(NEAR_ONE)
    assert row["sufficiency"] == pytest.approx(0.0, abs=1e-9)


def test_scores_ranking_the_trigger_last_are_neither():
    body = [3, 4, 5, TRIGGER, 6, 8, 9, 10, 11, 12]
    scores = np.arange(10, 0, -1, dtype=float)
    scores[3] = -1.0
    table = faithfulness(TriggerModel(), [[CLS, *body, SEP]], [scores], [1])
    row = table.iloc[0]
    # k <= 5 of 10 tokens: the trigger is never removed, and never kept alone.
    assert row["comprehensiveness"] == pytest.approx(0.0, abs=1e-9)
    assert row["sufficiency"] == pytest.approx(NEAR_ONE)
    # With every token removed (fraction 1.0), even the last-ranked trigger goes: [CLS][SEP] remains.
    everything = faithfulness(TriggerModel(), [[CLS, *body, SEP]], [scores], [1], fractions=(0.1, 1.0)).iloc[0]
    assert everything["k_100pct"] == 10
    assert everything["comprehensiveness_10pct"] == pytest.approx(0.0, abs=1e-9)
    assert everything["comprehensiveness_100pct"] == pytest.approx(NEAR_ONE)
    assert everything["sufficiency_100pct"] == pytest.approx(0.0, abs=1e-9)


def test_k_rule_rounds_half_up_with_minimum_one():
    rows = faithfulness(TriggerModel(), [[CLS, *range(3, 13), SEP], [CLS, *([3] * 50), SEP]],
                        [np.zeros(10), np.zeros(50)], [0, 0])
    ks = rows[[f"k_{fraction_label(f)}" for f in (0.01, 0.05, 0.1, 0.2, 0.5)]].to_numpy().tolist()
    assert ks[0] == [1, 1, 1, 2, 5]     # 10 tokens: 0.1 -> 1, 0.5 -> 1 (half up), 1, 2, 5
    assert ks[1] == [1, 3, 5, 10, 25]   # 50 tokens: 0.5 -> 1, 2.5 -> 3 (banker's rounding would give 2)
    assert rows["n_tokens"].tolist() == [10, 50]


def test_additive_model_matches_hand_computed_aopc():
    weights = {5: 2.0, 6: -1.0, 7: 0.5, 8: 0.0}
    ids = [CLS, 5, 6, 7, 8, SEP]
    scores = np.array([0.9, 0.1, 0.5, 0.3])  # ranking: 5, 7, 8, 6
    table = faithfulness(AdditiveModel(weights), [ids, ids], [scores, scores], [1, 0], fractions=(0.25, 0.5))
    full = sigmoid(1.5)
    # k = 1: remove {5} -> logit -0.5, keep {5} -> 2.0.  k = 2: remove {5, 7} -> -1.0, keep {5, 7} -> 2.5.
    comp = [full - sigmoid(-0.5), full - sigmoid(-1.0)]
    suff = [full - sigmoid(2.0), full - sigmoid(2.5)]
    one, zero = table.iloc[0], table.iloc[1]
    assert (one["k_25pct"], one["k_50pct"]) == (1, 2)
    assert [one["comprehensiveness_25pct"], one["comprehensiveness_50pct"]] == pytest.approx(comp)
    assert [one["sufficiency_25pct"], one["sufficiency_50pct"]] == pytest.approx(suff)
    assert one["comprehensiveness"] == pytest.approx(np.mean(comp))
    assert one["sufficiency"] == pytest.approx(np.mean(suff))  # negative: the top tokens alone say more
    # Explaining class 0 instead: p(0) = 1 - p(1), so every difference changes sign.
    assert zero["p_full"] == pytest.approx(1 - full)
    assert zero["comprehensiveness"] == pytest.approx(-np.mean(comp))
    assert zero["sufficiency"] == pytest.approx(-np.mean(suff))


def test_batched_and_padded_equals_one_by_one_on_a_tiny_bert(tiny_bert_classifier):
    model = tiny_bert_classifier(num_labels=3, seed=0, max_position_embeddings=64)
    model.train()  # dropout on: faithfulness must switch it off, and restore the flag
    rng = np.random.default_rng(0)
    lengths = [1, 3, 7, 12, 20, 5]
    input_ids = [[CLS, *rng.integers(3, 40, size=n).tolist(), SEP] for n in lengths]
    scores = [rng.normal(size=n) for n in lengths]
    target = [0, 1, 2, 1, 0, 2]
    batched = faithfulness(model, input_ids, scores, target, batch_size=4, pad_token_id=PAD)
    alone = faithfulness(model, input_ids, scores, target, batch_size=1, pad_token_id=PAD)
    assert model.training
    numeric = [c for c in batched.columns if c != "nonfinite_scores"]
    np.testing.assert_allclose(batched[numeric].to_numpy(float), alone[numeric].to_numpy(float), atol=1e-5)
    assert len(batched) == 6 and batched["example"].tolist() == list(range(6))
    # The full-input probability is the model's own softmax on the unpadded sequence.
    with torch.inference_mode():
        model.eval()
        logits = model(input_ids=torch.tensor([input_ids[3]]), attention_mask=torch.ones(1, 14, dtype=torch.long)).logits
    assert batched.loc[3, "p_full"] == pytest.approx(torch.softmax(logits, -1)[0, 1].item(), abs=1e-5)


def test_nonfinite_scores_are_flagged_and_ranked_lowest():
    body = [3, TRIGGER, 4, 5]
    table = faithfulness(TriggerModel(), [[CLS, *body, SEP]], [np.array([0.1, np.inf, 0.3, 0.2])], [1],
                         fractions=(0.25,))
    row = table.iloc[0]
    assert bool(row["nonfinite_scores"])
    assert row["comprehensiveness"] == pytest.approx(0.0, abs=1e-9)  # inf is not treated as the top token


def test_bad_input_is_named():
    model = TriggerModel()
    with pytest.raises(ValueError, match=r"scores\[1\]"):
        faithfulness(model, [[CLS, 3, SEP], [CLS, 3, 4, SEP]], [np.ones(1), np.ones(3)], [0, 0])
    with pytest.raises(ValueError, match=r"input_ids\[0\]"):
        faithfulness(model, [[CLS, SEP]], [np.ones(0)], [0])
    with pytest.raises(ValueError, match=r"target\[0\] = 5"):
        faithfulness(model, [[CLS, 3, SEP]], [np.ones(1)], [5])
    with pytest.raises(ValueError, match="fractions"):
        faithfulness(model, [[CLS, 3, SEP]], [np.ones(1)], [0], fractions=(0.0,))
