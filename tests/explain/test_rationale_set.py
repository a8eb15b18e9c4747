"""The library side of a fold's evaluation (services/evaluation: protocol, cost, folds): the seeded sample, the best
baseline, explaining a rationale set with learned and baseline methods, faithfulness on the sample, and scoring with
known answers."""
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch

from learned_attribution.core.models import artifacts
from learned_attribution.core.models.loading import load_classifier
from learned_attribution.core.models.signals import FEATURE_SETS, signal_rows
from learned_attribution.services.config import compute_settings, scoring_settings
from learned_attribution.services.evaluation.cost import cost_plausibility, pareto_frontier
from learned_attribution.services.evaluation.protocol import (best_baseline, expensive_sample, explain_rationale_set,
                                                              matched_baselines, sample_faithfulness,
                                                              score_rationale_set)

CROSSTASK = {"batch_size": 2, "max_test_examples": None, "expensive": ["occlusion"],
             "expensive_sample_size": 2, "baselines": {"raw_attention": {}, "occlusion": {"batch_size": 8}},
             "faithfulness": {"fractions": [0.2, 0.5], "batch_size": 4}, "bootstrap": {"n_boot": 50, "seed": 0}}
SCORING = scoring_settings(CROSSTASK, layer=-1, seed=0)
COMPUTE = compute_settings({"device": "cpu", "bf16": False,
                            "dask": {"address": None, "n_workers": 2, "threads_per_worker": 1, "methods": None,
                                     "batches_per_task": 1, "retries": 1}})


def test_expensive_sample_is_seeded_and_capped():
    examples = pd.DataFrame({"example_id": [f"e{i}" for i in range(10)]})
    assert expensive_sample(examples, None, 0) == expensive_sample(examples, 99, 0) == examples["example_id"].tolist()
    first, again = expensive_sample(examples, 3, 7), expensive_sample(examples, 3, 7)
    assert first == again and len(set(first)) == 3 and set(first) <= set(examples["example_id"])


def test_the_best_baseline_ignores_learned_methods_floors_and_sample_only_methods():
    rows = [("expnet_plus", "learned", 100, 0.95), ("saliency", "gradient", 100, 0.80),
            ("raw_attention", "attention", 100, 0.70), ("lime", "perturbation", 40, 0.99),
            ("random", "floor", 100, 0.50)]
    metrics = pd.DataFrame([{"method": m, "family": f, "n_examples": n, "auroc": a, "subset": "all", "rule": "matched"}
                            for m, f, n, a in rows])
    assert set(matched_baselines(metrics)["method"]) == {"saliency", "raw_attention"}
    assert best_baseline(metrics) == "saliency" and best_baseline(metrics.iloc[:1]) is None


@pytest.fixture
def rationale_set(tiny_models_dir, rationale_rows):
    classifier = load_classifier(tiny_models_dir / "classifier_sst2")
    texts = [["the", "movie", "is", "great"], ["a", "bad", "film"], ["so", "boring", "and", "slow", "."],
             ["fun", "story"]]
    fold = tiny_models_dir / "heldout_sst2"
    return (classifier, rationale_rows(classifier.tokenizer, texts), artifacts.load_learned(fold / "expnet_paper"),
            artifacts.load_learned(fold / "expnet_plus"))


