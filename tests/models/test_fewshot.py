"""Few-shot in-task refits (core/models/learned/fewshot.py) and their choice and curve (services/fewshot/): the
prior is kept at k = 0 and never changed, one step is one Adam step, a strong pull keeps the prior, a few in-task
examples teach what the training tasks could not, the schedule chosen on the training tasks is the one that learns
there, the test examples are never drawn, and the summary counts the draws whose interval is apart from the best
baseline's."""
import copy
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from learned_attribution.core.models.learned import (TransformedRows, Variant, fit_variant, score_examples,
                                                    transformed_rows, validation_auroc)
from learned_attribution.core.models.learned.fewshot import FewShotSettings, fine_tune
from learned_attribution.core.models.signals import FEATURE_SETS, columns_for
from learned_attribution.core.models.learned.fewshot import FOLD_PRIOR
from learned_attribution.services.config import fewshot_settings
from learned_attribution.services.fewshot.choice import Refit, choose_refits, describe, draw, fit_priors
from learned_attribution.services.fewshot.curve import annotated_pool, curve_summary, prior_summary

import synthetic_signals  # tests/models/synthetic_signals.py

COLUMNS = [f"signal_{i}" for i in range(5)]
SIGNAL_COLUMNS = columns_for(FEATURE_SETS, n_heads=2, n_layers=2)


def synthetic_task(task: str, n_examples: int, seed: int, informative: int) -> pd.DataFrame:
    return synthetic_signals.synthetic_task(task, n_examples, seed, COLUMNS, informative=informative, shift=0.0)


VARIANT = Variant("x", objective="pairwise")
CATALOGUE = {"net": {"objective": "pairwise", "feature_sets": ["saliency"]},
             "blind_stack": {"objective": "pairwise", "network": "simplex", "feature_sets": ["position"]}}


@pytest.fixture(scope="module")
def prior(training_settings):
    """A network trained where column 0 carries the rationale; the target task's rationale is in column 2."""
    train, val = synthetic_task("a", 60, 1, informative=0), synthetic_task("a", 20, 2, informative=0)
    settings = training_settings(hidden=8, max_epochs=8, patience=3, batch_size=16, learning_rate=1e-2, seeds=2)
    return fit_variant(VARIANT, train, val, columns=COLUMNS, rho=0.3, settings=settings)


def target(n_examples, seed):
    rows = synthetic_task("c", n_examples, seed, informative=2)
    rows["example_id"] = rows["example_id"] + f"s{seed}"
    return rows


def test_no_examples_is_the_prior_and_the_prior_is_never_changed(prior):
    test = target(40, 9)
    before = [p.detach().clone() for p in prior.net.parameters()]
    same = fine_tune(prior, test.iloc[:0])
    signals = test[COLUMNS].to_numpy(np.float32)
    assert np.array_equal(same.predict(signals), prior.predict(signals))
    assert same.context["fewshot_examples"] == 0 and same.net is not prior.net
    fine_tune(prior, target(8, 3), FewShotSettings(steps=5))
    assert all(torch.equal(p, b) for p, b in zip(prior.net.parameters(), before))


def test_one_step_is_one_adam_step(prior):
    # Adam's first step moves every parameter by the step size (10 x the folds' default 1e-3) against the sign of
    # its gradient (m / sqrt(v) = g / |g|), whatever the gradient's size; with no pull only the pairwise loss's
    # gradient counts. The output biases (b2) are left out: a pairwise loss cannot see a shift, so their gradient is
    # 0 up to rounding.
    examples = target(6, 4)
    tuned = fine_tune(prior, examples, FewShotSettings(steps=1, batch_size=64, step_scale=10.0, prior_weight=0.0))
    before = dict(prior.net.named_parameters())
    changed = torch.cat([(value - before[name]).detach().flatten() for name, value in tuned.net.named_parameters()
                         if name != "b2"])
    moved = changed[changed != 0]
    assert torch.allclose(moved.abs(), torch.full_like(moved, 0.01), rtol=1e-3)
    assert len(moved) > 0.8 * len(changed)  # units whose ReLU is off on every token get no gradient
    assert tuned.history[0]["prior_pull"] == 0.0


