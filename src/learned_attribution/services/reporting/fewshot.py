"""The few-shot report: every fold's curve (CSV), a Markdown page with one table per fold and a chart of AUROC and
matched F1 against the number of annotated examples, the best baseline's interval as a band. Each metric is set
against the best baseline by that metric: AUROC against the best by AUROC, matched F1 against the best by matched F1
(`curve_summary`; two methods on some folds)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from ..fewshot.curve import curve_summary, prior_summary  # noqa: E402
from .tables import markdown_table, table_lines  # noqa: E402


def best_by_f1(row: pd.Series) -> str:
    """The best baseline by matched F1 of a summary row (a summary written before it was recorded: the one best
    baseline)."""
    return row.get("best_baseline_by_f1", row["best_baseline"])


def _suggested(row: pd.Series) -> str:
    """The suggested refit's AUROC / matched F1, each starred where its interval is apart above the best baseline's
    by that metric; empty at k = 0."""
    auroc = row.get("suggested_auroc", float("nan"))
    if auroc != auroc:
        return ""
    star = {m: "*" if bool(row.get(f"suggested_{m}_apart", False)) else "" for m in ("auroc", "f1_matched")}
    return f"{auroc:.3f}{star['auroc']} / {row['suggested_f1_matched']:.3f}{star['f1_matched']}"


def _cell(row: pd.Series, metric: str) -> str:
    return (f"{row[metric]:.3f} [{row[f'{metric}_low']:.3f}, {row[f'{metric}_high']:.3f}] "
            f"(draws {row[f'{metric}_draw_min']:.3f}-{row[f'{metric}_draw_max']:.3f})")


def fewshot_page(summary: pd.DataFrame, priors: pd.DataFrame) -> str:
    """One table per fold: per k the draws' mean AUROC and matched F1 with their mean bootstrap interval and the
    range over draws, the mispredicted examples' AUROC beside saliency's, the best baselines (by AUROC, by matched
    F1), and in how many draws the refit is above the best baseline by that metric with the intervals apart; then
    the smallest k where every draw is on both; last,
    the candidate priors each fold compared on its training tasks (`prior_summary`)."""
    lines = ["# Few-shot in-task", "",
             "A cross-task learned explainer (the prior: the fold's ExpNet+, or the variant named in `prior`, "
             "fitted on the same training tasks) refit on k annotated examples of the held-out task (drawn, seeded, "
             "from its rationale train and validation examples; never its test examples), scored on the fold's "
             "held-out rationale test set with the matched top-k budget; the prior of each k is chosen "
             "on the training tasks (last section). A cell is the draws' mean, its bootstrap 95% interval (averaged "
             "over the draws) and the lowest and highest draw; k = 0 is the fold's cross-task explainer. `suggested`: "
             "the refit on the k examples `learned-attribution suggest`'s rule picks from the same pool (* where its interval "
             "is apart above the best baseline's). `apart`: "
             "draws whose interval lies above the best baseline's, each metric against the best baseline by that metric "
             "(AUROC against the best by AUROC, matched F1 against the best by matched F1; on some folds two "
             "methods). A refit trains on the signals of the class each annotated rationale supports; `gold mode`: "
             "the same refits scored explaining each test example's gold class (predicted mode, every other "
             "column, explains the predicted class).", ""]
    for fold, rows in summary.groupby("fold", sort=False):
        first = rows.iloc[0]
        shown = pd.DataFrame({
            "k": rows["k"], "prior": rows["prior"], "draws": rows["draws"],
            "AUROC": rows.apply(_cell, axis=1, metric="auroc"),
            "AUROC apart": rows["auroc_draws_apart"].astype(str) + "/" + rows["draws"].astype(str),
            "F1 matched": rows.apply(_cell, axis=1, metric="f1_matched"),
            "F1 apart": rows["f1_matched_draws_apart"].astype(str) + "/" + rows["draws"].astype(str),
            "AUROC, mispredicted": rows["auroc_incorrect"],
            "saliency, mispredicted": rows["saliency_auroc_incorrect"],
            **({"gold mode: AUROC (best baseline)": [f"{r['gold_auroc']:.3f} ({r['baseline_gold_auroc']:.3f})"
                                                     for _, r in rows.iterrows()],
                "gold mode, mispredicted: AUROC (saliency)": [
                    f"{r['gold_auroc_incorrect']:.3f} ({r['saliency_gold_auroc_incorrect']:.3f})"
                    for _, r in rows.iterrows()]} if "gold_auroc" in rows else {}),
            "suggested: AUROC / F1": [_suggested(row) for _, row in rows.iterrows()]})
        winning = rows[(rows["auroc_draws_apart"] == rows["draws"]) & (rows["f1_matched_draws_apart"] == rows["draws"])]
        above = (f"{first['best_baseline']} on both AUROC and matched F1"
                 if best_by_f1(first) == first["best_baseline"] else
                 f"{first['best_baseline']} in AUROC and above {best_by_f1(first)} in matched F1")
        verdict = (f"Every draw above {above} with intervals apart from k = {int(winning['k'].min())}."
                   if len(winning) else f"At no k is every draw above {above} with intervals apart.")
        auroc = (f"AUROC {first['baseline_auroc']:.3f} [{first['baseline_auroc_low']:.3f}, "
                 f"{first['baseline_auroc_high']:.3f}]")
        f1 = (f"matched F1 {first['baseline_f1_matched']:.3f} [{first['baseline_f1_matched_low']:.3f}, "
              f"{first['baseline_f1_matched_high']:.3f}]")
        named = (f"{first['best_baseline']} (by AUROC and by matched F1), {auroc}, {f1}"
                 if best_by_f1(first) == first["best_baseline"] else
                 f"by AUROC {first['best_baseline']}, {auroc}; by matched F1 {best_by_f1(first)}, {f1}")
        lines += [f"## {fold}", "", f"Best baseline: {named}. {verdict}", "", markdown_table(shown), ""]
    lines += ["## The refit's prior, chosen on the training tasks", "",
              "For each training task V of a fold, each candidate prior (`fold`: the fold's own ExpNet+ variant; "
              "else a catalogue variant of `fewshot.priors`) and each k: the prior's variant fitted on the fold's "
              "other training tasks, refit on k of V's annotated rationale_train examples, and scored on V's rationale "
              "validation examples. `refit on k`: the mean validation AUROC over the training tasks and draws (and "
              "the lowest refit); `prior itself`: the same prior at k = 0; the fold refits the prior with the higher "
              "mean. Every refit takes the one schedule: "
              + ", ".join(sorted(priors["schedule"].unique())) + ".", ""]
    shown = pd.DataFrame({"fold": priors["fold"], "k": priors["k"], "prior": priors["variant"],
                          "refit on k": [f"{v:.3f} (lowest {low:.3f})"
                                         for v, low in zip(priors["val_auroc"], priors["val_auroc_min"])],
                          "prior itself": priors["prior_val_auroc"].map(lambda v: f"{v:.3f}"),
                          "chosen": priors["chosen"].map({True: "yes", False: ""})})
    lines += [markdown_table(shown), ""]
    return "\n".join(lines)


def fewshot_headline(summary: pd.DataFrame) -> str:
    """README's table: per fold the best baseline's AUROC and matched F1 (the best by AUROC and the best by matched
    F1, named apart where they differ), then per k the draws' mean AUROC / F1 with how many draws are above the best
    baseline by each metric with intervals apart on both."""
    ks = sorted(summary["k"].unique())
    rows = []
    for fold, group in summary.groupby("fold", sort=False):
        first, by_k = group.iloc[0], group.set_index("k")
        by_f1 = "" if best_by_f1(first) == first["best_baseline"] else f"{best_by_f1(first)} "
        cells = [f"{fold} ({first['best_baseline']} {first['baseline_auroc']:.3f} / "
                 f"{by_f1}{first['baseline_f1_matched']:.3f})"]
        for k in ks:
            if k not in by_k.index:
                cells.append("")
                continue
            row = by_k.loc[k]
            apart = int(min(row["auroc_draws_apart"], row["f1_matched_draws_apart"]))
            cells.append(f"{row['auroc']:.3f} / {row['f1_matched']:.3f} ({apart}/{int(row['draws'])})")
        rows.append(cells)
    columns = ["held-out task (best baseline AUROC / F1)", *(f"k = {k}" for k in ks)]
    return table_lines(columns, rows)


def fewshot_chart(summary: pd.DataFrame) -> plt.Figure:
    """AUROC and matched F1 against k (symlog axis, k = 0 at the left) per fold: the draws' mean with the mean
    interval as error bars, the value and interval of the best baseline by that metric as a line and band."""
    folds = list(dict.fromkeys(summary["fold"]))
    figure, axes = plt.subplots(2, len(folds), figsize=(4.2 * len(folds), 6.5), squeeze=False)
    for column, fold in enumerate(folds):
        rows = summary[summary["fold"] == fold].sort_values("k")
        for row_index, (metric, label) in enumerate((("auroc", "AUROC"), ("f1_matched", "matched F1"))):
            axis = axes[row_index][column]
            values = rows[metric].to_numpy()
            errors = [values - rows[f"{metric}_low"].to_numpy(), rows[f"{metric}_high"].to_numpy() - values]
            axis.errorbar(rows["k"], values, yerr=errors, marker="o", color="tab:red", capsize=3,
                          label="ExpNet+ refit on k")
            first = rows.iloc[0]
            baseline = first["best_baseline"] if metric == "auroc" else best_by_f1(first)
            axis.axhline(first[f"baseline_{metric}"], color="tab:blue", label=f"{baseline} (best baseline)")
            axis.axhspan(first[f"baseline_{metric}_low"], first[f"baseline_{metric}_high"], color="tab:blue",
                         alpha=0.15)
            axis.set_xscale("symlog", linthresh=8)
            axis.set_xlabel("annotated examples of the held-out task (k)")
            axis.set_ylabel(f"{label}, 95% CI")
            axis.set_title(fold)
            axis.legend(fontsize=7, loc="lower right")
    figure.tight_layout()
    return figure


def fewshot_report(*tables: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, str, plt.Figure]:
    """From the folds' curves followed by their prior choices (one of each per fold, in the same order): every curve
    row (CSV), the summary per fold and k (CSV), the priors compared per fold (CSV), the page and the chart."""
    if len(tables) % 2:
        raise ValueError(f"fewshot_report takes one curve and one prior choice per fold, got {len(tables)} tables")
    table = pd.concat(tables[:len(tables) // 2], ignore_index=True)
    summary = curve_summary(table)
    priors = prior_summary(pd.concat(tables[len(tables) // 2:], ignore_index=True))
    return table, summary, priors, fewshot_page(summary, priors), fewshot_chart(summary)


def suggestion_rules_block(summary: pd.DataFrame, choice: pd.DataFrame) -> str:
    """docs/fewshot.md's block from the committed record of `benchmarks/suggestion_rules.py`
    (docs/record/suggestion_rules.csv and suggestion_rules_choice.csv): per fold and k, the random draws' mean
    validation AUROC and each rule's with its mean paired difference from them; then per rule over every pair, the
    mean AUROC and F1 gains with their standard errors, the pairs above random, and the rule `suggest` keeps."""
    rules = [r for r in dict.fromkeys(summary["rule"]) if r != "random"]
    rows = []
    for (fold, k), group in summary.groupby(["fold", "k"], sort=False):
        by_rule = group.set_index("rule")
        rows.append([fold.removeprefix("heldout_"), k, f"{by_rule.at['random', 'auroc']:.3f}",
                     *(f"{by_rule.at[r, 'auroc']:.3f} ({by_rule.at[r, 'auroc_vs_random']:+.3f})" if r in by_rule.index
                       else "" for r in rules)])
    per_fold = table_lines(["held-out task", "k", "random draws", *rules], rows)
    kept = choice.loc[choice["chosen"], "rule"].iloc[0]
    overall = table_lines(
        ["rule", "pairs", "AUROC gain over random (SE)", "pairs above random", "F1 gain over random (SE)", "kept"],
        [[r.rule, int(r.pairs), f"{r.auroc_gain:+.4f} ({r.auroc_gain_se:.4f})", int(r.above_random),
          f"{r.f1_gain:+.4f} ({r.f1_gain_se:.4f})", "**kept**" if r.chosen else ""]
         for r in choice.itertuples()])
    said = (f"`suggest` keeps **{kept}**: its mean AUROC gain over the random draws is above twice its standard error."
            if kept != "random" else "No rule's mean AUROC gain over the random draws is above twice its standard "
            "error: `suggest` draws a **seeded random sample** of your texts, and says so.")
    return "\n".join([per_fold, "", overall, "", said])