def test_explaining_a_rationale_set_runs_every_method_and_the_expensive_ones_on_the_sample(rationale_set):
    classifier, predictions, paper, plus = rationale_set
    scores, failures, cost = explain_rationale_set(classifier, predictions, {"expnet_plus": plus, "expnet_paper": paper},
                                                   SCORING, COMPUTE)
    assert failures.empty
    counts = scores.groupby("method")["example_id"].nunique().to_dict()
    assert counts == {"expnet_plus": 4, "expnet_paper": 4, "raw_attention": 4, "occlusion": 2}
    assert scores.loc[scores["method"] == "occlusion", "in_sample"].all() and scores["in_sample"].sum() == 2 * 4
    for row in scores.itertuples():
        assert len(row.scores) == len(row.gold) == len(predictions.set_index("example_id").at[row.example_id,
                                                                                                   "input_ids"]) - 2
    assert set(cost["method"]) == set(counts) | {"forward"} and (cost["examples_per_second"] > 0).all()
    assert cost.set_index("method").at["forward", "ratio_to_forward"] == pytest.approx(1.0)
    faithful = sample_faithfulness(classifier, scores, predictions, SCORING, COMPUTE)
    assert len(faithful) == 2 * 4
    # Known answer, from the classifier by hand: AOPC comprehensiveness of one sampled explanation is the mean over
    # the fractions (20%, 50%) of p(y | x) - p(y | x without its top-k tokens).
    sampled = scores[(scores["method"] == "occlusion") & scores["in_sample"]]
    row = sampled.loc[sampled["scores"].map(len).idxmax()]
    ids = predictions.set_index("example_id").at[row.example_id, "input_ids"]
    body, y = np.asarray(ids[1:-1]), int(row.predicted)

    def p_class(sequence) -> float:
        with torch.no_grad():
            logits = classifier.model(input_ids=torch.tensor([sequence])).logits
        return float(torch.softmax(logits.float(), -1)[0, y])

    order = np.argsort(-np.asarray(row.scores), kind="stable")
    k_values = [max(1, int(np.floor(f * len(body) + 0.5))) for f in (0.2, 0.5)]
    removed = [[ids[0], *np.delete(body, order[:k]).tolist(), ids[-1]] for k in k_values]
    expected = np.mean([p_class(ids) - p_class(sequence) for sequence in removed])
    got = faithful.set_index(["method", "example_id"]).at[("occlusion", row.example_id), "comprehensiveness"]
    # The tiny model's probabilities move by ~1e-5: the tolerance is float32's resolution near 0.5.
    assert got == pytest.approx(expected, abs=1e-7)
    # An expensive method that is no baseline is refused when the settings are parsed, before any work.
    with pytest.raises(ValueError, match="crosstask.expensive names methods that are not in crosstask.baselines"):
        scoring_settings({**CROSSTASK, "expensive": ["lime"]}, layer=-1, seed=0)


def test_the_baselines_of_one_pass_share_it_and_each_is_costed_alone_on_the_sample(rationale_set):
    classifier, predictions, _, _ = rationale_set
    pass_methods = ["raw_attention", "saliency", "gae", "afn_norm"]
    settings = {**CROSSTASK, "baselines": {**dict.fromkeys(pass_methods, {}), "occlusion": {"batch_size": 8}}}
    scores, failures, cost = explain_rationale_set(classifier, predictions, {},
                                                   scoring_settings(settings, layer=-1, seed=0), COMPUTE)
    assert failures.empty
    assert scores.groupby("method")["example_id"].nunique().to_dict() == {**dict.fromkeys(pass_methods, 4),
                                                                         "occlusion": 2}
    cost = cost.set_index("method")
    # Every method's seconds cover the seeded sample of 2, and its ratio is to a forward pass over the same 2.
    assert (cost.loc[[*pass_methods, "occlusion"], "n_examples"] == 2).all()
    assert cost.at["forward", "n_examples"] == 2 and cost.at["forward", "ratio_to_forward"] == pytest.approx(1.0)
    # The shared pass gives each method the scores it gives alone.
    alone, _, _ = explain_rationale_set(classifier, predictions, {}, scoring_settings(
        {**CROSSTASK, "baselines": {"saliency": {}, "occlusion": {"batch_size": 8}}}, layer=-1, seed=0), COMPUTE)
    together = scores[scores["method"] == "saliency"].set_index("example_id")["scores"]
    for row in alone[alone["method"] == "saliency"].itertuples():
        np.testing.assert_allclose(together[row.example_id], row.scores, rtol=1e-5, atol=1e-7)


def test_the_learned_explainers_scored_from_the_signal_rows_give_their_own_explanations(rationale_set):
    """The fold scores ExpNet+ and the paper's ExpNet from the classifiers pipeline's signal rows (one pass per text
    for every consumer): the scores they give explaining each batch themselves, and a cost row timed alone."""
    classifier, predictions, paper, plus = rationale_set
    learned = {"expnet_plus": plus, "expnet_paper": paper}
    settings = replace(SCORING, baselines={}, expensive=())
    signals = pd.concat(signal_rows(classifier.model, classifier.tokenizer, predictions, list(FEATURE_SETS),
                                    layer=-1, batch_size=3), ignore_index=True)
    live, _, _ = explain_rationale_set(classifier, predictions, learned, settings, COMPUTE)
    read, failures, cost = explain_rationale_set(classifier, predictions, learned, settings, COMPUTE, signals=signals)
    assert failures.empty and len(read) == len(live) == 2 * 4
    by_key = read.set_index(["method", "example_id"])["scores"]
    for row in live.itertuples():
        np.testing.assert_allclose(by_key[(row.method, row.example_id)], row.scores, rtol=1e-5, atol=1e-6)
    assert (cost.set_index("method").loc[list(learned), "n_examples"] == 2).all()  # timed alone on the sample
    with pytest.raises(ValueError, match="have no signal rows"):
        explain_rationale_set(classifier, predictions, learned, settings, COMPUTE,
                              signals=signals[signals["example_id"] != predictions["example_id"].iloc[0]])


