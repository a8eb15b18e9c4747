"""The track record of a selection rule, from a run's own tables: how well each rule's score of the ExpNet+
candidates predicts their held-out ranking, fold by fold (`expnet_plus_selection_<task>.csv`: validation AUROC per
training direction and their mean; `expnet_plus_ablation.csv`: every candidate's held-out AUROC).

Rules, each scoring a candidate with what the fold may read:
- `mean_validation`: the mean over the training directions of the validation AUROC (the rule the folds apply);
- `worst_direction`: the lowest of them (a candidate is as good as its worst transfer);
- `fixed_default`: the candidate's mean held-out AUROC on the *other* folds, whose held-out tasks are this fold's
  training tasks (one default, chosen without this fold's task; those folds' explainers did train on this fold's
  task, so it is a weaker guard than the two validation rules).
Per fold and rule: the Spearman correlation of the rule's scores with the held-out AUROCs over the candidates, the
candidate it picks and its held-out AUROC, and the regret against the best candidate in hindsight.
"""
from __future__ import annotations

from typing import Mapping

import pandas as pd

from .tables import table_lines

RULES = ("mean_validation", "worst_direction", "fixed_default")
TRACK_COLUMNS = ["fold", "rule", "n_candidates", "spearman", "picked", "picked_auroc", "best", "best_auroc", "regret"]


def rule_scores(selection: pd.DataFrame, held_out: pd.DataFrame, fold: str) -> pd.DataFrame:
    """One row per candidate of `fold`'s selection table: each rule's score (index: variant). `held_out` holds
    every fold's candidates (fold, variant, auroc)."""
    directions = selection[selection["direction"] != "mean"]
    scores = pd.DataFrame({
        "mean_validation": selection[selection["direction"] == "mean"].set_index("variant")["val_auroc"],
        "worst_direction": directions.groupby("variant", sort=False)["val_auroc"].min()})
    others = held_out[held_out["fold"] != fold]
    scores["fixed_default"] = others.groupby("variant")["auroc"].mean().reindex(scores.index)
    return scores


def track_record(ablation: pd.DataFrame, selections: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """`TRACK_COLUMNS`, one row per fold and rule. `selections`: each fold's selection table; the ablation's rows
    of those candidates give the held-out AUROC (its baseline and floor rows are not candidates)."""
    held_out = pd.concat([ablation[(ablation["fold"] == fold) & ablation["variant"].isin(table["variant"])]
                          for fold, table in selections.items()])[["fold", "variant", "auroc"]]
    rows = []
    for fold, selection in selections.items():
        truth = held_out[held_out["fold"] == fold].set_index("variant")["auroc"]
        scores = rule_scores(selection, held_out, fold).reindex(truth.index)
        best = truth.idxmax()
        for rule in RULES:
            score = scores[rule].dropna()
            if score.empty:  # a rule without its inputs (fixed_default with one fold) picks nothing
                continue
            picked = score.idxmax()
            rows.append({"fold": fold, "rule": rule, "n_candidates": len(score),
                         "spearman": score.rank().corr(truth[score.index].rank()), "picked": picked,
                         "picked_auroc": truth[picked], "best": best, "best_auroc": truth[best],
                         "regret": truth[best] - truth[picked]})
    return pd.DataFrame(rows, columns=TRACK_COLUMNS)


def rule_summary(track: pd.DataFrame) -> pd.DataFrame:
    """Per rule over the folds: mean Spearman, mean and largest regret, and how many folds it picked the best
    candidate in hindsight."""
    return (track.assign(picked_best=track["picked"] == track["best"])
            .groupby("rule", sort=False)
            .agg(n_folds=("fold", "size"), mean_spearman=("spearman", "mean"), mean_regret=("regret", "mean"),
                 max_regret=("regret", "max"), folds_picking_the_best=("picked_best", "sum"))
            .reset_index())


def never_best(track: pd.DataFrame, selections: Mapping[str, pd.DataFrame]) -> list[str]:
    """The candidates that were neither the best in hindsight nor any rule's pick on any fold."""
    seen = set(track["best"]) | set(track["picked"])
    candidates = dict.fromkeys(v for table in selections.values() for v in table["variant"])
    return [v for v in candidates if v not in seen]


def _signed(value: float) -> str:
    return "n/a" if pd.isna(value) else f"{value:+.2f}"  # undefined when a side is constant


def track_record_section(ablation: pd.DataFrame, selections: Mapping[str, pd.DataFrame]) -> str:
    """Markdown: the per-fold table, the summary per rule and the candidates that never win."""
    track = track_record(ablation, selections)
    per_fold = table_lines(["held-out fold", "rule", "Spearman (rule vs held-out AUROC)", "picks", "its AUROC",
                            "best in hindsight", "its AUROC", "regret"],
                           [[r.fold, r.rule, _signed(r.spearman), r.picked, f"{r.picked_auroc:.3f}", r.best,
                             f"{r.best_auroc:.3f}", f"{r.regret:.3f}"] for r in track.itertuples()])
    summary = table_lines(["rule", "folds", "mean Spearman", "mean regret", "largest regret", "folds picking the best"],
                          [[r.rule, r.n_folds, _signed(r.mean_spearman), f"{r.mean_regret:.3f}",
                            f"{r.max_regret:.3f}", r.folds_picking_the_best]
                           for r in rule_summary(track).itertuples()])
    losers = never_best(track, selections)
    return "\n".join([per_fold, "", summary, "",
                      f"Candidates never the best nor picked: {', '.join(losers) if losers else 'none'}."])
