"""Nodes of one cross-task fold: train ExpNet on two tasks, explain and score the third (SPEC §6-9)."""
from __future__ import annotations

import logging
from typing import Any, Callable

import numpy as np
import pandas as pd

from learned_attribution.datasets import TrainedClassifier
from learned_attribution.evaluation import (METRIC_COLUMNS, explain_examples, gold_labels, rationale_test_examples,
                                            score_all)
from learned_attribution.explainers import build_explainer
from learned_attribution.models.expnet import ExpNetConfig, ExpNetTraining, calibrate_threshold, train_expnet
from learned_attribution.models.features import feature_names

logger = logging.getLogger(__name__)

LEARNED_METHODS = ("expnet",)


def _feature_table(parts: dict[str, Callable[[], pd.DataFrame]]) -> pd.DataFrame:
    return pd.concat([load() for _, load in sorted(parts.items())], ignore_index=True)


def _explainer_tokens(features: pd.DataFrame, role: str) -> pd.DataFrame:
    """Tokens of correctly predicted examples with a non-empty rationale (SPEC §1, §4)."""
    rows = features[(features["role"] == role) & features["correct"]]
    positives = rows.groupby("example_id")["token_label"].transform("sum")
    return rows[positives > 0]


def train_fold_expnet(features_a: dict[str, Callable], features_b: dict[str, Callable], params: dict[str, Any],
                      seed: int) -> tuple[ExpNetTraining, pd.DataFrame, dict[str, float]]:
    """Train ExpNet on the two training tasks' rationale_train tokens (correct predictions only),
    stop early on their rationale_val tokens, calibrate a threshold there, and fix the top-k budget
    rho as the mean rationale density of the training tasks (the held-out labels are never read)."""
    tables = [_feature_table(features_a), _feature_table(features_b)]
    n_heads = sum(c.startswith("cls_to_tok_h") for c in tables[0].columns)
    names = feature_names(n_heads)
    train = pd.concat([_explainer_tokens(t, "rationale_train") for t in tables], ignore_index=True)
    val = pd.concat([_explainer_tokens(t, "rationale_val") for t in tables], ignore_index=True)
    for table in tables:
        task = table["task"].iloc[0]
        for role in ("rationale_train", "rationale_val"):
            rows = table[table["role"] == role]
            logger.info("%s %s: %d of %d examples predicted correctly and kept for ExpNet", task, role,
                        rows.loc[rows["correct"], "example_id"].nunique(), rows["example_id"].nunique())
    config = ExpNetConfig(**params["expnet"], seed=seed)
    training = train_expnet(train[names].to_numpy(np.float32), train["token_label"].to_numpy(np.float32),
                            val[names].to_numpy(np.float32), val["token_label"].to_numpy(np.float32), config)
    val_probabilities = training.predict(val[names].to_numpy(np.float32))
    grouped = val.assign(p=val_probabilities).groupby("example_id", sort=False)
    training.calibrated_threshold = calibrate_threshold([g["p"].to_numpy() for _, g in grouped],
                                                        [g["token_label"].to_numpy() for _, g in grouped])
    densities = train.groupby("task")["token_label"].mean()
    budget = {"rho": float(densities.mean()), "threshold": config.threshold,
              "calibrated_threshold": training.calibrated_threshold,
              **{f"density_{task}": float(d) for task, d in densities.items()},
              "n_train_tokens": int(len(train)), "n_val_tokens": int(len(val))}
    logger.info("ExpNet budget and thresholds: %s", budget)
    history = pd.DataFrame(training.history)
    return training, history, budget


def expensive_sample(examples: pd.DataFrame, size: int | None, seed: int) -> list[str]:
    """Seeded subset of the held-out examples on which the expensive methods (and faithfulness) run."""
    ids = examples["example_id"]
    if size is None or size >= len(ids):
        return ids.tolist()
    return ids.sample(n=size, random_state=seed).tolist()


