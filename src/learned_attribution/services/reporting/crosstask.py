"""The cross-task reports: the per-fold summary page, the ExpNet+ ablation page, the across-architecture page, and
the tables that `learned-attribution results` puts in docs/results.md and README (headline, the paper's claim, by
prediction, shape-free variants, classifiers, transfer), all from a run's metric tables."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from learned_attribution.core.tasks import held_out_task

from learned_attribution.core.models.learned import LearnedModel
from learned_attribution.core.explainers.learned import EXPNET_PLUS, FOLD_LEARNED, PAPER_EXPNET

from learned_attribution.core.data.modes import GOLD, MODES, PREDICTED

from ..evaluation.protocol import matched_baselines, mode_rows
from .charts import ablation_chart
from .tables import PAPER_REFERENCE, comparison, interval_text, markdown_table, table_lines, with_intervals


@dataclass(frozen=True)
class FoldHeadline:
    """One fold's headline numbers in one mode (matched rule, all rationale test examples)."""

    fold: str
    mode: str
    n_examples: int
    expnet_plus: pd.Series
    paper: pd.Series
    best_by_auroc: pd.Series
    best_by_f1: pd.Series
    all_tokens_f1: float
    random_auroc: float


def fold_headlines(metrics: pd.DataFrame, mode: str = PREDICTED) -> list[FoldHeadline]:
    """Per fold, in `mode`: ExpNet+, the paper's ExpNet and the best baselines (by AUROC, by matched F1, among the
    methods run on every example, in the same mode), with the floors."""
    out = []
    for fold, rows in mode_rows(metrics, mode).groupby("fold", sort=False):
        matched = rows[(rows["subset"] == "all") & (rows["rule"] == "matched")].set_index("method")
        floors = rows[(rows["subset"] == "all") & (rows["family"] == "floor")].set_index("method")
        baselines = matched_baselines(rows)
        if not {EXPNET_PLUS, PAPER_EXPNET} <= set(matched.index) or not len(baselines):
            continue
        out.append(FoldHeadline(
            fold=str(fold), mode=mode, n_examples=int(matched.at[EXPNET_PLUS, "n_examples"]),
            expnet_plus=matched.loc[EXPNET_PLUS], paper=matched.loc[PAPER_EXPNET],
            best_by_auroc=baselines.sort_values("auroc", ascending=False).iloc[0],
            best_by_f1=baselines.sort_values("f1", ascending=False).iloc[0],
            all_tokens_f1=float(floors.at["all_tokens", "f1"]) if "all_tokens" in floors.index else float("nan"),
            random_auroc=float(floors.at["random", "auroc"]) if "random" in floors.index else float("nan")))
    return out


def headline_table(metrics: pd.DataFrame) -> str:
    """Markdown: per fold and mode (each example explained for its predicted class, or for the class its rationale
    supports) ExpNet+, the paper's ExpNet and the best baseline, AUROC and matched F1 with 95% intervals, the floors,
    and whether ExpNet+ is above the best baseline (and with intervals apart)."""
    rows = []
    for h in [h for mode in MODES for h in fold_headlines(metrics, mode)]:
        plus, auroc_best, f1_best = h.expnet_plus, h.best_by_auroc, h.best_by_f1
        verdicts = [comparison(plus, auroc_best, "auroc", "AUROC"), comparison(plus, f1_best, "f1", "F1")]
        rows.append([f"{held_out_task(h.fold)} (n = {h.n_examples})", h.mode,
                     f"**{interval_text(plus, 'auroc')}**", interval_text(h.paper, "auroc"),
                     f"{auroc_best['method']} {interval_text(auroc_best, 'auroc')}", f"**{interval_text(plus, 'f1')}**",
                     interval_text(h.paper, "f1"), f"{f1_best['method']} {interval_text(f1_best, 'f1')}",
                     f"{h.random_auroc:.3f}, {h.all_tokens_f1:.3f}", "; ".join(verdicts)])
    return table_lines(["held-out task", "mode", "ExpNet+ AUROC", "paper's ExpNet AUROC", "best baseline AUROC",
                        "ExpNet+ F1",
                        "paper's ExpNet F1", "best baseline F1", "floors: random AUROC, all-tokens F1",
                        "ExpNet+ vs best baseline"], rows)


