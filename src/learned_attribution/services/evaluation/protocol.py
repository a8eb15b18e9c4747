"""The scoring protocol (SPEC §8-9), one for every rationale set: which examples are scored, every method explained on
them (the expensive ones on a seeded sample, on Dask where configured), and one metric schema (`METRIC_COLUMNS`:
per method, rule, mode and subset, with bootstrap 95% intervals and the floors), in both modes of
`core/data/modes.py` (`explain_gold_mode` recomputes what gold mode changes). The folds, evaluate_external, transfer,
the ExpNet+ ablation and the students' plausibility all score through `score_methods`; a learned explainer scored
from stored signal rows: `learned_scores.py`."""
from __future__ import annotations

import logging
from contextlib import nullcontext
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from learned_attribution.core.data.classes import NO_CLASS
from learned_attribution.core.data.modes import EXPLAINED, PREDICTED, check_mode, recomputed, with_explained
from learned_attribution.core.explainers.apply import FAILURE_COLUMNS, ExplainRun, explain_examples, resolve_method
from learned_attribution.core.metrics.registry import EXAMPLE_METRICS
from learned_attribution.core.metrics.plausibility import (MethodScores, all_tokens_masks, bootstrap_ci, budget_k,
                                                           evaluate, evaluate_subsets,
                                                           finite_scores, random_scores, threshold_mask, top_k_mask)
from learned_attribution.core.models.learned import LearnedModel, score_examples
from learned_attribution.core.models.projection import has_rationale_token
from learned_attribution.core.models.signals import token_vocabulary
from learned_attribution.core.explainers.learned import EXPNET_PLUS, PAPER_EXPNET

from ..config import ComputeSettings, ScoringSettings
from ..distributed import dask_client, explain_on_dask
from .cost import FORWARD, Timed, cost_table, timed_forward
from .faithfulness import faithfulness_rows, scored

logger = logging.getLogger(__name__)

METRIC_COLUMNS = ["fold", "held_out_task", "method", "family", "rule", "mode", "subset", "n_examples", "f1", "precision",
                  "recall", "f1_micro", "auroc", "auroc_pooled", "auprc", "f1_low", "f1_high", "auroc_low",
                  "auroc_high", "auprc_low", "auprc_high", "classifier_accuracy", "n_auroc_undefined",
                  "n_constant_scores", "n_nonfinite_scores", "comprehensiveness", "sufficiency"]
NOT_BASELINES = ("floor", "learned", "amortized")


def metric_columns() -> list[str]:
    """`METRIC_COLUMNS` and, after them, each metric registered beside the built-in ones
    (`core/metrics/registry.py`) with its interval."""
    return METRIC_COLUMNS + [f"{name}{end}" for name in EXAMPLE_METRICS if name not in METRIC_COLUMNS
                             for end in ("", "_low", "_high")]  # the families `matched_baselines` leaves out


def rationale_test_examples(predictions: pd.DataFrame, role: str = "rationale_test", max_examples: int | None = None,
                            seed: int = 0) -> pd.DataFrame:
    """Rationale examples with at least one positive token (SPEC §1); a seeded sample if capped."""
    rows = predictions[predictions["role"] == role]
    rows = rows[has_rationale_token(rows)]
    if max_examples and len(rows) > max_examples:
        rows = rows.sample(n=max_examples, random_state=seed).sort_index()
    return rows.reset_index(drop=True)


def scored_examples(predictions: pd.DataFrame, scoring: ScoringSettings) -> pd.DataFrame:
    """The rationale test examples a scoring protocol reads (its cap and seed)."""
    return rationale_test_examples(predictions, max_examples=scoring.max_test_examples, seed=scoring.seed)


def expensive_sample(examples: pd.DataFrame, size: int | None, seed: int) -> list[str]:
    """Seeded subset of the held-out examples on which the expensive methods (and faithfulness) run."""
    ids = examples["example_id"]
    if size is None or size >= len(ids):
        return ids.tolist()
    return ids.sample(n=size, random_state=seed).tolist()


def gold_labels(token_labels: Sequence[int]) -> np.ndarray:
    """0/1 labels over non-special tokens (special tokens carry -100 and are dropped)."""
    labels = np.asarray(token_labels)
    return labels[labels != -100].astype(int)


