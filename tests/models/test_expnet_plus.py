"""ExpNet+: the pairwise ranking loss, pseudo-rationales, training, and selection that never reads the held-out task."""
import math

import numpy as np
import pandas as pd
import pytest
import torch

from learned_attribution.metrics.plausibility import auroc_score
from learned_attribution.models.expnet_plus import (ANCHOR_SCALE, GatedExpNet, SimplexStack, TrainingSettings, Variant,
                                                    anchor_offsets, example_aurocs, fit_variant, head_of_columns,
                                                    listwise_ranking_loss, mean_example_auroc, pairwise_ranking_loss,
                                                    pseudo_rationales, select_variant, validation_auroc,
                                                    within_example_ranks)

# the columns both pseudo-rationale rules read are among them
COLUMNS = ["cls_to_tok_h0", "cls_to_tok_h1", "tok_to_cls_h0", "tok_to_cls_h1", "axg_h0", "axg_h1", "layer_grad_norm",
           "layer_grad_x_input", "embedding_grad_norm", "embedding_grad_x_input"]
FAST = TrainingSettings(max_epochs=8, patience=3, examples_per_batch=16, learning_rate=1e-2)


def softplus(x):
    return math.log1p(math.exp(x))


def test_pairwise_loss_hand_computed():
    logits = torch.tensor([[2.0, 0.0, 1.0], [0.5, -0.5, 0.0]])
    labels = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    mask = torch.tensor([[True, True, True], [True, True, False]])
    # example 0: pairs (0,1) and (0,2): mean(softplus(-2), softplus(-1)); example 1: pair (1,0): softplus(1)
    first = (softplus(-2.0) + softplus(-1.0)) / 2
    second = softplus(1.0)
    assert pairwise_ranking_loss(logits, labels, mask).item() == pytest.approx((first + second) / 2, rel=1e-6)
    weighted = pairwise_ranking_loss(logits, labels, mask, torch.tensor([3.0, 1.0])).item()
    assert weighted == pytest.approx((3 * first + second) / 4, rel=1e-6)


def test_pairwise_loss_skips_examples_without_pairs():
    logits = torch.tensor([[1.0, 2.0], [0.0, 3.0]])
    labels = torch.tensor([[1.0, 1.0], [1.0, 0.0]])  # example 0: no negative token
    mask = torch.ones(2, 2, dtype=torch.bool)
    assert pairwise_ranking_loss(logits, labels, mask).item() == pytest.approx(softplus(3.0), rel=1e-6)


