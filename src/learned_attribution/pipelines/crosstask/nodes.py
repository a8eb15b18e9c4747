"""Nodes of one cross-task fold: train ExpNet on the training tasks, explain and score the held-out one (SPEC §6-9)."""
from __future__ import annotations

import logging
from typing import Any, Callable

import numpy as np
import pandas as pd

from learned_attribution.adapters.kedro_datasets import TrainedClassifier
from learned_attribution.services.evaluation import (best_baseline, explain_rationale_set, matched_baselines,
                                            rationale_test_examples, sample_faithfulness,
                                            score_rationale_set)
from learned_attribution.core.models.features import feature_names
from learned_attribution.core.models.learned import LearnedExplainer
from learned_attribution.core.models.runner import Compute

logger = logging.getLogger(__name__)

LEARNED_METHODS = ("expnet_plus", "expnet_paper")


def _feature_table(parts: dict[str, Callable[[], pd.DataFrame]]) -> pd.DataFrame:
    return pd.concat([load() for _, load in sorted(parts.items())], ignore_index=True)


def _rationale_tokens(features: pd.DataFrame, role: str) -> pd.DataFrame:
    """Tokens of the `role` examples with a non-empty rationale, predicted right or wrong."""
    rows = features[features["role"] == role]
    return rows[rows.groupby("example_id")["token_label"].transform("sum") > 0]


def _explainer_tokens(features: pd.DataFrame, role: str) -> pd.DataFrame:
    """Tokens of correctly predicted examples with a non-empty rationale (SPEC §1, §4). A training task
    without any is an error: a fold trained silently on one task would report wrong numbers."""
    kept = _rationale_tokens(features[features["correct"]], role)
    if kept.empty:
        task = features["task"].iloc[0] if len(features) else "a training task"
        raise ValueError(f"{task} contributes no {role} token rows (correctly predicted, with a rationale) to this "
                         f"fold ({len(features)} token rows read): its feature or signal partitions are incomplete "
                         "or empty; rerun `kedro run --pipeline classifiers` for it")
    return kept


def _context(classifier: TrainedClassifier, training_tasks: list[str], rho: float, layer: int,
             encoder: dict[str, Any], max_length: int, fold: str) -> dict:
    from learned_attribution.core.models.artifacts import explainer_context

    return explainer_context(classifier.model, classifier.tokenizer, fold=fold,
                             held_out_task=fold.removeprefix("heldout_"), training_tasks=sorted(training_tasks),
                             encoder=encoder["name_or_path"], layer=layer, rho=rho, max_length=max_length)


def _check_training_tasks(tables: list[pd.DataFrame], what: str) -> None:
    """A fold is trained on one or more training tasks, each read once (a task wired twice would weigh double)."""
    tasks = [table["task"].iloc[0] for table in tables]
    if not tasks or len(set(tasks)) != len(tasks):
        raise ValueError(f"a fold needs the {what} of one or more distinct training tasks, got tasks {tasks}")


