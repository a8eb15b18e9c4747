"""Running explainers over a rationale set and scoring them (SPEC §8-9), independent of Kedro."""
from __future__ import annotations

import logging
import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from learned_attribution.core.explainers import Batch, Explainer, build_explainer
from learned_attribution.core.explainers.base import make_batch as batch_from_ids
from learned_attribution.core.metrics.plausibility import (MethodScores, all_tokens_masks, bootstrap_ci, budget_k, evaluate,
                                                      finite_scores, random_scores, threshold_mask, top_k_mask)
from learned_attribution.core.models.architectures import mask_token_id
from learned_attribution.core.models.features import frame_token_ids
from learned_attribution.core.models.runner import Compute, eval_mode, iter_batches, model_device
from learned_attribution.core.models.signals import TokenVocabulary, token_vocabulary

logger = logging.getLogger(__name__)

METRIC_COLUMNS = ["fold", "held_out_task", "method", "family", "rule", "subset", "n_examples", "f1", "precision",
                  "recall", "f1_micro", "auroc", "auroc_pooled", "auprc", "f1_low", "f1_high", "auroc_low",
                  "auroc_high", "auprc_low", "auprc_high", "classifier_accuracy", "n_auroc_undefined",
                  "n_constant_scores", "n_nonfinite_scores", "comprehensiveness", "sufficiency"]


def rationale_test_examples(predictions: pd.DataFrame, role: str = "rationale_test", max_examples: int | None = None,
                            seed: int = 0) -> pd.DataFrame:
    """Rationale examples with at least one positive token (SPEC §1); a seeded sample if capped."""
    rows = predictions[predictions["role"] == role]
    has_rationale = rows["token_labels"].map(lambda labels: labels is not None and int((np.asarray(labels) == 1).sum()) > 0)
    rows = rows[has_rationale]
    if max_examples and len(rows) > max_examples:
        rows = rows.sample(n=max_examples, random_state=seed).sort_index()
    return rows.reset_index(drop=True)


def make_batch(input_ids: Sequence[Sequence[int]], target: Sequence[int], tokenizer) -> Batch:
    """A padded explainer batch for token id lists, with the tokenizer's special ids (a "removed" token becomes its
    mask token, else its pad: `architectures.mask_token_id`)."""
    return batch_from_ids(input_ids, target, pad_token_id=tokenizer.pad_token_id,
                          mask_token_id=mask_token_id(tokenizer), frame_token_ids=frame_token_ids(tokenizer))


@dataclass
class ExplainRun:
    scores: pd.DataFrame  # example_id, method, family, scores (list over non-special tokens), model_calls
    failures: pd.DataFrame  # method, example_id, error
    seconds: dict[str, float]


def explain_examples(model: torch.nn.Module, tokenizer, examples: pd.DataFrame, explainers: dict[str, Explainer],
                     batch_size: int) -> ExplainRun:
    """Every explainer on every example (scores for the predicted class), in process. A batch that fails is
    retried one example at a time; an example that still fails is recorded with its id and error,
    and the rest continue."""
    rows, failures, seconds = [], [], {}
    batches = list(iter_batches(list(examples["input_ids"]), batch_size))
    for name, explainer in explainers.items():
        started = time.perf_counter()
        method_rows, method_failures = explain_batches(model, tokenizer, examples, batches, explainer, name,
                                                       progress=f"explain {name}")
        rows.extend(method_rows)
        failures.extend(method_failures)
        seconds[name] = time.perf_counter() - started
        logger.info("%s: %d examples in %.1f s", name, len(examples), seconds[name])
    return explain_run(rows, failures, seconds)


def explain_run(rows: list[dict], failures: list[dict], seconds: dict[str, float]) -> ExplainRun:
    """The tables of an explanation run (failures logged)."""
    failure_frame = pd.DataFrame(failures, columns=["method", "example_id", "error"])
    if len(failure_frame):
        logger.warning("%d explanations failed:\n%s", len(failure_frame), failure_frame.to_string(index=False))
    return ExplainRun(pd.DataFrame(rows), failure_frame, seconds)