def test_a_strong_pull_keeps_the_prior_and_a_weak_one_learns_the_target(prior):
    test = target(60, 11)
    shots = target(32, 5)
    start = validation_auroc(prior, test)
    assert start < 0.65  # the training task's signal says little here
    held = fine_tune(prior, shots, FewShotSettings(steps=100, step_scale=10.0, prior_weight=1e4))
    learned = fine_tune(prior, shots, FewShotSettings(steps=100, step_scale=10.0, prior_weight=0.01))
    assert abs(validation_auroc(held, test) - start) < 0.02
    assert validation_auroc(learned, test) > 0.8
    assert learned.calibrated_threshold == prior.calibrated_threshold and learned.columns == prior.columns


def test_settings_refuse_what_they_cannot_do(prior):
    with pytest.raises(ValueError, match="steps=0"):
        FewShotSettings(steps=0)
    with pytest.raises(ValueError, match="prior_weight"):
        FewShotSettings(prior_weight=-1)
    with pytest.raises(ValueError, match="step_scale"):
        FewShotSettings(step_scale=0)
    with pytest.raises(ValueError, match="lack columns"):
        fine_tune(prior, target(4, 1).drop(columns="token_label"))
    schedule = {"steps": 10, "batch_size": 4, "step_scale": 1.0, "prior_weight": 1.0}
    good = {"ks": [0, 8], "repeats": 2, "pool_roles": ["rationale_train"], "priors": ["net"],
            "schedule": schedule, "choice_repeats": 1}
    parsed = fewshot_settings(good, seed=3, catalogue=CATALOGUE)
    assert parsed.ks == (0, 8) and parsed.schedule.seed == 3 and parsed.schedule.steps == 10
    assert parsed.choice_repeats == 1
    assert parsed.priors == (Variant("net", objective="pairwise", feature_sets=("saliency",)),)
    with pytest.raises(ValueError, match=r"fewshot.priors names unknown variants \['nope'\]"):
        fewshot_settings({**good, "priors": ["nope"]}, seed=0, catalogue=CATALOGUE)
    with pytest.raises(ValueError, match="fewshot.ks"):
        fewshot_settings({**good, "ks": [8, -1]}, seed=0, catalogue=CATALOGUE)
    with pytest.raises(ValueError, match=r"fewshot.schedule.steps"):
        fewshot_settings({**good, "schedule": {**schedule, "steps": 0}}, seed=0, catalogue=CATALOGUE)
    with pytest.raises(ValueError, match=r"fewshot.schedule: few-shot setting prior_weight"):
        fewshot_settings({**good, "schedule": {**schedule, "prior_weight": -1}}, seed=0, catalogue=CATALOGUE)
    with pytest.raises(ValueError, match="parameter fewshot.schedule must be a mapping"):
        fewshot_settings({**good, "schedule": [schedule]}, seed=0, catalogue=CATALOGUE)
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) fewshot.schedules"):
        fewshot_settings({**good, "schedules": [schedule]}, seed=0, catalogue=CATALOGUE)
    with pytest.raises(ValueError, match="fewshot.choice_repeats"):
        fewshot_settings({**good, "choice_repeats": 0}, seed=0, catalogue=CATALOGUE)
    with pytest.raises(ValueError, match="fewshot.repeat"):
        fewshot_settings({**good, "repeat": 2}, seed=0, catalogue=CATALOGUE)


def training_task(task: str, informative: int) -> pd.DataFrame:
    """A training task's signal table with every signal column of a 2-head, 2-layer classifier besides COLUMNS
    (noise): rationale_train and rationale_val examples, every one predicted right."""
    rows = []
    for role, seed in (("rationale_train", 1), ("rationale_val", 2)):
        part = synthetic_signals.synthetic_task(task, 40, seed + informative, [*COLUMNS, *SIGNAL_COLUMNS],
                                                informative=informative, shift=0.0)
        part["example_id"] = part["example_id"] + role
        rows.append(part.assign(role=role, correct=True))
    return pd.concat(rows, ignore_index=True)