def method_masks(scores: list[np.ndarray], rho: float, threshold: float | None = None) -> list[np.ndarray]:
    """Masks under a rule: with a `threshold`, a learned explainer's own rule (with the one-token
    fallback); without, top-k with k = round(rho * n) (the matched budget, and score methods' own rule)."""
    if threshold is not None:
        return [threshold_mask(s, threshold) for s in scores]
    return [top_k_mask(finite_scores(s), budget_k(len(s), rho)) for s in scores]


def score_method(scores: list[np.ndarray], gold: list[np.ndarray], masks: list[np.ndarray], n_boot: int,
                 seed: int) -> dict[str, Any]:
    """Summary numbers of one method with bootstrap 95% intervals over examples."""
    return _with_intervals(evaluate(scores, gold, masks), n_boot, seed)


def _with_intervals(result: MethodScores, n_boot: int, seed: int) -> dict[str, Any]:
    row = result.summary()
    for metric in ("f1", "auroc", *EXAMPLE_METRICS):
        row[f"{metric}_low"], row[f"{metric}_high"] = bootstrap_ci(result.per_example[metric].to_numpy(), n_boot, seed)
    return row


def method_rows(scores: list[np.ndarray], gold: list[np.ndarray], rho: float, rules: Mapping[str, float | None],
                n_boot: int, seed: int) -> dict[str, dict[str, Any]]:
    """One method's metrics under each rule (rule name -> threshold; None: top-k at the budget rho), each with
    bootstrap 95% intervals over examples."""
    return {rule: rows["all"] for rule, rows in
            subset_rows(scores, gold, rho, rules, n_boot, seed, {"all": range(len(gold))}).items()}


def subset_rows(scores: list[np.ndarray], gold: list[np.ndarray], rho: float, rules: Mapping[str, float | None],
                n_boot: int, seed: int, subsets: Mapping[str, Sequence[int]]) -> dict[str, dict[str, dict[str, Any]]]:
    """`method_rows` on each subset of the examples (name -> positions; an empty one is left out), each example's
    metrics computed once per rule: rule -> subset -> row."""
    return {rule: {subset: _with_intervals(result, n_boot, seed) for subset, result in
                   evaluate_subsets(scores, gold, method_masks(scores, rho, threshold), subsets).items()}
            for rule, threshold in rules.items()}