def explain_batches(model: torch.nn.Module, tokenizer, examples: pd.DataFrame, batches: Sequence[Sequence[int]],
                    explainer: Explainer, name: str, progress: str | None = None) -> tuple[list[dict], list[dict]]:
    """One explainer on the given batches (positional indices into `examples`): score rows in batch order and
    failures (a failing batch is retried one example at a time). In process and on Dask workers alike."""
    rows: list[dict] = []
    failures: list[dict] = []
    for batch_index in tqdm(batches, desc=progress, leave=False, disable=progress is None):
        for chunk in _explain_with_retry(model, tokenizer, examples, list(batch_index), explainer, failures, name):
            rows.extend(chunk)
    return rows, failures


def _explain_with_retry(model, tokenizer, examples, batch_index, explainer, failures, name):
    try:
        yield _explain_rows(model, tokenizer, examples.iloc[batch_index], explainer, name)
        return
    except Exception:  # noqa: BLE001 - any library error on one example must not stop the others
        if len(batch_index) == 1:
            failures.append({"method": name, "example_id": examples.iloc[batch_index[0]]["example_id"],
                             "error": _last_error()})
            return
    for index in batch_index:
        try:
            yield _explain_rows(model, tokenizer, examples.iloc[[index]], explainer, name)
        except Exception:  # noqa: BLE001
            failures.append({"method": name, "example_id": examples.iloc[index]["example_id"], "error": _last_error()})


def _last_error() -> str:
    import sys

    error = sys.exc_info()[1]
    return f"{type(error).__name__}: {error}"


def _explain_rows(model, tokenizer, rows: pd.DataFrame, explainer: Explainer, name: str) -> list[dict]:
    batch = make_batch(list(rows["input_ids"]), rows["predicted"].tolist(), tokenizer).to(model_device(model))
    with eval_mode(model):
        attribution = explainer.explain(model, batch)
    scores = attribution.scores.detach().float().cpu().numpy()
    keep = ~batch.special_mask.cpu().numpy()
    out = []
    for row, (_, record) in enumerate(rows.iterrows()):
        out.append({"example_id": record["example_id"], "method": name, "family": explainer.family,
                    "scores": scores[row][keep[row]].tolist(), "model_calls": attribution.model_calls})
    return out


def gold_labels(token_labels: Sequence[int]) -> np.ndarray:
    """0/1 labels over non-special tokens (special tokens carry -100 and are dropped)."""
    labels = np.asarray(token_labels)
    return labels[labels != -100].astype(int)


def score_method(scores: list[np.ndarray], gold: list[np.ndarray], masks: list[np.ndarray], n_boot: int,
                 seed: int) -> dict[str, Any]:
    """Summary numbers of one method with bootstrap 95% intervals over examples."""
    result: MethodScores = evaluate(scores, gold, masks)
    row = result.summary()
    for metric in ("f1", "auroc", "auprc"):
        row[f"{metric}_low"], row[f"{metric}_high"] = bootstrap_ci(result.per_example[metric].to_numpy(), n_boot, seed)
    return row


def method_masks(scores: list[np.ndarray], rho: float, threshold: float | None = None) -> list[np.ndarray]:
    """Masks under a rule: with a `threshold`, a learned explainer's own rule (with the one-token
    fallback); without, top-k with k = round(rho * n) (the matched budget, and score methods' own rule)."""
    if threshold is not None:
        return [threshold_mask(s, threshold) for s in scores]
    return [top_k_mask(finite_scores(s), budget_k(len(s), rho)) for s in scores]


