"""Self-training's pseudo-rationales and training any variant of the one learned-explainer core (`models/learned`): a
transferable signal learned, per-task standardisation, held-out labels never read, anchors, seeds side by side, the
selection that never reads the held-out task, the simplex stack, magnitudes and a variant's own learning rate (the
columns, the paper's variant and the threshold by hand: test_learned.py)."""
import numpy as np
import pandas as pd
import pytest
import torch

from learned_attribution.core.metrics.plausibility import mean_example_auroc
from learned_attribution.core.models.learned import (InputPipeline, Variant, fit_variant, select_variant,
                                                     validation_auroc)
from learned_attribution.core.models.learned.inputs import within_example_ranks
from learned_attribution.core.models.learned.pseudo import pseudo_labels

import synthetic_signals  # tests/models/synthetic_signals.py
from test_learned import CALIBRATED, COLUMNS, PAPER, best_threshold_by_hand  # tests/models/test_learned.py


@pytest.fixture(scope="module")
def settings(training_settings):
    """`settings(**overrides) -> TrainingSettings`: CALIBRATED with overrides."""
    return lambda **overrides: training_settings(**{**CALIBRATED, **overrides})


@pytest.fixture(scope="module")
def fast(settings):
    """A few epochs of the loop, three seeds: what most fits below use."""
    return settings(max_epochs=8, patience=3, batch_size=16, learning_rate=1e-2)


# ----------------------------------------------------------------------------------------------------------------
# Pseudo-rationales
# ----------------------------------------------------------------------------------------------------------------

def test_pseudo_labels_where_signals_agree():
    # example e, 4 tokens, 1 head: token 0 tops all three signals, token 3 is last in all, token 1 tops only raw
    # attention (1 of 3), token 2 middling. Example f: token 0 tops two signals, token 1 the third, so f has no
    # non-rationale token and is left out whole.
    table = pd.DataFrame({"example_id": ["e"] * 4 + ["f"] * 2, "task": ["c"] * 6, "token_label": [0, 0, 0, 1, 0, 1],
                          "cls_to_tok_h0": [0.9, 0.8, 0.2, 0.1, 0.9, 0.1], "axg_h0": [0.5, -0.1, 0.2, 0.0, 0.5, 0.1],
                          "layer_grad_norm": [3.0, 0.5, 1.0, 0.2, 0.1, 3.0]})
    labels = pseudo_labels(table, rho=0.25)  # k = 1
    # token 0 positive, token 3 negative, the others unlabelled
    np.testing.assert_array_equal(labels, [1.0, np.nan, np.nan, 0.0, np.nan, np.nan])
    # the gold labels are not read
    np.testing.assert_array_equal(pseudo_labels(table.assign(token_label=1 - table["token_label"]), rho=0.25), labels)
    np.testing.assert_array_equal(pseudo_labels(table.drop(columns="token_label"), rho=0.25), labels)


def test_pseudo_labels_agreement_rule_gives_shares():
    # one example of 4 tokens (k = 1): token 0 tops 4 of the 6 signals, token 1 tops the other 2, tokens 2-3
    # top none; token 3 is in the bottom half of every signal, token 2 of only two of them
    table = pd.DataFrame({"example_id": ["e"] * 4, "task": ["c"] * 4,
                          "cls_to_tok_h0": [0.9, 0.8, 0.2, 0.1], "axg_h0": [0.5, -0.1, 0.2, 0.0],
                          "layer_grad_norm": [3.0, 0.5, 1.0, 0.2], "layer_grad_x_input": [-4.0, 1.0, 2.0, 0.5],
                          "embedding_grad_norm": [0.1, 0.9, 0.5, 0.0], "embedding_grad_x_input": [0.2, -0.8, 0.5, 0.1]})
    labels = pseudo_labels(table, rho=0.25, rule="agreement")
    np.testing.assert_allclose(labels, [4 / 6, np.nan, np.nan, 0.0])
    with pytest.raises(ValueError, match="pseudo-rationale rule"):
        pseudo_labels(table, rho=0.25, rule="vote")