def test_the_prior_is_chosen_per_k_on_the_training_tasks_known_in_advance(training_settings):
    # Each training task's rationale is in its own column: a prior fitted on one misses the other's, and a refit on
    # the other's examples learns it, on both directions; a stack of the position columns (noise here) cannot learn
    # either, so the fold's own prior wins at every k. At a k beyond the pool every example is drawn.
    tasks = [training_task("a", informative=0), training_task("b", informative=2)]
    schedule = {"steps": 60, "batch_size": 16, "step_scale": 10.0, "prior_weight": 0.01}
    settings = fewshot_settings({"ks": [0, 16, 1000], "repeats": 1, "pool_roles": ["rationale_train"],
                                 "priors": ["blind_stack"], "schedule": schedule, "choice_repeats": 2},
                                seed=0, catalogue=CATALOGUE)
    fit = training_settings(hidden=8, max_epochs=6, patience=3, batch_size=16, learning_rate=1e-2, seeds=1)
    fold_model = fit_variant(VARIANT, tasks[0], tasks[0], columns=COLUMNS, rho=0.3, settings=fit)
    chosen, table = choose_refits(fold_model, tasks, 0.3, settings, fit, fold="heldout_c")
    assert {k: (r.prior, r.schedule) for k, r in chosen.items()} == {16: (FOLD_PRIOR, settings.schedule),
                                                                    1000: (FOLD_PRIOR, settings.schedule)}
    assert set(table["direction"]) == {"b->a", "a->b"} and (table["fold"] == "heldout_c").all()
    # per direction and prior: the prior itself, then 2 ks x 2 draws
    assert len(table) == 2 * 2 * (1 + 2 * 2) and set(table["variant"]) == {"x", "blind_stack"}
    assert set(table.loc[table["k"] == 1000, "n_train_examples"]) == {40}
    summary = prior_summary(table).set_index(["k", "prior"])
    assert summary["chosen"].sum() == 2 and summary.at[(16, FOLD_PRIOR), "chosen"]
    assert (summary["refits"] == 4).all() and set(summary["schedule"]) == {describe(settings.schedule)}
    # the refit learns the other task's column: well above the prior itself; the blind stack learns nothing
    assert summary.at[(16, FOLD_PRIOR), "val_auroc"] > summary.at[(16, FOLD_PRIOR), "prior_val_auroc"] + 0.1
    assert summary.at[(16, "blind_stack"), "val_auroc"] < 0.6


def test_only_the_chosen_priors_are_fitted_cross_task_for_the_held_out_classifier(training_settings):
    tasks = [training_task("a", informative=0), training_task("b", informative=2)]
    held_out = training_task("c", informative=1)
    settings = fewshot_settings({"ks": [0, 8], "repeats": 1, "pool_roles": ["rationale_train"],
                                 "priors": ["blind_stack"], "schedule": {"steps": 5, "batch_size": 4,
                                                                         "step_scale": 1.0, "prior_weight": 1},
                                 "choice_repeats": 1}, seed=0, catalogue=CATALOGUE)
    fit = training_settings(hidden=8, max_epochs=3, patience=2, batch_size=16, learning_rate=1e-2, seeds=1)
    fold_model = fit_variant(VARIANT, tasks[0], tasks[0], columns=COLUMNS, rho=0.3, settings=fit)
    fold_model.threshold, fold_model.context = 0.4, {"fold": "heldout_c", "variant": "x"}
    own = fit_priors(fold_model, {8: Refit(FOLD_PRIOR, settings.schedule)}, tasks, held_out, 0.3, settings, fit)
    assert own == {FOLD_PRIOR: fold_model}
    both = fit_priors(fold_model, {8: Refit("blind_stack", settings.schedule)}, tasks, held_out, 0.3, settings,
                      fit)
    stack = both["blind_stack"]
    assert both[FOLD_PRIOR] is fold_model and stack.variant == settings.priors[0]
    assert stack.columns == columns_for(["position"], 2, 2) and stack.threshold == 0.4
    assert stack.context == {"fold": "heldout_c", "variant": "blind_stack"}