def score_all(token_scores: pd.DataFrame, examples: pd.DataFrame, rho: float, thresholds: dict[str, dict[str, float]],
              fold: str, held_out_task: str, n_boot: int, seed: int,
              sample_ids: Sequence[str] | None = None) -> pd.DataFrame:
    """The metrics table of one fold: every method x rule x subset, plus the floors.

    Subsets: `all` rationale examples, the `correct`ly predicted ones and the `incorrect`ly predicted ones (whose
    explanations are of the wrong class: signed signals flip there), and, when `sample_ids` is given,
    the seeded `sample` on which the expensive methods ran (every method is scored there too, so
    that comparisons with them are like for like). A method is scored on the examples of the subset
    it explained; `n_examples` says how many.
    `thresholds` maps each learned explainer to its own rules: rule name (e.g. "own" -> 0.5,
    "own_calibrated" -> its validation-calibrated threshold) -> threshold. Other methods' own rule is top-k.
    """
    examples = examples.set_index("example_id")
    rows = []
    correct = examples["correct"].to_numpy(bool)
    subsets = {"all": examples.index, "correct": examples.index[correct], "incorrect": examples.index[~correct]}
    if sample_ids is not None:
        subsets["sample"] = pd.Index(list(sample_ids))
    for subset, ids in subsets.items():
        if len(ids) == 0:
            continue
        gold = [gold_labels(examples.at[i, "token_labels"]) for i in ids]
        accuracy = float(examples.loc[ids, "correct"].mean())
        base = {"fold": fold, "held_out_task": held_out_task, "subset": subset, "classifier_accuracy": accuracy}
        lengths = [len(g) for g in gold]
        floors = {
            ("all_tokens", "own"): ([np.ones(n) for n in lengths], all_tokens_masks(gold)),
            ("random", "own"): None,
        }
        randoms = random_scores(lengths, seed)
        floors[("random", "own")] = (randoms, [top_k_mask(s, budget_k(len(s), rho)) for s in randoms])
        for (method, rule), (scores, masks) in floors.items():
            rows.append({**base, "method": method, "family": "floor", "rule": rule,
                         **score_method(scores, gold, masks, n_boot, seed)})
        for method, group in token_scores.groupby("method", sort=False):
            by_id = group.set_index("example_id")
            present = [i for i in ids if i in by_id.index]
            if not present:
                continue
            scores = [np.asarray(by_id.at[i, "scores"], dtype=float) for i in present]
            method_gold = [gold_labels(examples.at[i, "token_labels"]) for i in present]
            own_rules = thresholds.get(method, {"own": None})
            for rule, threshold in {"matched": None, **own_rules}.items():
                rows.append({**base, "method": method, "family": group["family"].iloc[0], "rule": rule,
                             "classifier_accuracy": float(examples.loc[present, "correct"].mean()),
                             **score_method(scores, method_gold, method_masks(scores, rho, threshold), n_boot, seed)})
    return pd.DataFrame(rows).reindex(columns=METRIC_COLUMNS)


# ----------------------------------------------------------------------------------------------------
# One rationale test set: explain, faithfulness, score (the crosstask folds and evaluate_external)
# ----------------------------------------------------------------------------------------------------