def train_fold_expnet(classifier: TrainedClassifier, expnet: dict[str, Any], layer: int, encoder: dict[str, Any],
                      max_length: int, seed: int, compute: dict[str, Any] | None, *training_features: dict[str, Callable],
                      fold: str) -> tuple[LearnedExplainer, pd.DataFrame, dict[str, float]]:
    """Train the paper's ExpNet (the `crosstask.expnet` variant of the one learned-explainer core, on the
    `compute` device) on the training tasks' rationale_train tokens (correct predictions only;
    `training_features`: each training task's attention feature partitions), stop early on their rationale_val
    tokens by its declared rule, calibrate a threshold there, and fix the top-k budget rho as the mean rationale
    density of the training tasks (the held-out labels are never read). The held-out task's `classifier` is only
    read for its shape, recorded in the saved explainer's config."""
    from learned_attribution.core.models.learned import TrainingSettings, Variant, fit_variant

    tables = [_feature_table(features) for features in training_features]
    _check_training_tasks(tables, "attention features")
    n_heads = sum(c.startswith("cls_to_tok_h") for c in tables[0].columns)
    train = pd.concat([_explainer_tokens(t, "rationale_train") for t in tables], ignore_index=True)
    val = pd.concat([_explainer_tokens(t, "rationale_val") for t in tables], ignore_index=True)
    for table in tables:
        task = table["task"].iloc[0]
        for role in ("rationale_train", "rationale_val"):
            rows = table[table["role"] == role]
            logger.info("%s %s: %d of %d examples predicted correctly and kept for ExpNet", task, role,
                        rows.loc[rows["correct"], "example_id"].nunique(), rows["example_id"].nunique())
    unknown = set(expnet) - {"variant", "training", "threshold"}
    if unknown:
        raise ValueError(f"parameter crosstask.expnet has unknown keys {sorted(unknown)}; expected variant, training "
                         "(the one learned-explainer loop's settings) and threshold")
    densities = train.groupby("task")["token_label"].mean()
    rho = float(densities.mean())
    variant = Variant.from_params("expnet_paper", expnet["variant"])
    training = fit_variant(variant, train, val, None, {}, feature_names(n_heads), rho,
                           TrainingSettings(**expnet["training"], seed=seed), Compute.from_params(compute).device)
    training.threshold = float(expnet["threshold"])
    training.context = _context(classifier, list(densities.index), rho, layer, encoder, max_length, fold)
    budget = {"rho": rho, "threshold": training.threshold, "calibrated_threshold": training.calibrated_threshold,
              **{f"density_{task}": float(d) for task, d in densities.items()},
              "n_train_tokens": int(len(train)), "n_val_tokens": int(len(val))}
    logger.info("ExpNet budget and thresholds: %s", budget)
    history = pd.DataFrame(training.history).drop(columns=["member_val_auroc"], errors="ignore")
    return training, history, budget