# ----------------------------------------------------------------------------------------------------------------
# Training any variant
# ----------------------------------------------------------------------------------------------------------------

def synthetic_task(task: str, n_examples: int, seed: int, **kwargs) -> pd.DataFrame:
    return synthetic_signals.synthetic_task(task, n_examples, seed, COLUMNS, **kwargs)


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


def test_fit_learns_a_transferable_signal(fast):
    a, b = task_parts("a", 1), task_parts("b", 2)
    variant = Variant("x", standardise="per_task", objective="focal+pairwise")
    model = fit_variant(variant, a["train"], a["val"], target=b["unlabeled"], stats_tables={"a": a["unlabeled"], "b": b["unlabeled"]},
                        columns=COLUMNS, rho=0.3, settings=fast)
    assert validation_auroc(model, b["val"]) > 0.75
    # The threshold is calibrated on the training tasks' validation rows, standardised with their own task's
    # statistics (per-task): the best of the grid by hand on the probabilities the network gives them.
    a_statistics = model.inputs.fitted_statistics(a["unlabeled"][COLUMNS].to_numpy(np.float32),
                                                  a["unlabeled"]["example_id"].to_numpy())
    inputs, _ = model.inputs.transform(a["val"][COLUMNS].to_numpy(np.float32), None, *a_statistics)
    probabilities = model.network_probabilities(torch.as_tensor(inputs), 0.0)
    groups = a["val"].groupby("example_id", sort=False).indices
    expected, _ = best_threshold_by_hand([probabilities[i] for i in groups.values()],
                                         [a["val"]["token_label"].to_numpy()[i] for i in groups.values()])
    assert model.calibrated_threshold == expected
    assert model.columns == COLUMNS and model.inputs.columns == COLUMNS


def test_a_variant_that_reads_the_target_needs_it(fast):
    a = task_parts("a", 1)
    for variant in (Variant("z", standardise="per_task"), Variant("st", self_training=True)):
        with pytest.raises(ValueError, match="reads the target classifier's unlabeled signals: pass target"):
            fit_variant(variant, a["train"], a["val"], target=None, stats_tables={"a": a["unlabeled"]}, columns=COLUMNS, rho=0.3, settings=fast)
    # a per-task simplex stack standardises nothing, so it reads no target either
    assert not InputPipeline.for_variant(Variant("stack", network="simplex"), COLUMNS).standardises


def test_per_task_standardisation_saves_the_targets_statistics_and_global_the_training_tokens(settings):
    a, b = task_parts("a", 1), task_parts("b", 2)
    stats = {"a": a["unlabeled"], "b": b["unlabeled"]}
    settings = settings(max_epochs=1, patience=1, batch_size=16, seeds=1)
    per_task = fit_variant(Variant("z", standardise="per_task"), a["train"], a["val"], target=b["unlabeled"], stats_tables=stats, columns=COLUMNS,
                           rho=0.3, settings=settings)
    target = b["unlabeled"][COLUMNS].to_numpy(np.float64)  # the target's unlabeled tokens, not its labelled ones
    np.testing.assert_allclose(per_task.inputs.mean, target.mean(0), rtol=1e-5)
    np.testing.assert_allclose(per_task.inputs.std, target.std(0) + 1e-6, rtol=1e-5)
    shared = fit_variant(Variant("g"), a["train"], a["val"], target=b["unlabeled"], stats_tables=stats, columns=COLUMNS, rho=0.3, settings=settings)
    training = a["train"][COLUMNS].to_numpy(np.float64)
    np.testing.assert_allclose(shared.inputs.mean, training.mean(0), rtol=1e-5)
    np.testing.assert_allclose(shared.inputs.std, training.std(0) + 1e-6, rtol=1e-5)


