"""Which examples to annotate: selection rules for `learned-attribution suggest`, measured on the few-shot curve.

For each fold and k, each rule picks k examples of the fold's few-shot pool (the held-out task's annotated
rationale_train and rationale_val examples, as `kedro run --pipeline fewshot` draws them) from one pass of the held-out
classifier; the picks are refit exactly as the curve refits a draw (that k's stored prior and the schedule) and scored
on the held-out rationale test set (AUROC and matched F1, bootstrap 95% intervals). Paired with the curve's random
draws: a rule's repeat r is refit with draw r's seed, and the seeded rules seed their k-means with r, so a rule's
difference from the random draw of the same repeat reads the picks, not the refit's seed. Rules:

- `uncertainty x diversity`: the classifier's uncertainty x the distance to the nearest pick in its [CLS] space
  (`core.picking.weighted_farthest_first`; `suggest`'s first rule);
- `diversity`: the same traversal with every weight 1 (greedy k-center from the most typical text);
- `confidence x diversity`: weighted by the largest class probability instead;
- `uncertainty`: the k most uncertain texts;
- `typical per cluster`: the most typical text of each of k k-means clusters (`core.picking.cluster_picks`,
  TypiClust; `suggest`'s rule);
- `random per cluster`: one seeded random text of each cluster (stratified sampling).

Run after `kedro run --pipeline crosstask` and `kedro run --pipeline fewshot` (it reads both runs' outputs through
the project's catalog; minutes):

    python benchmarks/suggestion_rules.py            # ks 8 32 128
    python benchmarks/suggestion_rules.py --ks 32 --tasks sst2 --rules "typical per cluster"

Output: data/08_reporting/benchmarks/suggestion_rules_draws.csv (one row per rule and repeat, written after each
fold), suggestion_rules.csv (per fold, k and rule: the repeats' means and the paired differences) and both tables
printed. About 12 minutes on 2 cores.
"""
from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from learned_attribution.core.models.learned import transformed_rows
from learned_attribution.core.models.learned.fewshot import fine_tune
from learned_attribution.core.picking import cluster_picks, weighted_farthest_first
from learned_attribution.core.tasks import FOLD_PREFIX, TASKS
from learned_attribution.pipelines import token_table
from learned_attribution.services.config import fewshot_settings
from learned_attribution.services.fewshot.choice import draw
from learned_attribution.services.fewshot.curve import annotated_pool
from learned_attribution.services.evaluation.protocol import scored_examples
from learned_attribution.services.evaluation.learned_scores import learned_rationale_scores
from learned_attribution.services.reporting.tables import markdown_table
from learned_attribution.services.config import scoring_settings
from learned_attribution.services.fewshot.suggest import pool_candidates

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "data" / "08_reporting" / "benchmarks"


RULES = ("uncertainty x diversity", "diversity", "confidence x diversity", "uncertainty", "typical per cluster",
         "random per cluster")


def rule_picks(candidates, k: int, repeat: int, rules: list[str]) -> dict[str, list[int]]:
    """Each rule's k picks (indices into the candidates) for draw `repeat` (the seeded rules' seed)."""
    uncertainty = candidates.uncertainty
    every = {"uncertainty x diversity": lambda: weighted_farthest_first(candidates.features, uncertainty, k),
             "diversity": lambda: weighted_farthest_first(candidates.features, np.ones_like(uncertainty), k),
             "confidence x diversity": lambda: weighted_farthest_first(candidates.features, 1.0 - uncertainty, k),
             "uncertainty": lambda: list(np.argsort(-uncertainty, kind="stable")[:k]),
             "typical per cluster": lambda: cluster_picks(candidates.features, k, repeat, "typical"),
             "random per cluster": lambda: cluster_picks(candidates.features, k, repeat, "random")}
    return {rule: every[rule]() for rule in rules}


METRICS = ("auroc", "auroc_low", "auroc_high", "f1_matched", "f1_matched_low", "f1_matched_high")