def explain_heldout(classifier: TrainedClassifier, predictions: pd.DataFrame, expnet: LearnedExplainer,
                    expnet_plus, params: dict[str, Any], seed: int,
                    compute: dict[str, Any] | None = None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """ExpNet+ (the fold's chosen variant), the paper's ExpNet and every configured baseline on the held-out
    task's rationale test set, explaining the held-out task's own classifier (never trained on these
    sentences) on the `compute` device; the expensive methods on the seeded sample, as Dask tasks when
    `compute.dask.address` is set (`evaluation.explain_rationale_set`)."""
    return explain_rationale_set(classifier, predictions, expnet, expnet_plus, params, seed, compute)


def fold_faithfulness(classifier: TrainedClassifier, token_scores: pd.DataFrame, predictions: pd.DataFrame,
                      settings: dict[str, Any], compute: dict[str, Any] | None = None) -> pd.DataFrame:
    """ERASER comprehensiveness and sufficiency (AOPC) of every method on the seeded sample
    (`settings`: `crosstask.faithfulness`), on the `compute` device or as Dask tasks."""
    return sample_faithfulness(classifier, token_scores, predictions, settings, compute)


def score_fold(token_scores: pd.DataFrame, predictions: pd.DataFrame, faithfulness: pd.DataFrame,
               budget: dict[str, float], expnet_plus, params: dict[str, Any], seed: int, *, fold: str,
               held_out_task: str) -> pd.DataFrame:
    """Plausibility of every method (own rule and matched budget; all, correct and sample subsets; floors;
    bootstrap 95% intervals) with faithfulness beside the sample rows (`evaluation.score_rationale_set`)."""
    return score_rationale_set(token_scores, predictions, faithfulness, budget, expnet_plus.calibrated_threshold,
                               params, seed, fold=fold, held_out_task=held_out_task)


def plot_fold(metrics: pd.DataFrame, *, fold: str):
    """Bar chart (PNG) of F1 and AUROC per method with intervals and floors."""
    from learned_attribution.services.reporting import metrics_bar_chart

    return metrics_bar_chart(metrics, f"{fold}: explainers of the held-out classifier (all rationale test examples)")


def time_expnet_plus_variants(classifier: TrainedClassifier, predictions: pd.DataFrame, models: dict,
                              params: dict[str, Any], seed: int, compute: dict[str, Any] | None = None) -> pd.DataFrame:
    """Throughput of every ExpNet+ variant as a ratio to a plain forward pass, on a seeded sample of the held-out
    rationale test examples (`crosstask.variant_cost_examples`)."""
    from learned_attribution.services.evaluation import variant_cost

    return variant_cost(classifier, predictions, models, params, seed, params["variant_cost_examples"], compute)


def plot_cost(fold_metrics: pd.DataFrame, explain_cost: pd.DataFrame, ablation: pd.DataFrame,
              variant_costs: pd.DataFrame, *, fold: str):
    """Which explainer to pick: throughput (ratio to a plain forward pass, timed in the fold) against AUROC with
    its interval for every method and every ExpNet+ variant, with the Pareto frontier of the methods (PNG)."""
    from learned_attribution.services.evaluation import cost_plausibility
    from learned_attribution.services.reporting import cost_plausibility_chart

    points = cost_plausibility(fold_metrics, explain_cost, ablation, variant_costs)
    logger.info("%s: Pareto frontier (cost vs AUROC): %s", fold, ", ".join(points.loc[points["pareto"], "method"]))
    return cost_plausibility_chart(points, f"{fold}: cost vs plausibility of every method")


def heatmaps(token_scores: pd.DataFrame, predictions: pd.DataFrame, metrics: pd.DataFrame,
             classifier: TrainedClassifier, n_examples: int, seed: int, *, fold: str) -> str:
    """HTML token heatmaps for `n_examples` seeded test examples: gold, ExpNet+, the paper's ExpNet and the
    best baseline (AUROC)."""
    from learned_attribution.services.reporting import heatmap_page

    best = best_baseline(metrics)
    methods = list(LEARNED_METHODS) + ([best] if best else [])
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
    return heatmap_page(f"{fold}: gold rationale, ExpNet+, the paper's ExpNet and the best baseline ({best})",
                        examples, methods)


def fold_card(fold_metrics: pd.DataFrame, budget: dict[str, float], baselines: dict[str, Any], layer: int, *,
              fold: str) -> dict:
    """What applying the fold's explainers to new text needs besides their weights (read by
    `learned_attribution.services.explain`): the best baseline (AUROC, among methods run on every example) with every
    baseline's settings, the matched budget rho and the attention layer."""
    ranked = matched_baselines(fold_metrics)
    best = best_baseline(fold_metrics) or "saliency"
    return {"fold": fold, "held_out_task": fold.removeprefix("heldout_"), "best_baseline": best,
            "best_baseline_auroc": float(ranked["auroc"].max()) if len(ranked) else None,
            "baselines": {name: dict(settings or {}) for name, settings in baselines.items()},
            "rho": float(budget["rho"]), "layer": int(layer)}


def combine_folds(*fold_metrics: pd.DataFrame) -> pd.DataFrame:
    """All folds' metrics in one table: data/08_reporting/crosstask_metrics.csv."""
    return pd.concat(fold_metrics, ignore_index=True)


def crosstask_summary(metrics: pd.DataFrame, classifier_metrics: pd.DataFrame, ablation: pd.DataFrame) -> str:
    """Markdown: per fold, every method's matched-budget F1 and AUROC (95% CI), the floors, ExpNet's
    own rules, the paper's reference numbers beside ours, whether the paper's claim holds here, and every
    ExpNet+ candidate of the fold's selection (the ablation table: validation, held-out AUROC, seed spread)."""
    from learned_attribution.services.reporting import PAPER_REFERENCE, markdown_table

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
        baselines = matched_baselines(rows)
        all_tokens = rows[(rows["subset"] == "all") & (rows["method"] == "all_tokens")]
        if len(baselines):
            best_f1 = baselines.sort_values("f1", ascending=False).iloc[0]
            best_auroc = baselines.sort_values("auroc", ascending=False).iloc[0]
            reference = PAPER_REFERENCE.get(task, {})
            lines += [f"- Paper (bert-base): ExpNet F1 {reference.get('expnet_f1', float('nan')):.3f} vs best baseline "
                      f"{reference.get('best_baseline', '?')} {reference.get('best_baseline_f1', float('nan')):.3f}. "
                      f"Here: best baseline by matched F1 {best_f1['method']} {best_f1['f1']:.3f}, by AUROC "
                      f"{best_auroc['method']} {best_auroc['auroc']:.3f} [{best_auroc['auroc_low']:.3f}, "
                      f"{best_auroc['auroc_high']:.3f}]; all-tokens floor F1 {all_tokens['f1'].iloc[0]:.3f}."]
            for method, label in (("expnet_plus", "ExpNet+ (chosen variant)"), ("expnet_paper", "The paper's ExpNet")):
                learned = matched[matched["method"] == method]
                own = rows[(rows["subset"] == "all") & (rows["method"] == method) & (rows["rule"] == "own_calibrated")]
                if not len(learned):
                    continue
                row = learned.iloc[0]
                auroc_win = row["auroc_low"] > best_auroc["auroc_high"]
                lines.append(
                    f"- {label}: AUROC {row['auroc']:.3f} [{row['auroc_low']:.3f}, {row['auroc_high']:.3f}], matched F1 "
                    f"{row['f1']:.3f} [{row['f1_low']:.3f}, {row['f1_high']:.3f}], own-rule F1 (calibrated) "
                    f"{own['f1'].iloc[0]:.3f}: AUROC {'above' if row['auroc'] > best_auroc['auroc'] else 'below'} the best "
                    f"baseline's{' (intervals apart)' if auroc_win else ''}, matched F1 "
                    f"{'above' if row['f1'] > best_f1['f1'] else 'below'} the best baseline's, own-rule F1 "
                    f"{'above' if own['f1'].iloc[0] > all_tokens['f1'].iloc[0] else 'below'} the all-tokens floor.")
            lines += _by_prediction(rows, best_auroc["method"])
            lines.append("")
        candidates = ablation[(ablation["fold"] == fold) & ablation["val_auroc"].notna()]
        if len(candidates):
            lines += ["ExpNet+ candidates (selected first, then by validation AUROC; held-out AUROC of the seed ensemble, "
                      "and each seed's own):", ""]
            for r in candidates.sort_values(["selected", "val_auroc"], ascending=False).to_dict("records"):
                spread = (f"; per seed {r['auroc_seed_mean']:.3f} ± {r['auroc_seed_sd']:.3f}"
                          if pd.notna(r.get("auroc_seed_mean")) else "")
                lines.append(f"- {'**' if r['selected'] else ''}{r['variant']}{'** (selected)' if r['selected'] else ''}: "
                             f"validation {r['val_auroc']:.4f}, held-out AUROC {r['auroc']:.3f} [{r['auroc_low']:.3f}, "
                             f"{r['auroc_high']:.3f}]{spread}, matched F1 {r['f1_matched']:.3f}")
            lines.append("")
    return "\n".join(lines)


def _by_prediction(rows: pd.DataFrame, baseline: str) -> list[str]:
    """One line: matched AUROC of ExpNet+, the paper's ExpNet and `baseline` on the correctly and the incorrectly
    predicted examples (the explained class is the wrong one on the latter)."""
    matched = rows[(rows["rule"] == "matched")].set_index(["subset", "method"])
    parts = []
    for subset in ("correct", "incorrect"):
        present = [m for m in ("expnet_plus", "expnet_paper", baseline) if (subset, m) in matched.index]
        if not present:
            continue
        scores = ", ".join(f"{m} {matched.at[(subset, m), 'auroc']:.3f} [{matched.at[(subset, m), 'auroc_low']:.3f}, "
                           f"{matched.at[(subset, m), 'auroc_high']:.3f}]" for m in present)
        parts.append(f"{subset}ly predicted (n = {int(matched.at[(subset, present[0]), 'n_examples'])}): {scores}")
    return [f"- AUROC by prediction: {'; '.join(parts)}."] if parts else []


# ----------------------------------------------------------------------------------------------------
# ExpNet+ (issue 06)
# ----------------------------------------------------------------------------------------------------

def _signal_tables(signals: dict[str, Callable]) -> dict[str, pd.DataFrame]:
    """A training task's ExpNet+ token rows: `train`/`val` (correct predictions with a non-empty
    rationale, as for ExpNet: what the networks train and stop early on), `val_all` (every validation example
    with a rationale, mispredicted ones too: what the selection scores, as the held-out test set is scored) and
    `unlabeled` (every rationale token row, signals only)."""
    table = _feature_table(signals)
    return {"train": _explainer_tokens(table, "rationale_train"), "val": _explainer_tokens(table, "rationale_val"),
            "val_all": _rationale_tokens(table, "rationale_val"), "unlabeled": table.drop(columns=["token_label"])}


def _expnet_plus_setup(signals: dict[str, Callable], settings: dict[str, Any], seed: int):
    from learned_attribution.core.models.learned import TrainingSettings, Variant
    from learned_attribution.core.models.signals import FEATURE_SETS, columns_for

    candidates = settings.get("candidates") or "all"
    candidates = list(settings["variants"]) if candidates == "all" else candidates
    unknown = [name for name in candidates if name not in settings["variants"]]
    if unknown:
        raise ValueError(f"parameter crosstask.expnet_plus.candidates names unknown variants {unknown}; defined: "
                         f"{sorted(settings['variants'])}")
    variants = [Variant.from_params(name, settings["variants"][name] or {}) for name in candidates]
    first = next(iter(signals.values()))()
    n_heads = sum(c.startswith("cls_to_tok_h") for c in first.columns)
    n_layers = sum(c.startswith("raw_attention_l") for c in first.columns)
    columns = {v.name: columns_for(v.feature_sets, n_heads, n_layers) for v in variants}
    missing = set(columns_for(FEATURE_SETS, n_heads, n_layers)) - set(first.columns)
    if missing:
        raise ValueError(f"explainer signals lack columns {sorted(missing)}: rerun the classifiers pipeline")
    return variants, columns, TrainingSettings(**settings["training"], seed=seed)


def select_expnet_plus(budget: dict[str, float], expnet_plus: dict[str, Any], seed: int,
                       compute: dict[str, Any] | None, *training_signals: dict[str, Callable]) -> pd.DataFrame:
    """Leave-one-training-task-out validation of every ExpNet+ variant on the fold's training tasks
    (`training_signals`: each training task's signal partitions; the held-out task is not an input of this
    node); the best mean validation AUROC is chosen."""
    from learned_attribution.core.models.learned import select_variant

    parts = [_signal_tables(signals) for signals in training_signals]
    _check_training_tasks([p["unlabeled"] for p in parts], "explainer signals")
    variants, columns, settings = _expnet_plus_setup(training_signals[0], expnet_plus, seed)
    tables = {p["unlabeled"]["task"].iloc[0]: p for p in parts}
    selection = select_variant(variants, tables, columns, budget["rho"], settings, Compute.from_params(compute).device)
    means = selection[selection["direction"] == "mean"]
    logger.info("ExpNet+ selection (mean validation AUROC over the left-out training tasks):\n%s",
                means[["variant", "val_auroc"]].round(4).to_string(index=False))
    return selection


def fit_expnet_plus(signals_heldout: dict[str, Callable], classifier: TrainedClassifier, budget: dict[str, float],
                    expnet_plus: dict[str, Any], layer: int, encoder: dict[str, Any], max_length: int, seed: int,
                    compute: dict[str, Any] | None, *training_signals: dict[str, Callable], fold: str) -> dict:
    """Every ExpNet+ variant retrained on all the training tasks (`training_signals`: each one's signal
    partitions; early stopping on their validation rows) for the held-out classifier, whose signals enter
    unlabeled (its token labels are dropped here; the `classifier` is only read for its shape, recorded in each
    saved variant's config)."""
    from learned_attribution.core.models.learned import fit_variant

    parts = [_signal_tables(signals) for signals in training_signals]
    _check_training_tasks([p["unlabeled"] for p in parts], "explainer signals")
    variants, columns, settings = _expnet_plus_setup(training_signals[0], expnet_plus, seed)
    train = pd.concat([p["train"] for p in parts], ignore_index=True)
    val = pd.concat([p["val"] for p in parts], ignore_index=True)
    target = _feature_table(signals_heldout).drop(columns=["token_label"])
    stats = {p["unlabeled"]["task"].iloc[0]: p["unlabeled"] for p in parts} | {target["task"].iloc[0]: target}
    context = _context(classifier, sorted(train["task"].unique()), budget["rho"], layer, encoder, max_length, fold)
    device = Compute.from_params(compute).device
    models = {}
    for variant in variants:
        models[variant.name] = fit_variant(variant, train, val, target, stats, columns[variant.name], budget["rho"],
                                           settings, device)
        models[variant.name].threshold = budget["threshold"]
        models[variant.name].context = context | {"variant": variant.name}
    return models


def chosen_expnet_plus(models: dict, selection: pd.DataFrame) -> tuple[LearnedExplainer, LearnedExplainer]:
    """The variant chosen by `select_expnet_plus` (retrained on the training tasks), and the best-ranked shape-free
    variant beside it (issue 12: what the fold applies to a classifier of another family or shape; the chosen one
    itself when it is shape-free). A candidate list without a shape-free variant is an error: a fold must be able
    to explain any supported classifier."""
    from learned_attribution.core.models.learned import best_shape_free

    chosen = models[selection.loc[selection["selected"], "variant"].iloc[0]]
    shape_free = best_shape_free(selection, {name: model.variant for name, model in models.items()})
    if shape_free is None:
        raise ValueError("parameter crosstask.expnet_plus.candidates has no shape-free variant (feature sets among "
                         "models/signals.py SHAPE_FREE_SETS): a fold keeps one to explain classifiers of other shapes")
    return chosen, models[shape_free]


def expnet_plus_ablation(models: dict, selection: pd.DataFrame, signals_heldout: dict[str, Callable],
                         predictions: pd.DataFrame, fold_metrics: pd.DataFrame, budget: dict[str, float],
                         params: dict[str, Any], seed: int, *, fold: str) -> pd.DataFrame:
    """Every variant on the held-out rationale test set (all examples): AUROC, AUPRC, matched-budget F1
    and own-rule F1 (threshold 0.5 and calibrated) with bootstrap 95% intervals, beside the best baseline
    (by AUROC, matched, among the methods run on every example) and the two floors from the fold's
    metrics, and each variant's validation AUROC. A variant's explainer is the ensemble of its seeds; each
    seed's own network is scored too (`auroc_seed_*`, `f1_matched_seed_*`: mean, sd, min, max over the seeds),
    and a convex stack lists its largest weights (`stack_weights`)."""
    from learned_attribution.services.evaluation import learned_rationale_scores

    examples = rationale_test_examples(predictions, max_examples=params["max_test_examples"], seed=seed)
    table = _feature_table(signals_heldout)
    validation = selection[selection["direction"] == "mean"].set_index("variant")
    rows = []
    for name, model in models.items():
        rows.append({"fold": fold, "variant": name, "description": model.variant.describe(),
                     "selected": bool(validation.at[name, "rank"] == 1), "shape_free": model.shape_free,
                     "val_auroc": validation.at[name, "val_auroc"],
                     **learned_rationale_scores(model, table, examples, budget["rho"], params["bootstrap"])})
    best = matched_baselines(fold_metrics).sort_values("auroc", ascending=False).head(1)
    floors = fold_metrics[(fold_metrics["subset"] == "all") & (fold_metrics["family"] == "floor")]
    for _, ref in pd.concat([best, floors]).iterrows():
        label = "best baseline" if ref["family"] != "floor" else "floor"
        rows.append({"fold": fold, "variant": f"{ref['method']} ({label})", "description": label, "selected": False,
                     "n_examples": ref["n_examples"], "auroc": ref["auroc"], "auroc_low": ref["auroc_low"],
                     "auroc_high": ref["auroc_high"], "auprc": ref["auprc"], "auprc_low": ref["auprc_low"],
                     "auprc_high": ref["auprc_high"], "f1_matched": ref["f1"], "f1_matched_low": ref["f1_low"],
                     "f1_matched_high": ref["f1_high"]})
    return pd.DataFrame(rows)


def expnet_plus_report(*ablations: pd.DataFrame):
    """All folds' ablation tables: one CSV, a Markdown page and a plot (data/08_reporting/expnet_plus_*)."""
    from learned_attribution.services.reporting import ablation_chart, interval_text, markdown_table

    table = pd.concat(ablations, ignore_index=True)

    def seed_spread(r, metric):
        if "seeds" not in r or pd.isna(r.get("seeds")):
            return ""
        return (f"{r[metric + '_seed_mean']:.3f} ± {r[metric + '_seed_sd']:.3f} "
                f"({r[metric + '_seed_min']:.3f}-{r[metric + '_seed_max']:.3f}, {int(r['seeds'])} seeds)")

    lines = ["# ExpNet+ ablation", "",
             "Every variant is trained on the fold's training tasks and scored on the held-out task's rationale "
             "test set (all examples). `val_auroc`: mean validation AUROC of leave-one-training-task-out (for each "
             "training task: train on the other training tasks, validate on all its validation rationale examples, "
             "mispredicted ones too); the variant with the highest is chosen (`selected`) without reading the "
             "held-out task; "
             "each direction's AUROC is the mean over the variant's seeds, so a lucky seed does not pick it. A "
             "variant's explainer is the ensemble of its seeds (mean logit); `AUROC per seed`: each seed's own "
             "network on the same examples (mean ± sd, min-max). Intervals: bootstrap 95% over examples. Own rule: "
             "threshold calibrated on the training tasks' validation examples. `stack weights`: a convex stack's "
             "five largest weights.", ""]
    for fold, rows in table.groupby("fold", sort=False):
        shown = rows.assign(**{
            "AUROC": rows.apply(interval_text, axis=1, metric="auroc"),
            "AUPRC": rows.apply(interval_text, axis=1, metric="auprc"),
            "F1 matched": rows.apply(interval_text, axis=1, metric="f1_matched"),
            "F1 own (calibrated)": rows.apply(interval_text, axis=1, metric="f1_own_calibrated"),
            "AUROC per seed": rows.apply(seed_spread, axis=1, metric="auroc"),
            "stack weights": rows.get("stack_weights", pd.Series("", index=rows.index)).fillna(""),
        })
        lines += [f"## {fold}", "", markdown_table(shown[["variant", "description", "selected", "val_auroc", "AUROC",
                                                          "AUROC per seed", "AUPRC", "F1 matched",
                                                          "F1 own (calibrated)", "stack weights"]]), ""]
    return table, "\n".join(lines), ablation_chart(table)