def predictions(ids_by_role):
    rows = []
    for role, ids in ids_by_role.items():
        for i in ids:
            rows.append({"example_id": i, "role": role, "token_labels": [-100, 1, 0, -100], "correct": True})
    rows.append({"example_id": "empty", "role": "rationale_train", "token_labels": [-100, 0, 0, -100],
                 "correct": True})
    return pd.DataFrame(rows)


def test_the_pool_is_the_annotated_examples_and_never_the_test_set():
    frame = predictions({"rationale_train": ["t1", "t2"], "rationale_val": ["v1"], "rationale_test": ["x1"]})
    pool = annotated_pool(frame, ["rationale_train", "rationale_val"], ["x1"])
    assert list(pool["example_id"]) == ["t1", "t2", "v1"]  # the one without a rationale token is not drawn
    with pytest.raises(ValueError, match=r"test examples of the fold, e.g. \['t2'\]"):
        annotated_pool(frame, ["rationale_train"], ["x1", "t2"])
    ids = [f"e{i}" for i in range(50)]
    first = draw(ids, 8, 0, seed=0)
    assert first == draw(ids, 8, 0, seed=0) and len(set(first)) == 8 and set(first) <= set(ids)
    assert first != draw(ids, 8, 1, seed=0)
    assert draw(ids, 50, 0, seed=0) == ids


def test_the_summary_counts_the_draws_apart_from_the_best_baseline():
    def row(role, k, auroc, f1, method="expnet_plus", repeat=0):
        return {"fold": "heldout_x", "method": method, "role": role, "k": k, "repeat": repeat,
                "prior": "stack" if role == "few-shot" else None, "auroc": auroc,
                "auroc_low": auroc - 0.02, "auroc_high": auroc + 0.02, "f1_matched": f1, "f1_matched_low": f1 - 0.02,
                "f1_matched_high": f1 + 0.02, "auroc_incorrect": auroc - 0.1}
    curves = pd.DataFrame([row("few-shot", 0, 0.70, 0.40), row("few-shot", 8, 0.74, 0.45),
                           row("few-shot", 8, 0.80, 0.50, repeat=1), row("suggested", 8, 0.90, 0.45),
                           row("best baseline", None, 0.72, 0.42, "gae"), row("saliency", None, 0.71, 0.41, "saliency")])
    summary = curve_summary(curves).set_index("k")
    assert list(summary.index) == [0, 8] and summary.at[8, "draws"] == 2  # the suggested row is beside the draws
    assert summary.at[8, "suggested_auroc"] == 0.90 and summary.at[8, "suggested_f1_matched"] == 0.45
    assert np.isnan(summary.at[0, "suggested_auroc"])
    # 0.88 is above the baseline's 0.74; F1's 0.43 is not above its 0.44
    assert summary.at[8, "suggested_auroc_apart"] and not summary.at[8, "suggested_f1_matched_apart"]
    assert not summary.at[0, "suggested_auroc_apart"]
    assert summary.at[8, "auroc"] == pytest.approx(0.77) and summary.at[8, "auroc_draw_min"] == pytest.approx(0.74)
    # 0.74 - 0.02 = 0.72 is not above 0.74 (the baseline's high); 0.78 is
    assert summary.at[8, "auroc_draws_apart"] == 1 and summary.at[0, "auroc_draws_apart"] == 0
    assert summary.at[8, "best_baseline"] == "gae" and summary.at[8, "prior"] == "stack"
    assert summary.at[8, "saliency_auroc_incorrect"] == pytest.approx(0.61)


def test_the_apis_default_is_the_pipelines_schedule():
    root = Path(__file__).resolve().parents[2]
    declared = yaml.safe_load((root / "conf/base/parameters_fewshot.yml").read_text())
    catalogue = yaml.safe_load((root / "conf/base/parameters_expnet_plus_variants.yml").read_text())
    parsed = fewshot_settings(declared["fewshot"], seed=0, catalogue=catalogue["expnet_plus_variants"])
    assert parsed.schedule == FewShotSettings()
    assert parsed.ks == (0, 8, 32, 128, 512) and parsed.pool_roles == ("rationale_train", "rationale_val")