def score_methods(token_scores: pd.DataFrame, examples: pd.DataFrame, rho: float,
                  thresholds: Mapping[str, Mapping[str, float]], fold: str, held_out_task: str, n_boot: int,
                  seed: int, sample_ids: Sequence[str] | None = None, mode: str = PREDICTED) -> pd.DataFrame:
    """The metrics table (`METRIC_COLUMNS`) of one rationale set in one `mode` (`core/data/modes.py`: the token
    scores explain each example's predicted or gold class): every method x rule x subset, plus the floors.

    Subsets: `all` rationale examples, the `correct`ly predicted ones and the `incorrect`ly predicted ones (whose
    explanations are of the wrong class: signed signals flip there), and, when `sample_ids` is given,
    the seeded `sample` on which the expensive methods ran (every method is scored there too, so
    that comparisons with them are like for like). A method is scored on the examples of the subset
    it explained; `n_examples` says how many.
    `thresholds` maps each learned explainer to its own rules: rule name (e.g. "own" -> 0.5,
    "own_calibrated" -> its validation-calibrated threshold) -> threshold. Other methods' own rule is top-k.
    """
    examples = examples.set_index("example_id")
    correct = examples["correct"].to_numpy(bool)
    # An example whose file gives no class is neither correct nor mispredicted: in `all` (and the sample) only.
    known = examples["label"].astype(int).to_numpy() != NO_CLASS if "label" in examples else np.ones_like(correct)
    subsets = {"all": examples.index, "correct": examples.index[correct & known],
               "incorrect": examples.index[~correct & known]}
    if sample_ids is not None:
        subsets["sample"] = pd.Index(list(sample_ids))
    right = examples["correct"].astype(float).where(known)  # NaN where there is no class: left out of the mean

    def accuracy(ids) -> float:
        return float(right.loc[ids].mean())
    gold_of = {i: gold_labels(labels) for i, labels in examples["token_labels"].items()}
    subsets = {name: ids for name, ids in subsets.items() if len(ids)}
    base = {name: {"fold": fold, "held_out_task": held_out_task, "mode": check_mode(mode), "subset": name}
            for name in subsets}
    rows: dict[str, list[dict]] = {name: [] for name in subsets}  # subset by subset, each with its floors first
    for subset, ids in subsets.items():
        lengths = [len(gold_of[i]) for i in ids]
        gold = [gold_of[i] for i in ids]
        randoms = random_scores(lengths, seed)
        floors = {"all_tokens": ([np.ones(n) for n in lengths], all_tokens_masks(gold)),
                  "random": (randoms, [top_k_mask(s, budget_k(len(s), rho)) for s in randoms])}
        for method, (scores, masks) in floors.items():
            rows[subset].append({**base[subset], "classifier_accuracy": accuracy(ids), "method": method,
                                 "family": "floor", "rule": "own", **score_method(scores, gold, masks, n_boot, seed)})
    for method, group in token_scores.groupby("method", sort=False):
        scores_of = dict(zip(group["example_id"], group["scores"]))
        present = [i for i in subsets["all"] if i in scores_of] if "all" in subsets else []
        position = {i: n for n, i in enumerate(present)}
        method_subsets = {name: [position[i] for i in ids if i in position] for name, ids in subsets.items()}
        if not present:
            continue
        scores = [np.asarray(scores_of[i], dtype=float) for i in present]
        rules = {"matched": None, **thresholds.get(method, {"own": None})}
        by_rule = subset_rows(scores, [gold_of[i] for i in present], rho, rules, n_boot, seed, method_subsets)
        for subset in subsets:
            for rule in rules:
                if subset in by_rule[rule]:
                    ids = [present[n] for n in method_subsets[subset]]
                    rows[subset].append({**base[subset], "classifier_accuracy": accuracy(ids), "method": method,
                                         "family": group["family"].iloc[0], "rule": rule, **by_rule[rule][subset]})
    return pd.DataFrame([row for subset in subsets for row in rows[subset]]).reindex(columns=metric_columns())


def mode_rows(metrics: pd.DataFrame, mode: str = PREDICTED) -> pd.DataFrame:
    """The rows of a metrics table in `mode` (a table without a `mode` column, written before modes, is predicted
    mode's)."""
    check_mode(mode)
    if "mode" not in metrics:
        return metrics if mode == PREDICTED else metrics.iloc[:0]
    return metrics[metrics["mode"].fillna(PREDICTED) == mode]


def matched_baselines(metrics: pd.DataFrame) -> pd.DataFrame:
    """The baselines' matched-budget rows on all examples, restricted to methods that explained every
    example (the expensive methods ran on a sample only, and a sample's AUROC is not comparable); the learned
    explainers and an amortized student are no baselines."""
    rows = metrics[(metrics["subset"] == "all") & (metrics["rule"] == "matched")
                   & ~metrics["family"].isin(NOT_BASELINES)]
    return rows[rows["n_examples"] == rows["n_examples"].max()]


def best_baseline(metrics: pd.DataFrame) -> str | None:
    """The baseline with the highest AUROC among `matched_baselines` (None when there is none)."""
    baselines = matched_baselines(metrics)
    return baselines.sort_values("auroc", ascending=False)["method"].iloc[0] if len(baselines) else None


# ----------------------------------------------------------------------------------------------------
# A rationale test set: explain, faithfulness, score
# ----------------------------------------------------------------------------------------------------