MODE_SUBSETS = ((PREDICTED, "all"), (GOLD, "all"), (PREDICTED, "incorrect"), (GOLD, "incorrect"),
                (PREDICTED, "correct"))  # correct: the paper's protocol, the same in both modes


def modes_table(metrics: pd.DataFrame) -> str:
    """Markdown: per fold, ExpNet+ against saliency and the best baseline (by AUROC, and by matched F1, among the
    methods run on every example in that mode) in both modes, on all examples, the mispredicted ones and the correct
    ones (the paper's protocol, where the two modes coincide): matched AUROC and F1 with 95% intervals."""
    lines = []
    for fold, rows in metrics.groupby("fold", sort=False):
        for mode, subset in MODE_SUBSETS:
            in_mode = mode_rows(rows, mode)
            baselines = matched_baselines(in_mode)
            matched = in_mode[(in_mode["subset"] == subset) & (in_mode["rule"] == "matched")].set_index("method")
            if EXPNET_PLUS not in matched.index or not len(baselines):
                continue
            by_auroc = baselines.sort_values("auroc", ascending=False)["method"].iloc[0]
            by_f1 = baselines.sort_values("f1", ascending=False)["method"].iloc[0]
            plus = matched.loc[EXPNET_PLUS]
            cells = {name: matched.loc[name] if name in matched.index else None
                     for name in ("saliency", by_auroc, by_f1)}
            verdict = "; ".join(comparison(plus, cells[name], metric, label) for name, metric, label
                                in ((by_auroc, "auroc", "AUROC"), (by_f1, "f1", "F1")) if cells[name] is not None)
            lines.append([held_out_task(fold), "both (paper's protocol)" if subset == "correct" else mode,
                          {"all": "all", "incorrect": "mispredicted", "correct": "correct"}[subset],
                          int(plus["n_examples"]), f"**{interval_text(plus, 'auroc')}**",
                          interval_text(cells["saliency"], "auroc") if cells["saliency"] is not None else "",
                          f"{by_auroc} {interval_text(cells[by_auroc], 'auroc')}" if cells[by_auroc] is not None else "",
                          f"**{interval_text(plus, 'f1')}**",
                          f"{by_f1} {interval_text(cells[by_f1], 'f1')}" if cells[by_f1] is not None else "", verdict])
    return table_lines(["held-out task", "mode", "examples", "n", "ExpNet+ AUROC", "saliency AUROC",
                        "best baseline AUROC", "ExpNet+ F1", "best baseline F1", "ExpNet+ vs best baseline"], lines)


def shape_free_table(ablation: pd.DataFrame) -> str:
    """Markdown: per fold, the main job's ExpNet+ recipe beside every shape-free candidate of the ablation (a fold
    keeps one, `crosstask.expnet_plus.shape_free`, for classifiers of other shapes): what crossing architectures
    costs on the fold's own architecture (held-out AUROC and matched F1 with 95% intervals)."""
    lines = []
    variants = ablation[ablation["val_auroc"].notna()]
    for fold, rows in variants.groupby("fold", sort=False):
        chosen = rows[rows["main_recipe"] == True]  # noqa: E712 (column of bools)
        free = rows[rows["shape_free"] == True].sort_values("val_auroc", ascending=False)  # noqa: E712
        if not len(chosen) or not len(free):
            continue
        chosen = chosen.iloc[0]
        shown = [(chosen, "main job's recipe" + (", shape-free" if chosen["shape_free"] else ""))]
        shown += [(r, "shape-free candidate") for _, r in free.iterrows() if r["variant"] != chosen["variant"]]
        references = ablation[(ablation["fold"] == fold) & ablation["description"].isin(["best baseline", "floor"])]
        shown += [(r, r["description"]) for _, r in references.iterrows()]
        for row, role in shown:
            difference = "" if row["variant"] == chosen["variant"] else f"{row['auroc'] - chosen['auroc']:+.3f}"
            validation = f"{row['val_auroc']:.4f}" if pd.notna(row["val_auroc"]) else ""
            lines.append([held_out_task(fold), row["variant"], role, validation, interval_text(row, "auroc"),
                          interval_text(row, "f1_matched"), difference])
    return table_lines(["held-out task", "variant", "role", "validation AUROC", "held-out AUROC", "matched F1",
                        "AUROC minus the recipe's"], lines)