def test_a_refit_does_not_depend_on_the_order_of_its_rows(prior):
    # the signal rows of the same examples come batched differently from the pipeline and from a user's file
    shots = target(8, 5)
    ids = list(pd.unique(shots["example_id"]))
    shuffled = pd.concat([shots[shots["example_id"] == i] for i in reversed(ids)], ignore_index=True)
    settings = FewShotSettings(steps=20, batch_size=4, step_scale=10.0, prior_weight=0.1)
    one, other = fine_tune(prior, shots, settings), fine_tune(prior, shuffled, settings)
    assert all(torch.equal(a, b) for a, b in zip(one.net.parameters(), other.net.parameters()))


def test_each_metric_is_compared_with_the_best_baseline_by_that_metric():
    # saliency is the best baseline by AUROC, attention_x_gradient by matched F1: a draw's F1 of 0.45 [0.43, 0.47]
    # is apart from saliency's 0.40 [0.38, 0.42] but not from attention_x_gradient's 0.48
    from learned_attribution.services.reporting.fewshot import fewshot_headline, fewshot_page

    def row(role, k, auroc, f1, method="expnet_plus", repeat=0):
        return {"fold": "heldout_x", "method": method, "role": role, "k": k, "repeat": repeat,
                "prior": "stack" if role == "few-shot" else None, "auroc": auroc, "auroc_low": auroc - 0.02,
                "auroc_high": auroc + 0.02, "f1_matched": f1, "f1_matched_low": f1 - 0.02,
                "f1_matched_high": f1 + 0.02, "auroc_incorrect": auroc - 0.1}
    curves = pd.DataFrame([row("few-shot", 0, 0.70, 0.40), row("few-shot", 8, 0.80, 0.45),
                           row("suggested", 8, 0.81, 0.46),
                           row("best baseline", None, 0.72, 0.40, "saliency"),
                           row("best baseline (F1)", None, 0.70, 0.48, "attention_x_gradient"),
                           row("saliency", None, 0.72, 0.40, "saliency")])
    summary = curve_summary(curves).set_index("k")
    assert summary.at[8, "best_baseline"] == "saliency" and summary.at[8, "best_baseline_by_f1"] == \
        "attention_x_gradient"
    assert summary.at[8, "baseline_auroc"] == 0.72 and summary.at[8, "baseline_f1_matched"] == 0.48
    assert summary.at[8, "auroc_draws_apart"] == 1 and summary.at[8, "f1_matched_draws_apart"] == 0
    page = fewshot_page(summary.reset_index(), pd.DataFrame(
        [{"fold": "heldout_x", "k": 8, "prior": "fold", "variant": "stack", "schedule": "steps=3", "refits": 2,
          "n_train_examples": 8, "val_auroc": 0.65, "val_auroc_min": 0.61, "chosen": True, "prior_val_auroc": 0.6}]))
    assert "Every refit takes the one schedule: steps=3." in page
    # the suggested refit: AUROC 0.79 above saliency's 0.74 (starred), F1 0.44 not above attention_x_gradient's 0.50
    assert page.count("| 0.810* / 0.460 |") == 1
    assert "| heldout_x | 8 | stack | 0.650 (lowest 0.610) | 0.600 | yes |" in page
    assert ("Best baseline: by AUROC saliency, AUROC 0.720 [0.700, 0.740]; by matched F1 attention_x_gradient, "
            "matched F1 0.480 [0.460, 0.500]. At no k is every draw above saliency in AUROC and above "
            "attention_x_gradient in matched F1 with intervals apart.") in page
    assert "heldout_x (saliency 0.720 / attention_x_gradient 0.480)" in fewshot_headline(summary.reset_index())
    # one method best by both: one reference row, named once
    same = curve_summary(curves[curves["role"] != "best baseline (F1)"]).set_index("k")
    assert same.at[8, "best_baseline_by_f1"] == "saliency" and same.at[8, "f1_matched_draws_apart"] == 1
    assert "heldout_x (saliency 0.720 / 0.400)" in fewshot_headline(same.reset_index())