def learned_rationale_scores(model, signals: pd.DataFrame, examples: pd.DataFrame, rho: float,
                             bootstrap: dict[str, Any]) -> dict[str, Any]:
    """A trained learned explainer (`models.learned.LearnedExplainer`) scored on rationale `examples` from its
    classifier's signal rows `signals` (the network reads them; no model pass): n_examples, AUROC, AUPRC and
    matched-budget F1 (rho) with bootstrap 95% intervals, own-rule F1 at 0.5 and at its calibrated threshold,
    each seed's own AUROC and matched F1 (mean, sd, min, max), a convex stack's five largest weights, the gates."""
    from learned_attribution.core.models.learned import score_examples

    gold_by_id = {i: gold_labels(t) for i, t in zip(examples["example_id"], examples["token_labels"])}
    table = signals[signals["example_id"].isin(gold_by_id)]
    n_boot, boot_seed = bootstrap["n_boot"], bootstrap["seed"]
    scored = score_examples(model, table)
    scores = [np.asarray(s, dtype=float) for s in scored["scores"]]
    gold = [gold_by_id[i] for i in scored["example_id"]]
    row: dict[str, Any] = {"n_examples": len(scores)}
    for rule, threshold in (("matched", None), ("own", 0.5), ("own_calibrated", model.calibrated_threshold)):
        metrics = score_method(scores, gold, method_masks(scores, rho, threshold), n_boot, boot_seed)
        if rule == "matched":
            row.update({k: metrics[k] for k in ("auroc", "auroc_low", "auroc_high", "auprc", "auprc_low", "auprc_high")})
        row.update({f"f1_{rule}": metrics["f1"], f"f1_{rule}_low": metrics["f1_low"],
                    f"f1_{rule}_high": metrics["f1_high"]})
    seed_metrics = []
    for member in range(model.n_members):
        member_scores = [np.asarray(s, dtype=float) for s in score_examples(model, table, member)["scores"]]
        seed_metrics.append(evaluate(member_scores, gold, method_masks(member_scores, rho)).summary())
    seed_metrics = pd.DataFrame(seed_metrics).rename(columns={"f1": "f1_matched"})
    row["seeds"] = model.n_members
    for metric in ("auroc", "f1_matched"):
        values = seed_metrics[metric]
        row.update({f"{metric}_seed_mean": values.mean(), f"{metric}_seed_sd": values.std(ddof=0),
                    f"{metric}_seed_min": values.min(), f"{metric}_seed_max": values.max()})
    weights = pd.Series(model.stack_weights(), dtype=float).sort_values(ascending=False).head(5)
    row.update({"calibrated_threshold": model.calibrated_threshold, "best_epoch": model.best_epoch,
                "n_pseudo_examples": model.n_pseudo_examples,
                "stack_weights": ", ".join(f"{name} {weight:.2f}" for name, weight in weights.items()),
                **model.gates()})
    return row


def matched_baselines(metrics: pd.DataFrame) -> pd.DataFrame:
    """The baselines' matched-budget rows on all examples, restricted to methods that explained every
    example (the expensive methods ran on a sample only, and a sample's AUROC is not comparable); the learned
    explainers and an amortized student (issue 14) are no baselines."""
    rows = metrics[(metrics["subset"] == "all") & (metrics["rule"] == "matched")
                   & ~metrics["family"].isin(["floor", "learned", "amortized"])]
    return rows[rows["n_examples"] == rows["n_examples"].max()]


def best_baseline(metrics: pd.DataFrame) -> str | None:
    """The baseline with the highest AUROC among `matched_baselines` (None when there is none)."""
    baselines = matched_baselines(metrics)
    return baselines.sort_values("auroc", ascending=False)["method"].iloc[0] if len(baselines) else None


def expensive_sample(examples: pd.DataFrame, size: int | None, seed: int) -> list[str]:
    """Seeded subset of the held-out examples on which the expensive methods (and faithfulness) run."""
    ids = examples["example_id"]
    if size is None or size >= len(ids):
        return ids.tolist()
    return ids.sample(n=size, random_state=seed).tolist()


def method_explainer(name: str, *, learned: dict | None = None, layer: int, vocabulary: TokenVocabulary,
                     settings: dict[str, Any] | None = None) -> Explainer:
    """The explainer registered as `name`: a trained learned explainer of `learned` (name -> `LearnedExplainer`: a
    fold's `expnet_plus` and `expnet_paper`, an amortized `student`) reading `layer`, or a baseline built with its
    `settings`."""
    if name in (learned or {}):
        return build_explainer(name, model=learned[name], layer=layer, vocabulary=vocabulary)
    return build_explainer(name, **(settings or {}))