def explain_heldout(classifier: TrainedClassifier, predictions: pd.DataFrame, expnet: ExpNetTraining,
                    params: dict[str, Any], seed: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """ExpNet and every configured baseline on the held-out task's rationale test set, explaining
    the held-out task's own classifier (never trained on these sentences). Methods listed under
    `expensive` run on the seeded sample only; the cost table records examples per second."""
    examples = rationale_test_examples(predictions, max_examples=params["max_test_examples"], seed=seed)
    sample = set(expensive_sample(examples, params["expensive_sample_size"], seed))
    unknown = set(params["expensive"]) - set(params["baselines"])
    if unknown:
        raise ValueError(f"parameter crosstask.expensive names methods that are not in crosstask.baselines: {sorted(unknown)}")
    explainers = {"expnet": build_explainer("expnet", training=expnet, layer=params["layer"])}
    for name, settings in params["baselines"].items():
        explainers[name] = build_explainer(name, **(settings or {}))
    cheap = {n: e for n, e in explainers.items() if n not in params["expensive"]}
    costly = {n: e for n, e in explainers.items() if n in params["expensive"]}
    runs = [explain_examples(classifier.model, classifier.tokenizer, examples, cheap, params["batch_size"])]
    sampled = examples[examples["example_id"].isin(sample)]
    if costly:
        runs.append(explain_examples(classifier.model, classifier.tokenizer, sampled, costly, params["batch_size"]))
    gold = examples[["example_id", "label", "predicted", "correct", "token_labels"]].copy()
    gold["gold"] = gold["token_labels"].map(lambda labels: gold_labels(labels).tolist())
    gold["in_sample"] = gold["example_id"].isin(sample)
    scores = pd.concat([r.scores for r in runs], ignore_index=True).merge(gold.drop(columns="token_labels"),
                                                                        on="example_id")
    n_explained = scores.groupby("method")["example_id"].nunique()
    cost = pd.DataFrame([{"method": m, "n_examples": int(n_explained.get(m, 0)), "seconds": s,
                          "examples_per_second": n_explained.get(m, 0) / s if s else np.nan}
                         for r in runs for m, s in r.seconds.items()])
    failures = pd.concat([r.failures for r in runs], ignore_index=True)
    return scores, failures, cost


def fold_faithfulness(classifier: TrainedClassifier, token_scores: pd.DataFrame, predictions: pd.DataFrame,
                      params: dict[str, Any]) -> pd.DataFrame:
    """ERASER comprehensiveness and sufficiency (AOPC) of every method on the seeded sample."""
    from learned_attribution.metrics.faithfulness import faithfulness

    sampled = token_scores[token_scores["in_sample"]]
    input_ids = predictions.drop_duplicates("example_id").set_index("example_id")["input_ids"]
    settings = params["faithfulness"]
    tables = []
    for method, rows in sampled.groupby("method", sort=False):
        table = faithfulness(classifier.model, [list(input_ids[i]) for i in rows["example_id"]],
                             [np.asarray(s, dtype=float) for s in rows["scores"]], rows["predicted"].tolist(),
                             fractions=tuple(settings["fractions"]), batch_size=settings["batch_size"],
                             pad_token_id=classifier.tokenizer.pad_token_id)
        table.insert(0, "method", method)
        table.insert(1, "example_id", rows["example_id"].to_numpy())
        tables.append(table)
    return pd.concat(tables, ignore_index=True)


def score_fold(token_scores: pd.DataFrame, predictions: pd.DataFrame, faithfulness: pd.DataFrame,
               budget: dict[str, float], params: dict[str, Any], seed: int, *, fold: str,
               held_out_task: str) -> pd.DataFrame:
    """Plausibility of every method under its own rule and the matched budget, on all examples, the
    correctly predicted ones and the expensive methods' sample, with the two floors and bootstrap 95%
    intervals; faithfulness (AOPC) beside the sample rows."""
    examples = rationale_test_examples(predictions, max_examples=params["max_test_examples"], seed=seed)
    thresholds = {"own": budget["threshold"], "own_calibrated": budget["calibrated_threshold"]}
    sample_ids = token_scores.loc[token_scores["in_sample"], "example_id"].unique()
    metrics = score_all(token_scores, examples, budget["rho"], thresholds, LEARNED_METHODS, fold, held_out_task,
                        params["bootstrap"]["n_boot"], params["bootstrap"]["seed"], sample_ids=sample_ids)
    aopc = faithfulness.groupby("method")[["comprehensiveness", "sufficiency"]].mean().reset_index()
    aopc["subset"] = "sample"
    metrics = (metrics.drop(columns=["comprehensiveness", "sufficiency"])
               .merge(aopc, on=["method", "subset"], how="left").reindex(columns=METRIC_COLUMNS))
    headline = metrics[(metrics["subset"] == "all") & (metrics["rule"].isin(["matched", "own"]))]
    logger.info("%s:\n%s", fold, headline[["method", "rule", "n_examples", "f1", "auroc", "auprc"]]
                .round(3).to_string(index=False))
    return metrics


def plot_fold(metrics: pd.DataFrame, *, fold: str):
    """Bar chart (PNG) of F1 and AUROC per method with intervals and floors."""
    from learned_attribution.reporting import metrics_bar_chart

    return metrics_bar_chart(metrics, f"{fold}: explainers of the held-out classifier (all rationale test examples)")


def heatmaps(token_scores: pd.DataFrame, predictions: pd.DataFrame, metrics: pd.DataFrame,
             classifier: TrainedClassifier, n_examples: int, seed: int, *, fold: str) -> str:
    """HTML token heatmaps for `n_examples` seeded test examples: gold, ExpNet and the best baseline (AUROC)."""
    from learned_attribution.reporting import heatmap_page

    baselines = metrics[(metrics["subset"] == "all") & (metrics["rule"] == "matched")
                        & ~metrics["family"].isin(["floor", "learned"])]
    best = baselines.sort_values("auroc", ascending=False)["method"].iloc[0] if len(baselines) else None
    methods = ["expnet"] + ([best] if best else [])
    ids = token_scores["example_id"].drop_duplicates()
    chosen = ids.sample(n=min(n_examples, len(ids)), random_state=seed)
    by_id = predictions.drop_duplicates("example_id").set_index("example_id")
    examples = []
    for example_id in chosen:
        record = by_id.loc[example_id]
        labels = np.asarray(record["token_labels"])
        keep = labels != -100
        tokens = classifier.tokenizer.convert_ids_to_tokens(np.asarray(record["input_ids"])[keep].tolist())
        rows = token_scores[token_scores["example_id"] == example_id].set_index("method")
        examples.append({"example_id": example_id, "label": int(record["label"]), "predicted": int(record["predicted"]),
                         "correct": bool(record["correct"]), "tokens": tokens, "gold": labels[keep].tolist(),
                         "scores": {m: rows.at[m, "scores"] for m in methods if m in rows.index}})
    return heatmap_page(f"{fold}: gold rationale, ExpNet and the best baseline ({best})", examples, methods)


def combine_folds(*fold_metrics: pd.DataFrame) -> pd.DataFrame:
    """All folds' metrics in one table: data/08_reporting/crosstask_metrics.csv."""
    return pd.concat(fold_metrics, ignore_index=True)


def crosstask_summary(metrics: pd.DataFrame, classifier_metrics: pd.DataFrame) -> str:
    """Markdown: per fold, every method's matched-budget F1 and AUROC (95% CI), the floors, ExpNet's
    own rules, the paper's reference numbers beside ours, and whether the paper's claim holds here."""
    from learned_attribution.reporting import PAPER_REFERENCE, markdown_table

    lines = ["# Cross-task results", "",
             "Each fold trains ExpNet on two tasks and scores every method on the third task's rationale test set, "
             "explaining that task's own classifier (never trained on these sentences). Matched budget: top-k with "
             "k = round(rho * n) for every method, rho = the training tasks' mean rationale density. Intervals: "
             "bootstrap 95% over examples. Floors: all tokens marked, random scores.", ""]
    for fold, rows in metrics.groupby("fold", sort=False):
        task = rows["held_out_task"].iloc[0]
        accuracy = classifier_metrics[(classifier_metrics["task"] == task) & (classifier_metrics["eval_set"] == "rationale_test")]
        lines += [f"## {fold}", ""]
        if len(accuracy):
            lines += [f"Classifier accuracy on the {task} rationale test set: {accuracy['accuracy'].iloc[0]:.3f} "
                      f"(n = {int(accuracy['n'].iloc[0])}).", ""]
        table = rows[(rows["subset"] == "all") & ((rows["rule"] == "matched") | (rows["family"] == "floor")
                                                 | (rows["method"].isin(LEARNED_METHODS)))].copy()
        table["f1 (95% CI)"] = table.apply(lambda r: f"{r.f1:.3f} [{r.f1_low:.3f}, {r.f1_high:.3f}]", axis=1)
        table["auroc (95% CI)"] = table.apply(lambda r: f"{r.auroc:.3f} [{r.auroc_low:.3f}, {r.auroc_high:.3f}]", axis=1)
        table = table.sort_values(["family", "auroc"], ascending=[True, False])
        lines += [markdown_table(table[["method", "family", "rule", "n_examples", "f1 (95% CI)", "auroc (95% CI)",
                                        "auprc", "f1_micro"]]), ""]
        matched = rows[(rows["subset"] == "all") & (rows["rule"] == "matched")]
        baselines = matched[~matched["family"].isin(["floor", "learned"])]
        expnet = matched[matched["method"] == "expnet"]
        own = rows[(rows["subset"] == "all") & (rows["method"] == "expnet") & (rows["rule"] == "own")]
        all_tokens = rows[(rows["subset"] == "all") & (rows["method"] == "all_tokens")]
        if len(baselines) and len(expnet):
            best_f1 = baselines.sort_values("f1", ascending=False).iloc[0]
            best_auroc = baselines.sort_values("auroc", ascending=False).iloc[0]
            reference = PAPER_REFERENCE.get(task, {})
            lines += [
                f"- Paper (bert-base): ExpNet F1 {reference.get('expnet_f1', float('nan')):.3f} vs best baseline "
                f"{reference.get('best_baseline', '?')} {reference.get('best_baseline_f1', float('nan')):.3f}.",
                f"- Here: ExpNet F1 {own['f1'].iloc[0]:.3f} (own rule, threshold 0.5) / {expnet['f1'].iloc[0]:.3f} "
                f"(matched) vs best baseline {best_f1['method']} {best_f1['f1']:.3f} (matched); all-tokens floor "
                f"{all_tokens['f1'].iloc[0]:.3f}.",
                f"- ExpNet AUROC {expnet['auroc'].iloc[0]:.3f} [{expnet['auroc_low'].iloc[0]:.3f}, "
                f"{expnet['auroc_high'].iloc[0]:.3f}] vs best baseline {best_auroc['method']} {best_auroc['auroc']:.3f} "
                f"[{best_auroc['auroc_low']:.3f}, {best_auroc['auroc_high']:.3f}].",
                f"- The paper's claim (ExpNet's F1 above every baseline's) "
                f"{'holds' if own['f1'].iloc[0] > baselines['f1'].max() else 'does not hold'} here on this fold "
                f"(own rule vs the baselines' top-k).", ""]
    return "\n".join(lines)