def scores_from_signals(classifier, examples: pd.DataFrame, learned: Mapping[str, LearnedModel],
                        signals: pd.DataFrame, timing: pd.DataFrame | None, layer: int, batch_size: int) -> ExplainRun:
    """The `learned` explainers' token scores on `examples` read from their signal rows (`signals`: the classifiers
    pipeline's, computed in one pass per text for every consumer), with no pass of the classifier. Each method is
    then timed alone on the `timing` examples (when given), its own signal pass included (its cost as a user running
    it pays it)."""
    wanted = signals[signals["example_id"].isin(set(examples["example_id"]))]
    missing = set(examples["example_id"]) - set(wanted["example_id"])
    if missing:
        raise ValueError(f"{len(missing)} scored examples have no signal rows (e.g. {sorted(missing)[:3]}): the "
                         "signals were extracted from other predictions; rerun the classifiers pipeline")
    rows, seconds, timed = [], {}, {}
    vocabulary = token_vocabulary(classifier.tokenizer)
    for name, model in learned.items():
        method = resolve_method(name, learned=dict(learned), layer=layer, vocabulary=vocabulary)
        scored_rows = score_examples(model, wanted)
        rows.append(pd.DataFrame({"example_id": scored_rows["example_id"], "method": name, "family": method.family,
                                  "scores": [scores.tolist() for scores in scored_rows["scores"]],
                                  "model_calls": 1}))
        if timing is not None:
            alone = explain_examples(classifier.model, classifier.tokenizer, timing, {name: method}, batch_size)
            seconds[name], timed[name] = alone.seconds[name], len(timing)
    return ExplainRun(pd.concat(rows, ignore_index=True), pd.DataFrame(columns=FAILURE_COLUMNS), seconds, timed)