def test_per_task_standardisation_adapts_to_the_targets_scale_without_its_labels(fast):
    """Each task's rows are z-scored with that task's own statistics: a target whose signals are an affine
    rescaling of another's gets the same trained weights and the same token scores; global standardisation does
    not (it applies the training tokens' statistics to any target)."""
    a, b = task_parts("a", 1), task_parts("b", 2)
    rescaled = {part: table.copy() for part, table in b.items()}
    for table in rescaled.values():
        table[COLUMNS] = table[COLUMNS] * 4.0 - 3.0
    scores = {}
    for name, variant in (("per_task", Variant("z", standardise="per_task", objective="pairwise")),
                          ("global", Variant("g", objective="pairwise"))):
        fits = [fit_variant(variant, a["train"], a["val"], target=target["unlabeled"],
                            stats_tables={"a": a["unlabeled"], "b": target["unlabeled"]}, columns=COLUMNS, rho=0.3, settings=fast)
                for target in (b, rescaled)]
        for key, value in fits[0].net.state_dict().items():
            torch.testing.assert_close(value, fits[1].net.state_dict()[key])  # the target never changes training
        scores[name] = [fit.predict(target["val"][COLUMNS].to_numpy(np.float32))
                        for fit, target in zip(fits, (b, rescaled))]
    np.testing.assert_allclose(scores["per_task"][0], scores["per_task"][1], rtol=1e-4, atol=1e-6)
    assert not np.allclose(scores["global"][0], scores["global"][1], rtol=1e-2, atol=1e-3)