def paper_claim(h: FoldHeadline) -> tuple[dict, bool]:
    """The paper's reference numbers for the fold's task, and whether its claim (the paper's ExpNet above every
    baseline, by matched F1) holds in this run."""
    return PAPER_REFERENCE.get(held_out_task(h.fold), {}), bool(h.paper["f1"] > h.best_by_f1["f1"])


def paper_comparison_table(metrics: pd.DataFrame) -> str:
    """Markdown: the paper's matched F1 (bert-base) beside this run's, per held-out task."""
    rows = []
    for h in fold_headlines(metrics):
        reference, holds = paper_claim(h)
        rows.append([held_out_task(h.fold), f"{reference.get('expnet_f1', float('nan')):.3f}",
                     f"{reference.get('best_baseline', '?')} {reference.get('best_baseline_f1', float('nan')):.3f}",
                     f"{h.paper['f1']:.3f}", f"{h.best_by_f1['method']} {h.best_by_f1['f1']:.3f}",
                     "holds" if holds else "does not hold"])
    return table_lines(["held-out task", "paper: ExpNet F1", "paper: best baseline F1", "here: paper's ExpNet F1",
                        "here: best baseline F1", "the paper's claim (ExpNet above every baseline) here"], rows)


def by_prediction(rows: pd.DataFrame, baseline: str) -> list[tuple[str, int, dict[str, str]]]:
    """A fold's matched AUROC (with its interval) of ExpNet+, the paper's ExpNet and `baseline` on its correctly and
    incorrectly predicted examples, where present: (subset, examples, method -> interval text) per subset."""
    matched = rows[rows["rule"] == "matched"].set_index(["subset", "method"])
    out = []
    for subset in ("correct", "incorrect"):
        present = [m for m in (*FOLD_LEARNED, baseline) if (subset, m) in matched.index]
        if present:
            out.append((subset, int(matched.at[(subset, present[0]), "n_examples"]),
                        {m: interval_text(matched.loc[(subset, m)], "auroc") for m in present}))
    return out


def by_prediction_table(metrics: pd.DataFrame) -> str:
    """Markdown: matched AUROC of ExpNet+, the paper's ExpNet and the best baseline on correctly and incorrectly
    predicted examples (on the latter every method explains the wrong class)."""
    lines = []
    for h in fold_headlines(metrics):
        baseline = h.best_by_auroc["method"]
        for subset, n, cells in by_prediction(mode_rows(metrics[metrics["fold"] == h.fold]), baseline):
            if EXPNET_PLUS in cells:
                lines.append([held_out_task(h.fold), f"{subset}ly predicted", n, cells[EXPNET_PLUS],
                              cells.get(PAPER_EXPNET, ""), f"{baseline} {cells.get(baseline, '')}"])
    return table_lines(["held-out task", "subset", "n", "ExpNet+", "paper's ExpNet", "best baseline"], lines)


def classifier_table(classifier_metrics: pd.DataFrame) -> str:
    """Markdown: each classifier on its test split and rationale test set, every metric with its bootstrap 95%
    interval over examples."""
    shown = classifier_metrics[classifier_metrics["eval_set"].isin(["test", "rationale_test"])].reset_index(drop=True)
    if "accuracy_low" not in shown.columns:
        raise ValueError("classifier_metrics.csv has no intervals (`accuracy_low`, ...): it was written before they "
                         "were computed; rerun the classifiers' metrics (`kedro run --pipeline crosstask`)")
    return markdown_table(with_intervals(shown, ("accuracy", "macro_f1", "mcc"), keys=("task", "eval_set", "n")))


# The targets for the base-size classifiers (test split): CoLA MCC, SST-2 and HateXplain accuracy.
BASE_SIZE_TARGETS = {"cola": ("mcc", 0.45), "sst2": ("accuracy", 0.90), "hatexplain": ("accuracy", 0.80)}