def explain_rationale_set(classifier, predictions: pd.DataFrame, learned: Mapping[str, LearnedModel],
                          scoring: ScoringSettings, compute: ComputeSettings, signals: pd.DataFrame | None = None
                          ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The `learned` explainers (name -> model: a fold's `expnet_plus` and `expnet_paper`) and every baseline of
    the protocol on the rationale test examples of `predictions`, explaining `classifier` on the `compute` device,
    each example for its predicted class (predicted mode; `explain_gold_mode` adds the other).
    The expensive methods run on the seeded sample only (all examples when its size is null); with a Dask cluster
    (`compute.dask`), its methods (default: the expensive ones) run as Dask tasks (`services/distributed.py`). The
    baselines that read one pass of the classifier share it (`explainers.passes`); each of them is timed alone on the
    seeded sample, beside a plain forward pass over the same sample. With `signals` (the classifiers pipeline's signal
    rows of these examples), the learned explainers that read only signal columns are scored from them
    (`scores_from_signals`) instead of a pass of their own.
    Returns the token scores (one row per example and method, with gold labels and the `in_sample` flag), the
    failures and the cost table (examples per second, and where they ran)."""
    examples = scored_examples(predictions, scoring)
    sample = set(expensive_sample(examples, scoring.expensive_sample_size, scoring.seed))
    sampled = examples[examples["example_id"].isin(sample)]
    runs, where = _explain_runs(classifier, examples, sampled, learned, list(scoring.baselines), scoring, compute,
                                signals, timing=True)
    scores = _with_gold(pd.concat([r.scores for r in runs], ignore_index=True), examples, sample)
    n_explained = scores.groupby("method")["example_id"].nunique()
    timed = [Timed(m, r.timed.get(m, int(n_explained.get(m, 0))), s, where[m]) for r in runs
             for m, s in r.seconds.items()]
    # The forward pass timed over the examples each method's seconds cover (all of them, or the sample).
    counts = {t.n_examples for t in timed} & {len(examples), len(sampled)} or {len(examples)}
    forward = {n: timed_forward(classifier, examples if n == len(examples) else sampled, scoring.batch_size)
               for n in sorted(counts)}
    largest = max(forward)
    cost = cost_table(timed + [Timed(FORWARD, largest, forward[largest], f"in process ({compute.device})")], forward)
    failures = pd.concat([r.failures for r in runs], ignore_index=True)
    return scores, failures, cost


def explain_gold_mode(classifier, predictions: pd.DataFrame, learned: Mapping[str, LearnedModel],
                      scoring: ScoringSettings, compute: ComputeSettings, token_scores: pd.DataFrame,
                      gold_signals: pd.DataFrame | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Gold mode's token scores from predicted mode's (`token_scores`, `explain_rationale_set`'s): the mispredicted
    examples explained again for their gold class (`modes.recomputed`) by every method that can depend on the class,
    each on the examples it explained in predicted mode (an expensive method: the sample's); every correct example's
    rows, and a class-agnostic method's (raw attention, rollout, AFN's norms, the paper's ExpNet), are predicted
    mode's. The learned explainers read `gold_signals` (the classifiers pipeline's gold-class signal rows). Returns
    the scores (every row with its `explained` class) and the failures."""
    examples = scored_examples(predictions, scoring)
    wrong = recomputed(examples)
    sample = set(token_scores.loc[token_scores["in_sample"], "example_id"])
    vocabulary = token_vocabulary(classifier.tokenizer)
    names = list(dict.fromkeys(token_scores["method"]))
    aware = [name for name in names if not resolve_method(name, learned=dict(learned), layer=scoring.layer,
                                                          vocabulary=vocabulary,
                                                          settings=scoring.baselines.get(name)).class_agnostic]
    runs: list[ExplainRun] = []
    if len(wrong) and aware:
        sampled = wrong[wrong["example_id"].isin(sample)]
        runs, _ = _explain_runs(classifier, wrong, sampled, {n: m for n, m in learned.items() if n in aware},
                                [n for n in aware if n in scoring.baselines], scoring, compute, gold_signals,
                                timing=False)
    ids = set(wrong["example_id"])
    predicted = with_explained(token_scores)
    kept = predicted[~(predicted["method"].isin(aware) & predicted["example_id"].isin(ids))]
    kept = kept.assign(**{EXPLAINED: np.where(kept["example_id"].isin(ids), kept["label"], kept[EXPLAINED])})
    redone = [_with_gold(r.scores, wrong, sample) for r in runs if len(r.scores)]
    scores = pd.concat([kept, *redone], ignore_index=True)
    logger.info("gold mode: %d of %d examples explained again for their gold class by %d class-aware methods (%s)",
                len(wrong), len(examples), len(aware), ", ".join(aware))
    failures = pd.concat([r.failures for r in runs], ignore_index=True) if runs else \
        pd.DataFrame(columns=FAILURE_COLUMNS)
    return scores, failures


def _with_gold(scores: pd.DataFrame, examples: pd.DataFrame, sample: set) -> pd.DataFrame:
    """Score rows with each example's label, predicted and explained class, correctness, gold token labels and the
    `in_sample` flag."""
    columns = ["example_id", "label", "predicted", "correct", "token_labels"]
    gold = with_explained(examples[columns + [c for c in (EXPLAINED,) if c in examples]])
    gold["gold"] = gold["token_labels"].map(lambda labels: gold_labels(labels).tolist())
    gold["in_sample"] = gold["example_id"].isin(sample)
    return scores.merge(gold.drop(columns="token_labels"), on="example_id")


def _explain_runs(classifier, examples: pd.DataFrame, sampled: pd.DataFrame, learned: Mapping[str, LearnedModel],
                  baselines: Sequence[str], scoring: ScoringSettings, compute: ComputeSettings,
                  signals: pd.DataFrame | None, timing: bool) -> tuple[list[ExplainRun], dict[str, str]]:
    """The explanation runs of `learned` and `baselines` (names among the protocol's) on `examples` (the expensive
    ones on `sampled`), each example for its explained class, and where each method ran; with `timing`, every method
    is also timed alone on `sampled`."""
    compute.place(classifier.model)
    dask = compute.dask
    remote = [] if dask is None else [n for n in (dask.methods if dask.methods is not None else scoring.expensive)
                                      if n in baselines]
    vocabulary = token_vocabulary(classifier.tokenizer)
    names = [n for n in [*learned, *baselines] if n not in remote]
    methods = {name: resolve_method(name, learned=dict(learned), layer=scoring.layer, vocabulary=vocabulary,
                                    settings=scoring.baselines.get(name)) for name in names}
    where: dict[str, str] = {}
    runs: list[ExplainRun] = []
    from_signals = {} if signals is None else {
        name: model for name, model in learned.items()
        if not model.reads_token_ids and set(model.columns) <= set(signals.columns)}
    if from_signals:
        runs.append(scores_from_signals(classifier, examples, from_signals, signals, sampled if timing else None,
                                        scoring.layer, scoring.batch_size))
        where.update(dict.fromkeys(from_signals, f"in process ({compute.device})"))
        methods = {name: method for name, method in methods.items() if name not in from_signals}
    with dask_client(dask) if remote else nullcontext() as client:  # one cluster for the node
        for subset, rows in (("all", examples), ("sample", sampled)):
            local = {n: m for n, m in methods.items() if (n in scoring.expensive) == (subset == "sample")}
            if local and len(rows):
                # The pass methods share one pass per batch; with `timing` each is then timed alone on the sample.
                runs.append(explain_examples(classifier.model, classifier.tokenizer, rows, local, scoring.batch_size,
                                             timing=(sampled if timing else sampled.iloc[:0]) if subset == "all"
                                             else None))
                where.update(dict.fromkeys(local, f"in process ({compute.device})"))
            distributed = {n: scoring.baselines[n] for n in remote if (n in scoring.expensive) == (subset == "sample")}
            if distributed and len(rows):
                runs.append(explain_on_dask(client, classifier, rows, distributed, scoring.batch_size, dask))
                where.update(dict.fromkeys(distributed, dask.describe()))
    return runs, where


def combined_explanations(*parts: tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]
                          ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The (token scores, failures, cost table) of several `explain_rationale_set` calls on the same examples as one:
    scores and failures stacked; each method's cost row as its own call timed it (its ratio against the forward pass
    timed beside it), with the first call's forward-pass row."""
    scores = pd.concat([p[0] for p in parts], ignore_index=True)
    failures = pd.concat([p[1] for p in parts], ignore_index=True)
    costs = [p[2] for p in parts]
    cost = pd.concat([costs[0][costs[0]["method"] != FORWARD], *(c[c["method"] != FORWARD] for c in costs[1:]),
                      costs[0][costs[0]["method"] == FORWARD]], ignore_index=True)
    return scores, failures, cost


def sample_faithfulness(classifier, token_scores: pd.DataFrame, predictions: pd.DataFrame,
                        scoring: ScoringSettings, compute: ComputeSettings) -> pd.DataFrame:
    """ERASER comprehensiveness and sufficiency (AOPC) of every method on the examples flagged `in_sample`, on the
    `compute` device, or as Dask tasks with a Dask cluster."""
    compute.place(classifier.model)
    sampled = token_scores[token_scores["in_sample"]]
    input_ids = predictions.drop_duplicates("example_id").set_index("example_id")["input_ids"]
    methods = {method: scored(rows, input_ids) for method, rows in sampled.groupby("method", sort=False)}
    return faithfulness_rows(classifier, methods, scoring.faithfulness_fractions, scoring.faithfulness_batch_size,
                             compute.dask)


def score_rationale_set(token_scores: pd.DataFrame, predictions: pd.DataFrame, faithfulness: pd.DataFrame | None,
                        rho: float, thresholds: Mapping[str, Mapping[str, float]], scoring: ScoringSettings, *,
                        fold: str, held_out_task: str, mode: str = PREDICTED) -> pd.DataFrame:
    """Plausibility of every method under its own rule (`thresholds`: each learned explainer's) and the matched
    budget `rho`, in `mode`, on all examples, the correctly and incorrectly predicted ones and the expensive methods'
    sample, with the two floors and bootstrap 95% intervals; faithfulness (AOPC, of the predicted class: what the
    model did) beside the sample rows when given."""
    examples = scored_examples(predictions, scoring)
    sample_ids = token_scores.loc[token_scores["in_sample"], "example_id"].unique()
    metrics = score_methods(token_scores, examples, rho, thresholds, fold, held_out_task, scoring.n_boot,
                            scoring.boot_seed, sample_ids=sample_ids, mode=mode)
    if faithfulness is not None:
        aopc = faithfulness.groupby("method")[["comprehensiveness", "sufficiency"]].mean().reset_index()
        aopc["subset"] = "sample"
        metrics = (metrics.drop(columns=["comprehensiveness", "sufficiency"])
                   .merge(aopc, on=["method", "subset"], how="left").reindex(columns=metric_columns()))
    headline = metrics[(metrics["subset"] == "all") & (metrics["rule"].isin(["matched", "own"]))]
    logger.info("%s, %s mode:\n%s", fold, mode, headline[["method", "rule", "n_examples", "f1", "auroc", "auprc"]]
                .round(3).to_string(index=False))
    return metrics


def learned_thresholds(budget: Mapping[str, float], expnet_plus: LearnedModel) -> dict[str, dict[str, float]]:
    """A fold's learned explainers' own rules: the fixed threshold and each one's calibrated threshold."""
    return {PAPER_EXPNET: {"own": budget["threshold"], "own_calibrated": budget["calibrated_threshold"]},
            EXPNET_PLUS: {"own": budget["threshold"], "own_calibrated": expnet_plus.calibrated_threshold}}