def test_held_out_labels_never_change_training(fast):
    """Poisoning the held-out task's rationales (inverting every token label) changes no trained weight: fitting
    for the held-out classifier reads its signals, never its labels (self-training included). The selection cannot
    read the held-out task's signals or labels (`select_variant` takes the training tasks only; the node's inputs
    are `test_the_selection_node_has_no_held_out_input`)."""
    tasks = {"a": task_parts("a", 1), "b": task_parts("b", 2)}
    variants = [PAPER, Variant("paper", standardise="global"), Variant("task_z", standardise="per_task"),
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
        outcomes.append([fit_variant(v, train, val, target=target, stats_tables=stats, columns=COLUMNS, rho=0.3, settings=fast) for v in variants])
    models, models_poisoned = outcomes
    for model, twin in zip(models, models_poisoned):
        for key, value in model.net.state_dict().items():
            torch.testing.assert_close(value, twin.net.state_dict()[key])
        np.testing.assert_array_equal(model.inputs.mean, twin.inputs.mean)
        np.testing.assert_array_equal(model.inputs.std, twin.inputs.std)
    assert models[3].n_pseudo_examples > 0 and models[5].n_pseudo_examples > 0  # self-training used the held-out signals
    # and self-training did change what was learned (the held-out signals were read, so the check above can fail)
    plain = fit_variant(Variant("ranking", standardise="per_task", objective="pairwise"), train, val, target=held_out,
                        stats_tables={"a": tasks["a"]["unlabeled"], "b": tasks["b"]["unlabeled"], "c": held_out}, columns=COLUMNS, rho=0.3,
                        settings=fast)
    assert not torch.equal(plain.net.state_dict()["w1"], models[3].net.state_dict()["w1"])


def test_the_selection_node_has_no_held_out_input():
    from learned_attribution.core.tasks import TASKS
    from learned_attribution.pipelines.ablation import create_pipeline  # the pipeline's wiring

    candidates = create_pipeline(TASKS)
    for task in TASKS:
        (node,) = [n for n in candidates.nodes if n.name == f"ablation_{task}.select_expnet_plus"]
        assert not [i for i in node.inputs if i.startswith(f"{task}.")], node.inputs
        assert {f"{t}.explainer_signals" for t in TASKS if t != task} <= set(node.inputs)


def test_an_anchor_alone_ranks_like_its_signal_and_a_residual_is_trained_on_top(fast):
    a, b = task_parts("a", 1), task_parts("b", 2)
    stats = {"a": a["unlabeled"], "b": b["unlabeled"]}
    gold = [g["token_label"].to_numpy() for _, g in b["val"].groupby("example_id", sort=False)]
    anchor_auroc = mean_example_auroc([g[COLUMNS[0]].to_numpy() for _, g in b["val"].groupby("example_id", sort=False)],
                                      gold)
    alone = fit_variant(Variant("anchor", anchor=COLUMNS[0], anchor_weight=0.0), a["train"], a["val"], target=b["unlabeled"],
                        stats_tables=stats, columns=COLUMNS, rho=0.3, settings=fast)
    assert alone.history == [] and validation_auroc(alone, b["val"]) == pytest.approx(anchor_auroc, abs=1e-12)
    residual = fit_variant(Variant("anchored", standardise="per_task", objective="pairwise", anchor=COLUMNS[0]),
                           a["train"], a["val"], target=b["unlabeled"], stats_tables=stats, columns=COLUMNS, rho=0.3, settings=fast)
    assert residual.history and validation_auroc(residual, b["val"]) > 0.75
    with pytest.raises(ValueError, match="anchor 'afn_norm_l0' is not among its input columns"):
        fit_variant(Variant("bad", anchor="afn_norm_l0"), a["train"], a["val"], target=b["unlabeled"], stats_tables=stats, columns=COLUMNS, rho=0.3,
                    settings=fast)
    with pytest.raises(ValueError, match="anchor_weight needs an anchor column"):
        Variant("bad", anchor_weight=0.5)


def test_seeds_train_side_by_side_and_the_selection_reads_their_mean(fast):
    a, b = task_parts("a", 1), task_parts("b", 2)
    stats = {"a": a["unlabeled"], "b": b["unlabeled"]}
    variant = Variant("x", standardise="per_task", objective="pairwise")
    model = fit_variant(variant, a["train"], a["val"], target=b["unlabeled"], stats_tables=stats, columns=COLUMNS, rho=0.3, settings=fast)
    assert model.n_members == 3 and len(model.member_val_scores) == 3 and len(model.member_best_epochs) == 3
    # each member keeps its own best epoch: its recorded validation AUROC is its best in the history, the mean
    # per-example AUROC (this variant's stopping rule) of the member's kept network on a's validation rows, which
    # training standardised with a's own statistics (the saved pipeline holds the target b's)
    a_statistics = model.inputs.fitted_statistics(a["unlabeled"][COLUMNS].to_numpy(np.float32),
                                                  a["unlabeled"]["example_id"].to_numpy())
    a_inputs, _ = model.inputs.transform(a["val"][COLUMNS].to_numpy(np.float32), None, *a_statistics)
    groups = a["val"].groupby("example_id", sort=False).indices
    for member, best in enumerate(model.member_val_scores):
        history = [row["member_val_auroc"][member] for row in model.history]
        assert best == pytest.approx(max(history)) and model.member_best_epochs[member] == 1 + int(np.argmax(history))
        kept = model.network_probabilities(torch.as_tensor(a_inputs), 0.0, member)
        assert mean_example_auroc([kept[i] for i in groups.values()],
                                  [a["val"]["token_label"].to_numpy()[i] for i in groups.values()]) == pytest.approx(
            best, abs=1e-6)
    x = a["val"][COLUMNS].to_numpy(np.float32)
    members = [model.predict(x, member=m) for m in range(3)]
    assert not np.allclose(members[0], members[1])
    logits = np.stack([np.log(p / (1 - p)) for p in members])
    np.testing.assert_allclose(model.predict(x), 1 / (1 + np.exp(-logits.mean(0))), rtol=1e-4, atol=1e-6)
    selection = select_variant([variant], {"a": a, "b": b}, {"x": COLUMNS}, 0.3, fast)
    twin = fit_variant(variant, b["train"], b["val"], target=a["unlabeled"], stats_tables=stats, columns=COLUMNS, rho=0.3, settings=fast)
    # the selection scores every validation example with a rationale (mispredicted ones too), as the test set is
    per_seed = [validation_auroc(twin, a["val_all"], m) for m in range(3)]
    assert validation_auroc(twin, a["val_all"]) < validation_auroc(twin, a["val"]) - 0.02
    row = selection.set_index("direction").loc["b->a"]
    assert row["val_auroc"] == pytest.approx(np.mean(per_seed)) and row["val_auroc_seed_sd"] == pytest.approx(np.std(per_seed))


def test_the_selection_leaves_out_each_of_any_number_of_training_tasks_and_ties_go_to_the_earlier_variant(settings):
    tasks = {task: task_parts(task, seed) for task, seed in (("a", 1), ("b", 2), ("c", 3))}
    settings = settings(max_epochs=3, patience=2, batch_size=16, learning_rate=1e-2, seeds=1)
    first = Variant("first", standardise="per_task", objective="pairwise")
    same = Variant("same_recipe", standardise="per_task", objective="pairwise")
    selection = select_variant([first, same], tasks, {"first": COLUMNS, "same_recipe": COLUMNS}, 0.3, settings)
    directions = set(selection.loc[selection["variant"] == "first", "direction"])
    assert directions == {"b+c->a", "a+c->b", "a+b->c", "mean"}
    means = selection[selection["direction"] == "mean"].set_index("variant")
    assert means.at["first", "val_auroc"] == means.at["same_recipe", "val_auroc"]  # the same recipe, the same scores
    assert means["rank"].to_dict() == {"first": 1, "same_recipe": 2}
    assert set(selection.loc[selection["selected"], "variant"]) == {"first"}
    # the mean row is the mean over the left-out directions
    rows = selection[(selection["variant"] == "first") & (selection["direction"] != "mean")]
    assert means.at["first", "val_auroc"] == pytest.approx(rows["val_auroc"].mean())
    with pytest.raises(ValueError, match="needs at least two training tasks"):
        select_variant([first], {"a": tasks["a"]}, {"first": COLUMNS}, 0.3, settings)


@pytest.mark.parametrize("objective", ["pairwise", "listwise"])
def test_a_simplex_stack_learns_which_signal_carries_the_rationale(objective, settings):
    a, b = task_parts("a", 1), task_parts("b", 2)
    settings = settings(max_epochs=20, patience=5, batch_size=16, learning_rate=0.1)  # 10 weights
    stack = fit_variant(Variant("stack", objective=objective, network="simplex"), a["train"], a["val"],
                        target=b["unlabeled"], stats_tables={"a": a["unlabeled"], "b": b["unlabeled"]}, columns=COLUMNS, rho=0.3, settings=settings)
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


def test_magnitude_inputs_survive_the_sign_flip_of_a_misprediction(fast):
    train, val = signed_evidence_task("a", 60, 1, +1.0), signed_evidence_task("a", 30, 2, +1.0)
    mispredicted = signed_evidence_task("c", 40, 3, -1.0)
    stats = {"a": train.drop(columns="token_label"), "c": mispredicted.drop(columns="token_label")}
    signed, magnitude = (fit_variant(Variant(name, objective="pairwise", signs=name), train, val, target=mispredicted, stats_tables=stats,
                                     columns=COLUMNS, rho=0.3, settings=fast) for name in ("signed", "magnitude"))
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


def test_a_variants_own_learning_rate_replaces_the_shared_one(fast):
    from dataclasses import replace

    a, b = task_parts("a", 1), task_parts("b", 2)
    stats = {"a": a["unlabeled"], "b": b["unlabeled"]}

    def fit(variant, settings):
        return fit_variant(variant, a["train"], a["val"], target=b["unlabeled"], stats_tables=stats, columns=COLUMNS, rho=0.3, settings=settings).net.state_dict()

    stack = Variant("stack", objective="pairwise", network="simplex")
    own = fit(replace(stack, learning_rate=0.1), fast)  # fast's shared rate is 1e-2
    shared = fit(stack, replace(fast, learning_rate=0.1))
    default = fit(stack, fast)
    for key, value in own.items():
        torch.testing.assert_close(value, shared[key])
    assert not torch.equal(own["weight_logits"], default["weight_logits"])
    with pytest.raises(ValueError, match="learning_rate=0 must be positive"):
        Variant("bad", learning_rate=0)