def classifier_comparison_table(small: pd.DataFrame, base: pd.DataFrame) -> str:
    """Markdown: per task, the test-split score the base-size target reads and the share of the rationale test
    examples the classifier mispredicts, for the default (MiniLM) run and the base-size run side by side."""
    def value(frame: pd.DataFrame, task: str, eval_set: str, metric: str) -> float:
        rows = frame[(frame["task"] == task) & (frame["eval_set"] == eval_set)]
        return float(rows[metric].iloc[0]) if len(rows) else float("nan")

    rows = []
    for task, (metric, target) in BASE_SIZE_TARGETS.items():
        small_score, base_score = value(small, task, "test", metric), value(base, task, "test", metric)
        wrong = [1 - value(frame, task, "rationale_test", "accuracy") for frame in (small, base)]
        rows.append([task, metric, f">= {target:.2f}", f"{small_score:.3f}", f"{base_score:.3f}",
                     "yes" if base_score >= target else "no", f"{wrong[0]:.0%}", f"{wrong[1]:.0%}"])
    return table_lines(["task", "metric (test split)", "target at base size", "default run", "base size",
                        "target met", "rationale test mispredicted: default", "base size"], rows)


def transfer_table(into_base: pd.DataFrame | None, into_small: pd.DataFrame | None) -> str:
    """Markdown: per fold and direction, the transferred shape-free ExpNet+ beside the target run's saliency and
    its own ExpNet+ (AUROC with 95% intervals, matched F1), from the two runs' transfer_metrics.csv."""
    lines = []
    for table in (into_base, into_small):
        if table is None:
            continue
        for fold, rows in table.groupby("fold", sort=False):
            moved = rows[rows["role"] == "transferred"].iloc[0]
            by_method = rows[rows["role"] == "this fold's own"].set_index("method")
            saliency = by_method.loc["saliency"] if "saliency" in by_method.index else None
            own = by_method.loc[EXPNET_PLUS] if EXPNET_PLUS in by_method.index else None
            at_or_above = "" if saliency is None else ("yes" if moved["auroc"] >= saliency["auroc"] else "no")
            lines.append([held_out_task(fold), f"{moved['source_classifier']} -> {moved['target_classifier']}",
                          interval_text(moved, "auroc"), "" if saliency is None else interval_text(saliency, "auroc"),
                          "" if own is None else interval_text(own, "auroc"), interval_text(moved, "f1_matched"),
                          at_or_above])
    return table_lines(["held-out task", "trained on -> explains", "transferred AUROC", "saliency AUROC",
                        "own ExpNet+ AUROC", "transferred matched F1", "at or above saliency"], lines)