def fold_rows(catalog, params, task: str, ks: list[int], rules: list[str]) -> list[dict]:
    fold = f"{FOLD_PREFIX}{task}"
    settings = fewshot_settings(params["fewshot"], params["seed"], params["expnet_plus_variants"])
    scoring = scoring_settings(params["crosstask"], params["explained_layer"], params["seed"])
    bundle = catalog.load(f"{fold}.bundle")
    choice = catalog.load(f"fewshot_{task}.choice")
    priors = {"fold": bundle.learned["expnet_plus"], **choice.priors}
    signals = token_table(catalog.load(f"{task}.explainer_signals"))
    predictions = catalog.load(f"{task}.rationale_predictions")
    curve = catalog.load(f"fewshot_{task}.curve")
    classifier = catalog.load(f"{task}.classifier")
    rho = float(bundle.card["rho"])
    test = scored_examples(predictions, scoring)
    pool = annotated_pool(predictions, settings.pool_roles, list(test["example_id"]))
    candidates = pool_candidates(classifier, pool, scoring.batch_size)
    labelled = signals[signals["example_id"].isin(set(pool["example_id"]))]
    test_signals = signals[signals["example_id"].isin(set(test["example_id"]))]
    rows = []
    for k in ks:
        if k > len(pool):
            continue
        _, refit = choice.refit_for(k)
        prior = priors[refit.prior]
        pool_rows, test_rows = transformed_rows(prior, labelled), transformed_rows(prior, test_signals)
        draws = curve[(curve["role"] == "few-shot") & (curve["k"] == k)]
        indexed = pool.set_index(pool["example_id"].astype(str))
        for _, random_draw in draws.iterrows():
            repeat = int(random_draw["repeat"])
            ids = draw([str(i) for i in pool["example_id"]], k, repeat, refit.schedule.seed)
            rows.append({"fold": fold, "k": k, "rule": "random", "repeat": repeat,
                         **{m: random_draw[m] for m in METRICS},
                         "mispredicted_share": float((~indexed.loc[ids, "correct"].astype(bool)).mean())})
            schedule = replace(refit.schedule, seed=refit.schedule.seed + repeat)  # as the curve refits draw `repeat`
            for rule, picked in rule_picks(candidates, k, repeat, rules).items():
                ids = [candidates.ids[i] for i in picked]
                tuned = fine_tune(prior, pool_rows.of_examples(ids), schedule)
                scores = learned_rationale_scores(tuned, test_rows, test, rho, scoring)
                rows.append({"fold": fold, "k": k, "rule": rule, "repeat": repeat, **{m: scores[m] for m in METRICS},
                             "mispredicted_share": float((~indexed.loc[ids, "correct"].astype(bool)).mean()),
                             "mean_uncertainty": float(candidates.uncertainty[picked].mean())})
        print(f"{fold} k={k} done", flush=True)
    return rows


def summary(draws: pd.DataFrame) -> pd.DataFrame:
    """Per fold, k and rule: the repeats' mean AUROC and matched F1, and each rule's paired difference from the
    random draw refit with the same seed (mean over the repeats, and the repeats where the rule is above)."""
    random = draws[draws["rule"] == "random"].set_index(["fold", "k", "repeat"])
    rows = []
    for (fold, k, rule), group in draws.groupby(["fold", "k", "rule"], sort=False):
        paired = group.set_index(["fold", "k", "repeat"])
        gain = paired["auroc"] - random.loc[paired.index, "auroc"]
        gain_f1 = paired["f1_matched"] - random.loc[paired.index, "f1_matched"]
        rows.append({"fold": fold, "k": k, "rule": rule, "repeats": len(group), "auroc": group["auroc"].mean(),
                     "f1_matched": group["f1_matched"].mean(), "auroc_vs_random": gain.mean(),
                     "above_random": f"{int((gain > 0).sum())}/{len(gain)}", "f1_vs_random": gain_f1.mean(),
                     "mispredicted_share": group["mispredicted_share"].mean()})
    return pd.DataFrame(rows)


def main() -> pd.DataFrame:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", type=int, nargs="+", default=[8, 32, 128])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--rules", nargs="+", default=list(RULES), choices=list(RULES))
    parser.add_argument("--output-dir", type=Path, default=OUT)
    args = parser.parse_args()
    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    bootstrap_project(ROOT)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    with KedroSession.create(project_path=ROOT) as session:
        context = session.load_context()
        for task in args.tasks:
            rows += fold_rows(context.catalog, context.params, task, args.ks, args.rules)
            pd.DataFrame(rows).to_csv(args.output_dir / "suggestion_rules_draws.csv", index=False)
    table = summary(pd.DataFrame(rows))
    table.to_csv(args.output_dir / "suggestion_rules.csv", index=False)
    print(markdown_table(table.round(3)))
    overall = table[table["rule"] != "random"].groupby("rule", sort=False)[["auroc_vs_random", "f1_vs_random"]].mean()
    print("\nmean over the (fold, k) cells, paired with the random draw of the same refit seed:")
    print(markdown_table(overall.round(4).reset_index()))
    return table


if __name__ == "__main__":
    main()