def test_listwise_loss_hand_computed():
    logits = torch.tensor([[0.0, 0.0, 0.0, 0.0], [2.0, 0.0, 1.0, 9.0], [1.0, 2.0, 3.0, 0.0]])
    labels = torch.tensor([[1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 1.0], [1.0, 0.5, 0.0, 0.0]])
    mask = torch.tensor([[True] * 4, [True, True, True, False], [True] * 4])  # example 1's token 3 is padding
    constant = math.log(4)  # constant scores: the softmax is uniform over the 4 tokens
    top = math.log(math.exp(2) + 1 + math.exp(1)) - 2  # only token 0 is a real rationale token
    soft_total = math.log(math.exp(1) + math.exp(2) + math.exp(3) + 1)
    soft = (1.0 * (soft_total - 1) + 0.5 * (soft_total - 2)) / 1.5  # labels 1 and 0.5 -> shares 2/3 and 1/3
    assert listwise_ranking_loss(logits, labels, mask).item() == pytest.approx((constant + top + soft) / 3, rel=1e-6)
    weighted = listwise_ranking_loss(logits, labels, mask, torch.tensor([1.0, 2.0, 1.0])).item()
    assert weighted == pytest.approx((constant + 2 * top + soft) / 4, rel=1e-6)
    # all the softmax mass on the two rationale tokens: the loss falls to log 2; an example without a
    # non-rationale token is skipped
    sharp = torch.tensor([[50.0, 50.0, 0.0, 0.0], [5.0, 5.0, 5.0, 5.0]])
    labels = torch.tensor([[1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    assert listwise_ranking_loss(sharp, labels, torch.ones(2, 4, dtype=torch.bool)).item() == pytest.approx(
        math.log(2), rel=1e-6)


def test_gates_scale_each_heads_columns():
    net = GatedExpNet(4, 3, head_of_columns(COLUMNS[:4]))
    assert head_of_columns(COLUMNS[:4] + ["relative_position"]) == [0, 1, 0, 1, -1]
    with torch.no_grad():
        net.gate_logits[:] = torch.tensor([100.0, -100.0])  # head 0 open, head 1 shut
    x = torch.randn(5, 4)
    y = net(x)
    x_shut = x.clone()
    x_shut[:, [1, 3]] = 123.0  # head 1's columns no longer matter
    torch.testing.assert_close(net(x_shut), y)


def synthetic_task(task: str, n_examples: int, seed: int, informative: int = 0, flip: bool = False,
                   shift: float | None = None) -> pd.DataFrame:
    """Token rows: column `informative` carries the label (plus noise); a task-specific offset and scale."""
    shift = seed if shift is None else shift
    rng = np.random.default_rng(seed)
    rows = []
    for e in range(n_examples):
        n = int(rng.integers(4, 10))
        labels = np.zeros(n, dtype=int)
        labels[rng.choice(n, size=max(1, n // 3), replace=False)] = 1
        values = rng.normal(size=(n, len(COLUMNS)))
        values[:, informative] += 1.5 * (1 - labels if flip else labels)
        values = values * (1 + shift % 3) + shift  # per-task scale and offset
        for j in range(n):
            rows.append({"example_id": f"{task}-{e}", "task": task, "position": j + 1, "token_label": labels[j],
                         **dict(zip(COLUMNS, values[j]))})
    return pd.DataFrame(rows)


def task_parts(task, seed):
    """A training task as the fold nodes give it: `val` = correctly predicted validation examples, `val_all` =
    those and mispredicted ones (here: the informative signal points away from the rationale)."""
    train = synthetic_task(task, 60, seed)
    val = synthetic_task(task, 30, seed + 100, shift=seed)
    val["example_id"] = val["example_id"] + "v"
    mispredicted = synthetic_task(task, 10, seed + 200, shift=seed, flip=True)
    mispredicted["example_id"] = mispredicted["example_id"] + "m"
    val_all = pd.concat([val, mispredicted], ignore_index=True)
    return {"train": train, "val": val, "val_all": val_all,
            "unlabeled": pd.concat([train, val_all]).drop(columns="token_label")}


def test_fit_learns_a_transferable_signal():
    a, b = task_parts("a", 1), task_parts("b", 2)
    variant = Variant("x", standardise="per_task", objective="focal+pairwise")
    model = fit_variant(variant, a["train"], a["val"], b["unlabeled"], {"a": a["unlabeled"], "b": b["unlabeled"]},
                        COLUMNS, rho=0.3, n_heads=2, settings=FAST)
    assert validation_auroc(model, b["val"]) > 0.75
    assert 0.05 <= model.calibrated_threshold <= 0.95


def test_held_out_labels_never_change_training():
    """Poisoning the held-out task's rationales (inverting every token label) changes no trained weight: fitting
    for the held-out classifier reads its signals, never its labels (self-training included). The selection cannot
    read the held-out task's signals or labels (`select_variant` takes the training tasks only; the node's inputs
    are `test_the_selection_node_has_no_held_out_input`)."""
    tasks = {"a": task_parts("a", 1), "b": task_parts("b", 2)}
    variants = [Variant("paper", standardise="global"), Variant("task_z", standardise="per_task"),
                Variant("ranking_st", standardise="per_task", objective="pairwise", self_training=True),
                Variant("anchored_st", standardise="per_task", objective="pairwise", self_training=True,
                        anchor="layer_grad_norm", anchor_weight=0.5),
                Variant("stack_agreement", objective="pairwise", network="simplex", self_training=True,
                        pseudo="agreement"),
                Variant("stack_listwise", objective="listwise", network="simplex", self_training=True,
                        pseudo="agreement")]
    held_out = synthetic_task("c", 40, 3)
    poisoned = held_out.assign(token_label=1 - held_out["token_label"])
    train = pd.concat([tasks["a"]["train"], tasks["b"]["train"]])
    val = pd.concat([tasks["a"]["val"], tasks["b"]["val"]])
    outcomes = []
    for target in (held_out, poisoned):
        stats = {"a": tasks["a"]["unlabeled"], "b": tasks["b"]["unlabeled"], "c": target}
        outcomes.append([fit_variant(v, train, val, target, stats, COLUMNS, 0.3, 2, FAST) for v in variants])
    models, models_poisoned = outcomes
    for model, twin in zip(models, models_poisoned):
        for key, value in model.net.state_dict().items():
            torch.testing.assert_close(value, twin.net.state_dict()[key])
    assert models[2].n_pseudo_examples > 0 and models[4].n_pseudo_examples > 0  # self-training used the held-out signals


def test_pseudo_rationales_where_signals_agree():
    # one example of 4 tokens, 1 head: token 0 tops all three signals, token 3 is last in all, token 1
    # tops only raw attention (1 of 3), token 2 middling
    table = pd.DataFrame({"example_id": ["e"] * 4, "task": ["c"] * 4, "token_label": [0, 0, 0, 1],
                          "cls_to_tok_h0": [0.9, 0.8, 0.2, 0.1], "axg_h0": [0.5, -0.1, 0.2, 0.0],
                          "layer_grad_norm": [3.0, 0.5, 1.0, 0.2]})
    pseudo = pseudo_rationales(table, rho=0.25, n_heads=1)  # k = 1
    # token 0 positive, token 3 negative, the others dropped; the gold labels (token 3 = 1) are not used
    assert pseudo["token_label"].tolist() == [1.0, 0.0]
    assert pseudo["cls_to_tok_h0"].tolist() == [0.9, 0.1]


def test_the_selection_node_has_no_held_out_input():
    from learned_attribution.pipelines.crosstask.pipeline import TASKS, create_folds

    folds = create_folds()
    for task in TASKS:
        (node,) = [n for n in folds.nodes if n.name == f"heldout_{task}.select_expnet_plus"]
        assert not [i for i in node.inputs if i.startswith(f"{task}.")], node.inputs
        assert {f"{t}.explainer_signals" for t in TASKS if t != task} <= set(node.inputs)


def test_within_example_z_known_answer():
    from learned_attribution.models.expnet_plus import within_example_z

    values = np.array([[1.0, 5.0], [3.0, 5.0], [7.0, 2.0]], dtype=np.float32)
    out = within_example_z(values, np.array(["a", "a", "b"]))
    np.testing.assert_allclose(out[:2, 0], [-1.0, 1.0], atol=1e-5)  # mean 2, population std 1
    np.testing.assert_allclose(out[:2, 1], [0.0, 0.0], atol=1e-5)  # constant within the example
    np.testing.assert_allclose(out[2], [0.0, 0.0], atol=1e-5)  # a one-token example


def test_anchor_offsets_known_answer():
    offsets = anchor_offsets(np.array([3.0, 1.0, 2.0, 5.0, 7.0, 7.0]), np.array(["a", "a", "a", "b", "c", "c"]))
    half = ANCHOR_SCALE / 2
    np.testing.assert_allclose(offsets, [half, -half, 0.0, 0.0, 0.0, 0.0])  # one token: centre; ties: averaged


def test_an_anchor_alone_ranks_like_its_signal_and_a_residual_is_trained_on_top():
    a, b = task_parts("a", 1), task_parts("b", 2)
    stats = {"a": a["unlabeled"], "b": b["unlabeled"]}
    gold = [g["token_label"].to_numpy() for _, g in b["val"].groupby("example_id", sort=False)]
    anchor_auroc = mean_example_auroc([g[COLUMNS[0]].to_numpy() for _, g in b["val"].groupby("example_id", sort=False)],
                                      gold)
    alone = fit_variant(Variant("anchor", anchor=COLUMNS[0], anchor_weight=0.0), a["train"], a["val"], b["unlabeled"],
                        stats, COLUMNS, 0.3, 2, FAST)
    assert alone.history == [] and validation_auroc(alone, b["val"]) == pytest.approx(anchor_auroc, abs=1e-12)
    residual = fit_variant(Variant("anchored", standardise="per_task", objective="pairwise", anchor=COLUMNS[0]),
                           a["train"], a["val"], b["unlabeled"], stats, COLUMNS, 0.3, 2, FAST)
    assert residual.history and validation_auroc(residual, b["val"]) > 0.75
    with pytest.raises(ValueError, match="anchor 'afn_norm_l0' is not among its input columns"):
        fit_variant(Variant("bad", anchor="afn_norm_l0"), a["train"], a["val"], b["unlabeled"], stats, COLUMNS, 0.3,
                    2, FAST)
    with pytest.raises(ValueError, match="anchor_weight needs an anchor column"):
        Variant("bad", anchor_weight=0.5)


def test_pairwise_loss_weighs_soft_labels_by_their_margin():
    logits = torch.tensor([[2.0, 0.0, 1.0]])
    labels = torch.tensor([[1.0, 0.0, 0.5]])  # pairs (0,1) weight 1, (2,1) weight 0.5; 0.5 counts as a rationale
    mask = torch.ones(1, 3, dtype=torch.bool)
    expected = (softplus(-2.0) * 1.0 + softplus(-1.0) * 0.5) / 1.5
    assert pairwise_ranking_loss(logits, labels, mask).item() == pytest.approx(expected, rel=1e-6)


def test_example_aurocs_match_auroc_score_ties_included():
    rng = np.random.default_rng(0)
    logits = torch.tensor(rng.integers(0, 3, size=(2, 3, 6)), dtype=torch.float32)  # many ties, 2 members
    labels = torch.tensor([[1, 0, 0, 1, 0, 0], [0, 1, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]], dtype=torch.float32)
    mask = torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]], dtype=torch.bool)
    aurocs = example_aurocs(logits, labels, mask)
    for member in range(2):
        for b in range(2):
            n = int(mask[b].sum())
            expected = auroc_score(labels[b, :n].numpy(), logits[member, b, :n].numpy())
            assert aurocs[member, b].item() == pytest.approx(expected, abs=1e-6)
    assert torch.isnan(aurocs[:, 2]).all()  # no rationale token


def test_within_example_ranks_known_answer():
    ranks = within_example_ranks(np.array([[3.0, 1.0], [1.0, 1.0], [2.0, 1.0], [9.0, 4.0]]), np.array(["a", "a", "a", "b"]))
    np.testing.assert_allclose(ranks[:3, 0], [0.5, -0.5, 0.0])
    np.testing.assert_allclose(ranks[:, 1], [0.0, 0.0, 0.0, 0.0])  # ties averaged; a one-token example 0


def test_one_member_network_is_expnets_network_and_members_differ():
    torch.manual_seed(5)
    reference = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    torch.manual_seed(5)
    single = GatedExpNet(4, 3)
    x = torch.randn(2, 5, 4)
    torch.testing.assert_close(single(x), reference(x).squeeze(-1)[None])
    three = GatedExpNet(4, 3, members=3)
    out = three(x)
    assert out.shape == (3, 2, 5) and not torch.allclose(out[0], out[1])


def test_simplex_stack_is_a_convex_mix_of_its_inputs():
    stack = SimplexStack(3, members=2)
    with torch.no_grad():
        stack.weight_logits[:] = torch.tensor([[0.0, 0.0, 0.0], [100.0, -100.0, -100.0]])
        stack.bias[:] = torch.tensor([0.5, 0.0])
    weights = stack.weights()
    torch.testing.assert_close(weights.sum(-1), torch.ones(2))
    x = torch.tensor([[0.3, -0.3, 0.0], [-0.5, 0.5, 0.2]])
    scale = stack.log_scale.exp()
    torch.testing.assert_close(stack(x)[0], scale[0] * x.mean(-1) + 0.5)
    torch.testing.assert_close(stack(x)[1], scale[1] * x[:, 0], atol=1e-5, rtol=1e-5)


def test_pseudo_rationales_agreement_rule_gives_shares():
    # one example of 4 tokens (k = 1): token 0 tops 4 of the 6 signals, token 1 tops the other 2, tokens 2-3
    # top none; token 3 is in the bottom half of every signal, token 2 of only two of them
    table = pd.DataFrame({"example_id": ["e"] * 4, "task": ["c"] * 4,
                          "cls_to_tok_h0": [0.9, 0.8, 0.2, 0.1], "axg_h0": [0.5, -0.1, 0.2, 0.0],
                          "layer_grad_norm": [3.0, 0.5, 1.0, 0.2], "layer_grad_x_input": [-4.0, 1.0, 2.0, 0.5],
                          "embedding_grad_norm": [0.1, 0.9, 0.5, 0.0], "embedding_grad_x_input": [0.2, -0.8, 0.5, 0.1]})
    pseudo = pseudo_rationales(table, rho=0.25, n_heads=1, rule="agreement")
    assert pseudo["cls_to_tok_h0"].tolist() == [0.9, 0.1]
    np.testing.assert_allclose(pseudo["token_label"], [4 / 6, 0.0])
    with pytest.raises(ValueError, match="pseudo-rationale rule"):
        pseudo_rationales(table, rho=0.25, n_heads=1, rule="vote")


def test_seeds_train_side_by_side_and_the_selection_reads_their_mean():
    a, b = task_parts("a", 1), task_parts("b", 2)
    stats = {"a": a["unlabeled"], "b": b["unlabeled"]}
    variant = Variant("x", standardise="per_task", objective="pairwise")
    model = fit_variant(variant, a["train"], a["val"], b["unlabeled"], stats, COLUMNS, 0.3, 2, FAST)
    assert model.n_members == 3 and len(model.member_val_auroc) == 3 and len(model.member_best_epochs) == 3
    # each member keeps its own best epoch: its recorded validation AUROC is its best in the history
    for member, best in enumerate(model.member_val_auroc):
        history = [row["member_val_auroc"][member] for row in model.history]
        assert best == pytest.approx(max(history)) and model.member_best_epochs[member] == 1 + int(np.argmax(history))
    x = a["val"][COLUMNS].to_numpy(np.float32)
    members = [model.predict(x, member=m) for m in range(3)]
    assert not np.allclose(members[0], members[1])
    logits = np.stack([np.log(p / (1 - p)) for p in members])
    np.testing.assert_allclose(model.predict(x), 1 / (1 + np.exp(-logits.mean(0))), rtol=1e-4, atol=1e-6)
    selection = select_variant([variant], {"a": a, "b": b}, {"x": COLUMNS}, 0.3, 2, FAST)
    twin = fit_variant(variant, b["train"], b["val"], a["unlabeled"], stats, COLUMNS, 0.3, 2, FAST)
    # the selection scores every validation example with a rationale (mispredicted ones too), as the test set is
    per_seed = [validation_auroc(twin, a["val_all"], m) for m in range(3)]
    assert validation_auroc(twin, a["val_all"]) < validation_auroc(twin, a["val"]) - 0.02
    row = selection.set_index("direction").loc["b->a"]
    assert row["val_auroc"] == pytest.approx(np.mean(per_seed)) and row["val_auroc_seed_sd"] == pytest.approx(np.std(per_seed))


@pytest.mark.parametrize("objective", ["pairwise", "listwise"])
def test_a_simplex_stack_learns_which_signal_carries_the_rationale(objective):
    a, b = task_parts("a", 1), task_parts("b", 2)
    settings = TrainingSettings(max_epochs=20, patience=5, examples_per_batch=16, learning_rate=0.1)  # 10 weights
    stack = fit_variant(Variant("stack", objective=objective, network="simplex"), a["train"], a["val"],
                        b["unlabeled"], {"a": a["unlabeled"], "b": b["unlabeled"]}, COLUMNS, 0.3, 2, settings)
    weights = stack.stack_weights()
    assert max(weights, key=weights.get) == COLUMNS[0] and sum(weights.values()) == pytest.approx(1.0)
    assert weights[COLUMNS[0]] > 2 / len(COLUMNS)  # twice the uniform weight it started from
    ids = b["val"]["example_id"].to_numpy()
    uniform = within_example_ranks(b["val"][COLUMNS].to_numpy(), ids).mean(1)  # the untrained (uniform) stack
    groups = b["val"].assign(uniform=uniform).groupby("example_id", sort=False)
    uniform_auroc = mean_example_auroc([g["uniform"].to_numpy() for _, g in groups],
                                       [g["token_label"].to_numpy() for _, g in groups])
    assert validation_auroc(stack, b["val"]) > uniform_auroc + 0.05
    with pytest.raises(ValueError, match="simplex stack rank-normalises"):
        Variant("bad", network="simplex", standardise="per_task")


def signed_evidence_task(task: str, n_examples: int, seed: int, sign: float) -> pd.DataFrame:
    """Token rows where only attention x gradient (head 0) carries the rationale, with the given sign: -1 is what a
    mispredicted example looks like (the gradient of the predicted class points away from the true evidence)."""
    rng = np.random.default_rng(seed)
    rows = []
    for e in range(n_examples):
        labels = np.zeros(6, dtype=int)
        labels[rng.choice(6, size=2, replace=False)] = 1
        values = rng.normal(scale=0.5, size=(6, len(COLUMNS)))
        values[:, COLUMNS.index("axg_h0")] += sign * 3.0 * labels
        rows += [{"example_id": f"{task}-{e}", "task": task, "token_label": labels[j], **dict(zip(COLUMNS, values[j]))}
                 for j in range(6)]
    return pd.DataFrame(rows)


def test_magnitude_inputs_survive_the_sign_flip_of_a_misprediction():
    train, val = signed_evidence_task("a", 60, 1, +1.0), signed_evidence_task("a", 30, 2, +1.0)
    mispredicted = signed_evidence_task("c", 40, 3, -1.0)
    stats = {"a": train.drop(columns="token_label"), "c": mispredicted.drop(columns="token_label")}
    signed, magnitude = (fit_variant(Variant(name, objective="pairwise", signs=name), train, val, mispredicted, stats,
                                     COLUMNS, 0.3, 2, FAST) for name in ("signed", "magnitude"))
    assert validation_auroc(signed, val) > 0.95 and validation_auroc(magnitude, val) > 0.95
    assert validation_auroc(signed, mispredicted) < 0.1  # the signed network ranks the rationale last
    assert validation_auroc(magnitude, mispredicted) > 0.95
    x = mispredicted[COLUMNS].to_numpy(np.float32)
    signed_index = [COLUMNS.index(c) for c in ("axg_h0", "axg_h1", "layer_grad_x_input", "embedding_grad_x_input")]
    absolute = x.copy()
    absolute[:, signed_index] = np.abs(x[:, signed_index])
    np.testing.assert_array_equal(magnitude.predict(x), magnitude.predict(absolute))
    assert not np.array_equal(signed.predict(x), signed.predict(absolute))
    with pytest.raises(ValueError, match="signs='sign'"):
        Variant("bad", signs="sign")


def test_a_variants_own_learning_rate_replaces_the_shared_one():
    from dataclasses import replace

    a, b = task_parts("a", 1), task_parts("b", 2)
    stats = {"a": a["unlabeled"], "b": b["unlabeled"]}

    def fit(variant, settings):
        return fit_variant(variant, a["train"], a["val"], b["unlabeled"], stats, COLUMNS, 0.3, 2, settings).net.state_dict()

    stack = Variant("stack", objective="pairwise", network="simplex")
    own = fit(replace(stack, learning_rate=0.1), FAST)  # FAST's shared rate is 1e-2
    shared = fit(stack, replace(FAST, learning_rate=0.1))
    default = fit(stack, FAST)
    for key, value in own.items():
        torch.testing.assert_close(value, shared[key])
    assert not torch.equal(own["weight_logits"], default["weight_logits"])
    with pytest.raises(ValueError, match="learning_rate=0 must be positive"):
        Variant("bad", learning_rate=0)