def test_scoring_known_answers(rationale_set):
    classifier, predictions, paper, plus = rationale_set
    gold = {r.example_id: np.asarray(r.token_labels)[1:-1] for r in predictions.itertuples()}
    rows = [{"example_id": i, "method": "oracle", "family": "gradient", "scores": (g + 0.01 * np.arange(len(g))).tolist(),
             "in_sample": i in ("x0", "x1"), "predicted": p, "correct": c}
            for (i, g), p, c in zip(gold.items(), predictions["predicted"], predictions["correct"])]
    rows += [{**r, "method": "inverse", "scores": [-s for s in r["scores"]]} for r in rows]
    token_scores = pd.DataFrame(rows)
    faithful = pd.DataFrame({"method": ["oracle", "inverse"], "example_id": ["x0", "x0"],
                             "comprehensiveness": [0.3, -0.1], "sufficiency": [0.1, 0.2]})
    thresholds = {"expnet_paper": {"own": 0.5, "own_calibrated": 0.4},
                  "expnet_plus": {"own": 0.5, "own_calibrated": 0.6}}
    metrics = score_rationale_set(token_scores, predictions, faithful, 0.5, thresholds, SCORING, fold="f",
                                  held_out_task="t").set_index(["method", "rule", "subset"])
    assert metrics.at[("oracle", "matched", "all"), "auroc"] == 1.0
    assert metrics.at[("inverse", "matched", "all"), "auroc"] == 0.0
    assert metrics.at[("oracle", "matched", "correct"), "n_examples"] == 2
    n_all = metrics.at[("oracle", "matched", "all"), "n_examples"]
    assert metrics.at[("oracle", "matched", "incorrect"), "n_examples"] == n_all - 2
    assert metrics.at[("inverse", "matched", "incorrect"), "auroc"] == 0.0
    assert metrics.at[("oracle", "matched", "sample"), "comprehensiveness"] == 0.3
    assert {"all_tokens", "random"} <= set(metrics.index.get_level_values("method"))


def test_pareto_frontier_known_answer():
    # (throughput ratio, AUROC): b dominates c, a dominates d, a and e tie (neither strictly better).
    ratio = [1.0, 0.5, 0.4, 0.9, 1.0]
    auroc = [0.7, 0.8, 0.75, 0.6, 0.7]
    assert pareto_frontier(ratio, auroc).tolist() == [True, True, False, False, True]


def test_cost_plausibility_uses_each_methods_own_examples_and_keeps_sample_only_methods_off_the_frontier():
    def row(method, family, subset, n, auroc):
        return {"method": method, "family": family, "rule": "matched", "subset": subset, "n_examples": n,
                "auroc": auroc, "auroc_low": auroc - 0.02, "auroc_high": auroc + 0.02}

    metrics = pd.DataFrame([row("saliency", "gradient", "all", 100, 0.8), row("raw_attention", "attention", "all", 100, 0.7),
                            row("expnet_plus", "learned", "all", 100, 0.75), row("lime", "perturbation", "all", 40, 0.9),
                            row("lime", "perturbation", "sample", 40, 0.9), row("all_tokens", "floor", "all", 100, 0.5)])
    cost = pd.DataFrame({"method": ["saliency", "raw_attention", "expnet_plus", "lime", "forward"],
                         "ratio_to_forward": [0.4, 0.98, 0.9, 0.003, 1.0]})
    points = cost_plausibility(metrics, cost).set_index("method")
    assert points.loc["lime", "subset"] == "sample" and not points.loc["lime", "pareto"]
    assert points["pareto"].to_dict() == {"saliency": True, "raw_attention": True, "expnet_plus": True, "lime": False}
    assert "forward" not in points.index