def explain_rationale_set(classifier, predictions: pd.DataFrame, expnet, expnet_plus, params: dict[str, Any],
                          seed: int, compute: dict[str, Any] | None = None
                          ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """ExpNet+, the paper's ExpNet and every baseline of `params["baselines"]` on the rationale test examples
    of `predictions` (`params`: the crosstask settings), explaining `classifier` on the `compute` device.
    Methods listed under `expensive` run on the seeded sample of `expensive_sample_size` only (all examples
    when it is null). With `compute.dask.address` set, the Dask methods (`compute.dask.methods`, default the
    expensive ones) run as Dask tasks (`distributed.py`). Returns the token scores (one row per example and
    method, with gold labels and the `in_sample` flag), the failures and the cost table (examples per
    second, and where they ran)."""
    from learned_attribution.services.distributed import DaskSettings, dask_client, explain_on_dask

    place = Compute.from_params(compute)
    place.place(classifier.model)
    dask = DaskSettings.from_params(compute)
    examples = rationale_test_examples(predictions, max_examples=params["max_test_examples"], seed=seed)
    sample = set(expensive_sample(examples, params["expensive_sample_size"], seed))
    unknown = set(params["expensive"]) - set(params["baselines"])
    if unknown:
        raise ValueError(f"parameter crosstask.expensive names methods that are not in crosstask.baselines: {sorted(unknown)}")
    remote = [] if dask is None else list(dask.methods if dask.methods is not None else params["expensive"])
    not_baselines = set(remote) - set(params["baselines"])
    if not_baselines:
        raise ValueError(f"parameter compute.dask.methods names {sorted(not_baselines)}, which are not in "
                         "crosstask.baselines (the learned explainers run in process: they cost about a forward pass)")
    vocabulary = token_vocabulary(classifier.tokenizer)
    names = [n for n in ["expnet_plus", "expnet_paper", *params["baselines"]] if n not in remote]
    learned = {"expnet_plus": expnet_plus, "expnet_paper": expnet}
    explainers = {name: method_explainer(name, learned=learned, layer=params["layer"], vocabulary=vocabulary,
                                         settings=params["baselines"].get(name))
                  for name in names}
    sampled = examples[examples["example_id"].isin(sample)]
    where = {}
    runs = []
    with dask_client(dask) if remote else nullcontext() as client:  # one cluster for the node
        for subset, rows in (("all", examples), ("sample", sampled)):
            local = {n: e for n, e in explainers.items() if (n in params["expensive"]) == (subset == "sample")}
            if local:
                runs.append(explain_examples(classifier.model, classifier.tokenizer, rows, local, params["batch_size"]))
                where.update(dict.fromkeys(local, f"in process ({place.device})"))
            distributed = {n: params["baselines"][n] for n in remote
                           if (n in params["expensive"]) == (subset == "sample")}
            if distributed:
                runs.append(explain_on_dask(client, classifier, rows, distributed, params["batch_size"], dask))
                where.update(dict.fromkeys(distributed, dask.describe()))
    gold = examples[["example_id", "label", "predicted", "correct", "token_labels"]].copy()
    gold["gold"] = gold["token_labels"].map(lambda labels: gold_labels(labels).tolist())
    gold["in_sample"] = gold["example_id"].isin(sample)
    scores = pd.concat([r.scores for r in runs], ignore_index=True).merge(gold.drop(columns="token_labels"),
                                                                        on="example_id")
    n_explained = scores.groupby("method")["example_id"].nunique()
    forward_seconds = timed_forward(classifier, examples, params["batch_size"])
    cost = pd.DataFrame([{"method": m, "n_examples": int(n_explained.get(m, 0)), "seconds": s,
                          "examples_per_second": n_explained.get(m, 0) / s if s else np.nan, "ran": where[m]}
                         for r in runs for m, s in r.seconds.items()]
                        + [{"method": FORWARD, "n_examples": len(examples), "seconds": forward_seconds,
                            "examples_per_second": len(examples) / forward_seconds,
                            "ran": f"in process ({place.device})"}])
    cost["ratio_to_forward"] = cost["examples_per_second"] / (len(examples) / forward_seconds)
    failures = pd.concat([r.failures for r in runs], ignore_index=True)
    return scores, failures, cost


FORWARD = "forward"  # the cost table's reference row: a plain classification pass over the same examples


def timed_forward(classifier, examples: pd.DataFrame, batch_size: int) -> float:
    """Seconds of a plain classification pass (logits only, the explainers' batches) over `examples`: the
    reference of the cost table's `ratio_to_forward`."""
    from learned_attribution.core.models.runner import predict_proba

    started = time.perf_counter()
    predict_proba(classifier.model, list(examples["input_ids"]), batch_size, classifier.tokenizer.pad_token_id)
    return time.perf_counter() - started


def variant_cost(classifier, predictions: pd.DataFrame, variants: dict, params: dict[str, Any], seed: int,
                 n_examples: int, compute: dict[str, Any] | None = None) -> pd.DataFrame:
    """Throughput of every ExpNet+ variant (the whole explainer: its signal pass and its networks) as a ratio to a
    plain forward pass, both timed on the same seeded sample of `n_examples` rationale test examples, with the
    fold's batches. The chosen variant's full-set figure is in the fold's cost table; this puts the others on the
    cost chart."""
    Compute.from_params(compute).place(classifier.model)
    examples = rationale_test_examples(predictions, max_examples=params["max_test_examples"], seed=seed)
    examples = examples[examples["example_id"].isin(expensive_sample(examples, n_examples, seed))]
    vocabulary = token_vocabulary(classifier.tokenizer)
    explainers = {name: method_explainer("expnet_plus", learned={"expnet_plus": model}, layer=params["layer"],
                                         vocabulary=vocabulary) for name, model in variants.items()}
    timed_forward(classifier, examples.head(params["batch_size"]), params["batch_size"])  # warm-up
    forward_rate = len(examples) / timed_forward(classifier, examples, params["batch_size"])
    run = explain_examples(classifier.model, classifier.tokenizer, examples, explainers, params["batch_size"])
    return pd.DataFrame([{"variant": name, "n_examples": len(examples), "seconds": seconds,
                          "examples_per_second": len(examples) / seconds,
                          "ratio_to_forward": len(examples) / seconds / forward_rate}
                         for name, seconds in run.seconds.items()])


def pareto_frontier(cost: Sequence[float], quality: Sequence[float]) -> np.ndarray:
    """True where no other point is at least as cheap-to-run (higher `cost` = throughput ratio, faster) and at
    least as good (higher `quality`) and strictly better in one of them."""
    cost, quality = np.asarray(cost, dtype=float), np.asarray(quality, dtype=float)
    dominated = ((cost[None, :] >= cost[:, None]) & (quality[None, :] >= quality[:, None])
                 & ((cost[None, :] > cost[:, None]) | (quality[None, :] > quality[:, None])))
    return ~dominated.any(axis=1)


def cost_plausibility(metrics: pd.DataFrame, cost: pd.DataFrame, ablation: pd.DataFrame | None = None,
                      variant_costs: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per explained method: its throughput as a ratio to a plain forward pass (`cost`), its matched
    AUROC with the 95% interval on the examples it explained (`all`, or the expensive methods' `sample`), and
    whether it is on the Pareto frontier among the methods run on every example. With the ExpNet+ `ablation`
    table and `variant_costs` (`variant_cost`), every variant follows (family `expnet_plus variant`, on every
    example; the frontier stays the methods': a variant that was not selected is not what the fold deploys)."""
    cost = cost[cost["method"] != FORWARD].set_index("method")
    matched = metrics[metrics["rule"] == "matched"]
    rows = []
    for method in cost.index:
        everywhere = matched[(matched["method"] == method) & (matched["subset"] == "all")]
        on_all = bool(len(everywhere)) and everywhere["n_examples"].iloc[0] == matched.loc[
            matched["subset"] == "all", "n_examples"].max()
        row = everywhere if on_all else matched[(matched["method"] == method) & (matched["subset"] == "sample")]
        if not len(row):
            continue
        rows.append({"method": method, "family": row["family"].iloc[0], "ratio_to_forward": cost.at[method,
                     "ratio_to_forward"], "auroc": row["auroc"].iloc[0], "auroc_low": row["auroc_low"].iloc[0],
                     "auroc_high": row["auroc_high"].iloc[0], "subset": "all" if on_all else "sample"})
    table = pd.DataFrame(rows)
    table["pareto"] = False
    every = table["subset"] == "all"
    table.loc[every, "pareto"] = pareto_frontier(table.loc[every, "ratio_to_forward"], table.loc[every, "auroc"])
    if ablation is None or variant_costs is None:
        return table
    variants = ablation.merge(variant_costs[["variant", "ratio_to_forward"]], on="variant")
    variants = variants.assign(method="ExpNet+ " + variants["variant"], family="expnet_plus variant", subset="all",
                               pareto=False)
    return pd.concat([table, variants[table.columns]], ignore_index=True)


def sample_faithfulness(classifier, token_scores: pd.DataFrame, predictions: pd.DataFrame,
                        settings: dict[str, Any], compute: dict[str, Any] | None = None) -> pd.DataFrame:
    """ERASER comprehensiveness and sufficiency (AOPC) of every method on the examples flagged `in_sample`
    (`settings`: `fractions`, `batch_size`), on the `compute` device, or as Dask tasks when
    `compute.dask.address` is set."""
    from learned_attribution.services.distributed import DaskSettings, dask_client, faithfulness_on_dask
    from learned_attribution.core.metrics.faithfulness import faithfulness

    Compute.from_params(compute).place(classifier.model)
    dask = DaskSettings.from_params(compute)
    sampled = token_scores[token_scores["in_sample"]]
    input_ids = predictions.drop_duplicates("example_id").set_index("example_id")["input_ids"]
    inputs = {method: ([list(input_ids[i]) for i in rows["example_id"]],
                       [np.asarray(s, dtype=float) for s in rows["scores"]], rows["predicted"].tolist(), rows)
              for method, rows in sampled.groupby("method", sort=False)}
    fractions = tuple(settings["fractions"])
    tables = []
    with (dask_client(dask) if dask else nullcontext()) as client:
        for method, (ids, scores, target, rows) in inputs.items():
            if client is None:
                table = faithfulness(classifier.model, ids, scores, target, fractions=fractions,
                                     batch_size=settings["batch_size"], pad_token_id=classifier.tokenizer.pad_token_id)
            else:
                table = faithfulness_on_dask(client, classifier, ids, scores, target, fractions,
                                             settings["batch_size"], dask)
            table.insert(0, "method", method)
            table.insert(1, "example_id", rows["example_id"].to_numpy())
            tables.append(table)
    return pd.concat(tables, ignore_index=True)


def score_rationale_set(token_scores: pd.DataFrame, predictions: pd.DataFrame, faithfulness: pd.DataFrame,
                        budget: dict[str, float], expnet_plus_threshold: float, params: dict[str, Any], seed: int, *,
                        fold: str, held_out_task: str) -> pd.DataFrame:
    """Plausibility of every method under its own rule and the matched budget (`budget["rho"]`), on all
    examples, the correctly predicted ones and the expensive methods' sample, with the two floors and
    bootstrap 95% intervals; faithfulness (AOPC) beside the sample rows. The learned explainers' own rules
    are `budget["threshold"]` and their calibrated thresholds."""
    examples = rationale_test_examples(predictions, max_examples=params["max_test_examples"], seed=seed)
    thresholds = {"expnet_paper": {"own": budget["threshold"], "own_calibrated": budget["calibrated_threshold"]},
                  "expnet_plus": {"own": budget["threshold"], "own_calibrated": expnet_plus_threshold}}
    sample_ids = token_scores.loc[token_scores["in_sample"], "example_id"].unique()
    metrics = score_all(token_scores, examples, budget["rho"], thresholds, fold, held_out_task,
                        params["bootstrap"]["n_boot"], params["bootstrap"]["seed"], sample_ids=sample_ids)
    aopc = faithfulness.groupby("method")[["comprehensiveness", "sufficiency"]].mean().reset_index()
    aopc["subset"] = "sample"
    metrics = (metrics.drop(columns=["comprehensiveness", "sufficiency"])
               .merge(aopc, on=["method", "subset"], how="left").reindex(columns=METRIC_COLUMNS))
    headline = metrics[(metrics["subset"] == "all") & (metrics["rule"].isin(["matched", "own"]))]
    logger.info("%s:\n%s", fold, headline[["method", "rule", "n_examples", "f1", "auroc", "auprc"]]
                .round(3).to_string(index=False))
    return metrics