def crosstask_summary(metrics: pd.DataFrame, classifier_metrics: pd.DataFrame, *recipes: LearnedModel) -> str:
    """Markdown: per fold, every method's matched-budget F1 and AUROC (95% CI), the floors, ExpNet's
    own rules, the paper's reference numbers beside ours, whether the paper's claim holds here, and ExpNet+'s recipe
    (`recipes`: each fold's ExpNet+, in the folds' order)."""
    described = {model.context.get("fold"): model.variant for model in recipes}
    lines = ["# Cross-task results", "",
             "Each fold trains ExpNet on two tasks and scores every method on the third task's rationale test set, "
             "explaining that task's own classifier (never trained on these sentences). Matched budget: top-k with "
             "k = round(rho * n) for every method, rho = the training tasks' mean rationale density. Intervals: "
             "bootstrap 95% over examples. Floors: all tokens marked, random scores.", ""]
    for fold, rows in mode_rows(metrics, PREDICTED).groupby("fold", sort=False):
        task = rows["held_out_task"].iloc[0]
        accuracy = classifier_metrics[(classifier_metrics["task"] == task) & (classifier_metrics["eval_set"] == "rationale_test")]
        lines += [f"## {fold}", ""]
        if len(accuracy):
            lines += [f"Classifier accuracy on the {task} rationale test set: {accuracy['accuracy'].iloc[0]:.3f} "
                      f"(n = {int(accuracy['n'].iloc[0])}).", ""]
        table = rows[(rows["subset"] == "all") & ((rows["rule"] == "matched") | (rows["family"] == "floor")
                                                 | (rows["method"].isin(FOLD_LEARNED)))].copy()
        table["f1 (95% CI)"] = table.apply(interval_text, axis=1, metric="f1")
        table["auroc (95% CI)"] = table.apply(interval_text, axis=1, metric="auroc")
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
                      f"{best_auroc['method']} {interval_text(best_auroc, 'auroc')}; all-tokens floor F1 "
                      f"{all_tokens['f1'].iloc[0]:.3f}."]
            recipe = described.get(fold)
            plus = f"ExpNet+ ({recipe.name}: {recipe.describe()})" if recipe is not None else "ExpNet+"
            for method, label in ((EXPNET_PLUS, plus), (PAPER_EXPNET, "The paper's ExpNet")):
                learned = matched[matched["method"] == method]
                own = rows[(rows["subset"] == "all") & (rows["method"] == method) & (rows["rule"] == "own_calibrated")]
                if not len(learned):
                    continue
                row = learned.iloc[0]
                auroc_win = row["auroc_low"] > best_auroc["auroc_high"]
                lines.append(
                    f"- {label}: AUROC {interval_text(row, 'auroc')}, matched F1 {interval_text(row, 'f1')}, own-rule "
                    f"F1 (calibrated) "
                    f"{own['f1'].iloc[0]:.3f}: AUROC {'above' if row['auroc'] > best_auroc['auroc'] else 'below'} the best "
                    f"baseline's{' (intervals apart)' if auroc_win else ''}, matched F1 "
                    f"{'above' if row['f1'] > best_f1['f1'] else 'below'} the best baseline's, own-rule F1 "
                    f"{'above' if own['f1'].iloc[0] > all_tokens['f1'].iloc[0] else 'below'} the all-tokens floor.")
            lines += _by_prediction(rows, best_auroc["method"])
            lines.append("")
    lines += ["## Predicted and gold mode", "",
              "Predicted mode (the tables above) explains each example's predicted class; gold mode explains the "
              "class its human rationale supports (on a correct example the two are the same explanation, so gold "
              "mode recomputes only the mispredicted ones). The best baseline is chosen in each mode among the "
              "methods run on every example (integrated gradients, occlusion, LIME and KernelSHAP run on a sample "
              "only).", "", modes_table(metrics), ""]
    return "\n".join(lines)


def _by_prediction(rows: pd.DataFrame, baseline: str) -> list[str]:
    """One line: matched AUROC of ExpNet+, the paper's ExpNet and `baseline` on the correctly and the incorrectly
    predicted examples (the explained class is the wrong one on the latter)."""
    parts = [f"{subset}ly predicted (n = {n}): " + ", ".join(f"{m} {text}" for m, text in cells.items())
             for subset, n, cells in by_prediction(rows, baseline)]
    return [f"- AUROC by prediction: {'; '.join(parts)}."] if parts else []


def ablation_report(*ablations: pd.DataFrame):
    """All folds' ablation tables: one CSV, a Markdown page and a plot (data/08_reporting/expnet_plus_*)."""
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
             "mispredicted ones too); `selected`: the variant that rule picks without reading the held-out task "
             "(the main job trains one recipe, `main_recipe`, and none is selected there: docs/choices.md); "
             "each direction's AUROC is the mean over the variant's seeds, so a lucky seed does not pick it. A "
             "variant's explainer is the ensemble of its seeds (mean logit); `AUROC per seed`: each seed's own "
             "network on the same examples (mean ± sd, min-max). Intervals: bootstrap 95% over examples. Own rule: "
             "threshold calibrated on the training tasks' validation examples. `AUROC, mispredicted`: on the examples "
             "the classifier got wrong, whose explanation is of the other class than the human rationale's. "
             "`stack weights`: a convex stack's five largest weights. The `main job` row is the fold's own ExpNet+ as "
             "the main job scored it (its recipe, with the main job's seeds).", ""]
    for fold, rows in table.groupby("fold", sort=False):
        shown = rows.assign(**{
            "AUROC": rows.apply(interval_text, axis=1, metric="auroc"),
            "AUPRC": rows.apply(interval_text, axis=1, metric="auprc"),
            "F1 matched": rows.apply(interval_text, axis=1, metric="f1_matched"),
            "F1 own (calibrated)": rows.apply(interval_text, axis=1, metric="f1_own_calibrated"),
            "AUROC per seed": rows.apply(seed_spread, axis=1, metric="auroc"),
            "AUROC, mispredicted": rows.apply(interval_text, axis=1, metric="auroc_incorrect"),
            "stack weights": rows.get("stack_weights", pd.Series("", index=rows.index)).fillna(""),
        })
        lines += [f"## {fold}", "", markdown_table(shown[["variant", "description", "main_recipe", "selected",
                                                          "val_auroc", "AUROC",
                                                          "AUROC per seed", "AUROC, mispredicted", "AUPRC",
                                                          "F1 matched", "F1 own (calibrated)", "stack weights"]]),
                  ""]
    return table, "\n".join(lines), ablation_chart(table)