def test_every_expnet_plus_variant_joins_the_cost_chart_off_the_frontier(rationale_set):
    from learned_attribution.services.evaluation.ablation import variant_cost

    classifier, predictions, _, plus = rationale_set
    costs = variant_cost(classifier, predictions, {"gated": plus, "again": plus}, SCORING, n_examples=3,
                         compute=COMPUTE)
    assert costs["variant"].tolist() == ["gated", "again"] and (costs["n_examples"] == 3).all()
    assert (costs["ratio_to_forward"] > 0).all() and (costs["examples_per_second"] > 0).all()
    metrics = pd.DataFrame([{"method": "saliency", "family": "gradient", "rule": "matched", "subset": "all",
                             "n_examples": 4, "auroc": 0.6, "auroc_low": 0.5, "auroc_high": 0.7}])
    ablation = pd.DataFrame([{"variant": "gated", "auroc": 0.9, "auroc_low": 0.8, "auroc_high": 0.95},
                             {"variant": "saliency (best baseline)", "auroc": 0.6, "auroc_low": 0.5, "auroc_high": 0.7}])
    points = cost_plausibility(metrics, pd.DataFrame({"method": ["saliency"], "ratio_to_forward": [0.5]}), ablation,
                               costs).set_index("method")
    assert list(points.index) == ["saliency", "ExpNet+ gated"]  # reference rows of the ablation have no cost
    assert points.loc["ExpNet+ gated", "family"] == "expnet_plus variant" and not points.loc["ExpNet+ gated", "pareto"]
    assert points.loc["saliency", "pareto"]  # the frontier is the methods' own


def test_a_text_in_several_roles_is_classified_once_with_one_prediction_for_all(tiny_models_dir, monkeypatch):
    from learned_attribution.services import classifiers
    from learned_attribution.services.config import classifier_settings

    classifier = load_classifier(tiny_models_dir / "classifier_sst2")
    texts = {"classifier_test": ["a great film", "so boring"], "rationale_test": ["a great film", "fun story"],
             "rationale_train": ["so boring"]}
    tokenized = pd.DataFrame([{"example_id": f"{role}{i}", "task": "sst2", "role": role, "label": i % 2,
                               "input_ids": classifier.tokenizer(text)["input_ids"], "token_labels": None}
                              for role, rows in texts.items() for i, text in enumerate(rows)])
    classified = []  # a spy: the real predict_proba runs, the number of texts it gets is recorded
    real = classifiers.predict_proba
    monkeypatch.setattr(classifiers, "predict_proba",
                        lambda model, ids, *args: classified.append(len(ids)) or real(model, ids, *args))
    settings = classifier_settings({"epochs": 1, "learning_rate": 1e-4, "batch_size": 2, "weight_decay": 0.0,
                                    "warmup_fraction": 0.0, "decay_epochs": None, "class_weighting": False,
                                    "freeze_word_embeddings": False,
                                    "selection_metric": "accuracy", "max_train_examples": None,
                                    "max_val_examples": None, "eval_batch_size": 2}, 0, COMPUTE, "classifiers.sst2")
    rows, metrics = classifiers.predict_roles(classifier, tokenized, settings, COMPUTE)
    assert classified == [3]  # three distinct texts among five rows
    by_text = rows.assign(text=rows["input_ids"].map(tuple)).groupby("text")["probability"].nunique()
    assert (by_text == 1).all()
    assert metrics.set_index("eval_set")["n"].to_dict() == {"test": 2, "rationale_test": 2, "rationale_train": 1}


def test_every_methods_faithfulness_in_one_call_is_what_each_gets_alone(rationale_set):
    """The methods' removals are scored in one call (a sequence two methods produce runs once): each method's rows
    are those of `faithfulness` on its own examples."""
    from learned_attribution.core.models.faithfulness import faithfulness
    from learned_attribution.services.evaluation.faithfulness import Scored, faithfulness_rows

    classifier, predictions, _, _ = rationale_set
    ids = [list(i) for i in predictions["input_ids"]]
    rng = np.random.default_rng(0)
    methods = {name: Scored(list(predictions["example_id"]), ids, [rng.normal(size=len(i) - 2) for i in ids],
                            list(predictions["predicted"])) for name in ("a", "b")}
    methods["b"] = methods["b"]._replace(scores=[-s for s in methods["a"].scores])
    rows = faithfulness_rows(classifier, methods, (0.2, 0.5), batch_size=3)
    assert list(rows["method"]) == ["a"] * 4 + ["b"] * 4
    for name, scored_rows in methods.items():
        alone = faithfulness(classifier.model, scored_rows.input_ids, scored_rows.scores, scored_rows.target,
                             (0.2, 0.5), batch_size=3, pad_token_id=classifier.tokenizer.pad_token_id)
        mine = rows[rows["method"] == name].drop(columns=["method", "example_id"]).reset_index(drop=True)
        pd.testing.assert_frame_equal(mine, alone, rtol=1e-5, atol=1e-6)