def test_the_stored_choice_takes_the_nearest_k_below_and_keeps_its_priors(prior, tmp_path):
    from learned_attribution.core.models.learned.fewshot import ChosenRefit, FewShotChoice
    from learned_attribution.services import bundle as bundles
    from learned_attribution.services.fewshot.choice import stored_choice

    gentle, free = FewShotSettings(steps=10, prior_weight=30.0, seed=4), FewShotSettings(steps=30, seed=4)
    other = prior.__class__(**{**prior.__dict__, "variant": Variant("net", objective="pairwise")})
    choice = stored_choice({8: Refit(FOLD_PRIOR, gentle), 32: Refit("net", free)}, {FOLD_PRIOR: prior, "net": other},
                           fold="heldout_c")
    assert choice.refits == {8: ChosenRefit(FOLD_PRIOR, "x", gentle), 32: ChosenRefit("net", "net", free)}
    assert set(choice.priors) == {"net"}  # the fold's own ExpNet+ is in the fold's folder already
    assert [choice.refit_for(n)[0] for n in (1, 8, 31, 32, 500)] == [8, 8, 8, 32, 32]
    folder = bundles.write_fewshot_choice(choice, tmp_path / "heldout_c" / bundles.FEWSHOT)
    assert sorted(p.name for p in folder.iterdir()) == ["choice.json", "priors"]
    read = bundles.read_fewshot_choice(folder)
    assert read.fold == "heldout_c" and read.refits == choice.refits
    signals = target(10, 2)[COLUMNS].to_numpy(np.float32)
    assert np.array_equal(read.priors["net"].predict(signals), other.predict(signals))
    assert bundles.read_fewshot_choice(tmp_path / "none") is None
    with pytest.raises(ValueError, match=r"no fitted prior for \['net'\]"):
        FewShotChoice("heldout_c", {32: ChosenRefit("net", "net", free)})


@pytest.mark.parametrize("recipe", [VARIANT, Variant("ranked", objective="pairwise", network="simplex"),
                                    Variant("anchored", objective="pairwise", example_z=True, anchor="signal_0")],
                         ids=lambda v: v.name)
def test_a_priors_rows_transformed_once_give_its_refits_and_scores_exactly(recipe, training_settings):
    # The draws of one prior share the pass through its input pipeline: a refit on a subset of the rows transformed
    # once, and its scores on them, are those of the rows themselves, bit for bit, also where the pipeline reads
    # whole examples (within-example ranks, z-scores, an anchor).
    train, val = synthetic_task("a", 30, 1, informative=0), synthetic_task("a", 10, 2, informative=0)
    settings = training_settings(hidden=8, max_epochs=2, patience=2, batch_size=16, learning_rate=1e-2, seeds=2)
    prior = fit_variant(recipe, train, val, columns=COLUMNS, rho=0.3, settings=settings)
    rows = target(12, 7)
    shared = transformed_rows(prior, rows)
    ids = sorted(pd.unique(rows["example_id"]))[2:9]
    schedule = FewShotSettings(steps=15, batch_size=4, step_scale=10.0, prior_weight=0.1)
    own = fine_tune(prior, rows[rows["example_id"].isin(ids)], schedule)
    from_shared = fine_tune(prior, shared.of_examples(ids), schedule)
    assert all(torch.equal(a, b) for a, b in zip(own.net.parameters(), from_shared.net.parameters()))
    for member in (None, 1):
        direct, once = score_examples(own, rows, member), score_examples(own, shared, member)
        assert list(direct["example_id"]) == list(once["example_id"])
        assert all(np.array_equal(a, b) for a, b in zip(direct["scores"], once["scores"]))
    assert validation_auroc(own, rows) == validation_auroc(own, shared)
    other = TransformedRows(copy.deepcopy(prior.inputs), shared.example_ids, shared.inputs, shared.offsets,
                            shared.labels)
    with pytest.raises(ValueError, match="another input pipeline"):
        fine_tune(prior, other, schedule)
    with pytest.raises(ValueError, match="another input pipeline"):
        score_examples(prior, other)