def training_grid_report(*grids: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """All folds' training grids (CSV) and a Markdown page: per fold every cell's leave-one-training-task-out
    validation AUROC in both modes (the choice reads the gold mode's), the cell chosen there, and its held-out AUROC
    and matched F1 in both modes, on all and on the mispredicted examples; then the cells' mean validation AUROC over
    the folds (what the main job's `train_on` is chosen by)."""
    table = pd.concat(grids, ignore_index=True)
    lines = ["# What ExpNet+ trains on: the training grid", "",
             "Each cell trains the fold's recipe pair (signed inputs, or magnitudes) on the training tasks' correct "
             "predictions or on all their rationale examples, with signals of the predicted class or of the class "
             "the rationale supports (on correct predictions alone the two are one). `validation`: mean AUROC of "
             "leave-one-training-task-out on the left-out training task's validation rationale examples, in each "
             "mode; `chosen`: the best gold-mode validation AUROC, on the training tasks only. The held-out columns "
             "are read after the choice. Intervals: bootstrap 95% over examples.", ""]
    for fold, rows in table.groupby("fold", sort=False):
        shown = rows.assign(**{
            f"{mode} {label}": rows.apply(interval_text, axis=1, metric=f"{mode}_{metric}")
            for mode in MODES for metric, label in (("auroc", "AUROC"), ("auroc_incorrect", "AUROC mispredicted"),
                                                    ("f1_matched", "F1"))},
            chosen=rows["selected"].map({True: "yes", False: ""}),
            **{f"validation {mode}": rows[f"val_auroc_{mode}"].map("{:.4f}".format) for mode in MODES})
        lines += [f"## {fold}", "", markdown_table(shown[[
            "examples", "signals", "inputs", "chosen", *(f"validation {mode}" for mode in MODES),
            *(f"{mode} {label}" for mode in MODES for label in ("AUROC", "AUROC mispredicted", "F1"))]]), ""]
    means = (table.groupby(["train_on", "inputs"], sort=False)[[f"val_auroc_{mode}" for mode in MODES]].mean()
             .reset_index())
    lines += ["## Over the folds (validation only)", "", markdown_table(means.round(4)), ""]
    return table, "\n".join(lines)


def transfer_report(*folds: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Every fold's transfer rows (CSV) and a Markdown page: per fold the transferred explainer beside this run's
    own explainers, whether it is at or above saliency, with intervals."""
    table = pd.concat(folds, ignore_index=True)

    lines = ["# Across architectures", "",
             "Each fold's shape-free ExpNet+ variant, trained on the other encoder's classifiers (`source_encoder`), "
             "explains this run's classifier of the fold's held-out task, scored on the same rationale test examples "
             "as this fold's own explainers (matched top-k budget at the source fold's rho; bootstrap 95% "
             "intervals).", ""]
    for fold, rows in table.groupby("fold", sort=False):
        transferred = rows[rows["role"] == "transferred"].iloc[0]
        saliency = rows[rows["method"] == "saliency"]
        verdict = ""
        if len(saliency):
            gap = transferred["auroc"] - saliency["auroc"].iloc[0]
            verdict = (f"Transferred AUROC {'at or above' if gap >= 0 else 'below'} saliency's by {abs(gap):.3f} "
                       f"({transferred['source_classifier']} -> {transferred['target_classifier']}).")
        shown = rows.assign(AUROC=rows.apply(interval_text, axis=1, metric="auroc"),
                            **{"F1 matched": rows.apply(interval_text, axis=1, metric="f1_matched")})
        lines += [f"## {fold}", "", verdict, "", markdown_table(shown[["method", "role", "n_examples", "AUROC",
                                                                       "F1 matched"]]), ""]
    return table, "\n".join(lines)
