"""Which examples to annotate: selection rules for `learned-attribution suggest`, chosen on validation pools.

For each fold and k, each rule picks k examples of the fold's pick pool (the held-out task's annotated
`rationale_train` examples) from one pass of the held-out classifier; the picks are refit as the few-shot curve refits
a draw (that k's prior, chosen on the training tasks, and the schedule) and scored on the held-out task's
**rationale validation examples** (`rationale_val`, held out from the pool): never on the rationale test set, which
only the curve's reports read. Paired with seeded random draws of the same pool: repeat r of every rule and of the
random draw is refit with the same seed, and the seeded rules seed their k-means with r, so a rule's difference from
the random draw of its repeat reads the picks, not the refit's seed. Rules:

- `uncertainty x diversity`: the classifier's uncertainty x the distance to the nearest pick in its [CLS] space
  (`core.picking.weighted_farthest_first`);
- `diversity`: the same traversal with every weight 1 (greedy k-center from the most typical text);
- `confidence x diversity`: weighted by the largest class probability instead;
- `uncertainty`: the k most uncertain texts;
- `typical per cluster`: the most typical text of each of k k-means clusters (`core.picking.cluster_picks`,
  TypiClust);
- `random per cluster`: one seeded random text of each cluster (stratified sampling).

The choice (`choose`): the rule with the largest mean paired AUROC gain over the random draws, kept when that gain is
above twice its standard error over the (fold, k, repeat) pairs; otherwise `suggest` draws a seeded random sample
(`services/fewshot/suggest.py`, `SUGGESTION_RULE`).

Run after `kedro run --pipeline crosstask` and `kedro run --pipeline fewshot` (it reads both runs' outputs through
the project's catalog: the folds, the few-shot priors per k; minutes):

    python benchmarks/suggestion_rules.py            # ks 8 32 128, every rule, five repeats
    python benchmarks/suggestion_rules.py --ks 32 --tasks sst2 --rules "typical per cluster"

Output (the record, committed: docs/record/): suggestion_rules_draws.csv (one row per fold, k, rule and repeat,
written after each fold), suggestion_rules.csv (per fold, k and rule: the repeats' means and the paired differences)
and suggestion_rules_choice.csv (per rule: the mean paired gains, their standard errors, the choice); tables printed.
"""
from __future__ import annotations

import argparse
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from learned_attribution.core.models.runner import kernels_description
from learned_attribution.services.record.runs import run_identity, write_benchmark_run

from learned_attribution.core.models.learned import transformed_rows
from learned_attribution.core.models.learned.fewshot import fine_tune
from learned_attribution.core.picking import cluster_picks, weighted_farthest_first
from learned_attribution.core.tasks import FOLD_PREFIX, TASKS
from learned_attribution.pipelines import token_table
from learned_attribution.services.config import fewshot_settings
from learned_attribution.services.fewshot.choice import draw
from learned_attribution.services.fewshot.curve import annotated_pool
from learned_attribution.services.evaluation.protocol import rationale_test_examples
from learned_attribution.services.evaluation.learned_scores import learned_rationale_scores
from learned_attribution.services.reporting.tables import markdown_table
from learned_attribution.services.config import scoring_settings
from learned_attribution.services.fewshot.suggest import pool_candidates

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "record"
VALIDATION_ROLE = "rationale_val"  # scored on: held out from the pool the rules pick from
RANDOM = "random"


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
    """Every rule's and the random draws' refits of one fold, scored on the held-out task's validation examples."""
    fold = f"{FOLD_PREFIX}{task}"
    settings = fewshot_settings(params["fewshot"], params["seed"], params["expnet_plus_variants"])
    scoring = scoring_settings(params["crosstask"], params["explained_layer"], params["seed"])
    bundle = catalog.load(f"{fold}.bundle")
    choice = catalog.load(f"fewshot_{task}.choice")
    priors = {"fold": bundle.learned["expnet_plus"], **choice.priors}
    signals = token_table(catalog.load(f"{task}.explainer_signals"))
    predictions = catalog.load(f"{task}.rationale_predictions")
    classifier = catalog.load(f"{task}.classifier")
    rho = float(bundle.card["rho"])
    validation = rationale_test_examples(predictions, role=VALIDATION_ROLE)
    pool = annotated_pool(predictions, [r for r in settings.pool_roles if r != VALIDATION_ROLE],
                          list(validation["example_id"]))
    candidates = pool_candidates(classifier, pool, scoring.batch_size)
    labelled = signals[signals["example_id"].isin(set(pool["example_id"]))]
    validation_signals = signals[signals["example_id"].isin(set(validation["example_id"]))]
    indexed = pool.set_index(pool["example_id"].astype(str))
    pool_ids = [str(i) for i in pool["example_id"]]
    rows = []
    for k in ks:
        if k > len(pool):
            continue
        _, refit = choice.refit_for(k)
        prior = priors[refit.prior]
        pool_rows, validation_rows = transformed_rows(prior, labelled), transformed_rows(prior, validation_signals)
        for repeat in range(settings.repeats):
            schedule = replace(refit.schedule, seed=refit.schedule.seed + repeat)  # as the curve refits draw `repeat`
            picks = {RANDOM: draw(pool_ids, k, repeat, refit.schedule.seed),
                     **{rule: [candidates.ids[i] for i in picked]
                        for rule, picked in rule_picks(candidates, k, repeat, rules).items()}}
            for rule, ids in picks.items():
                tuned = fine_tune(prior, pool_rows.of_examples(ids), schedule)
                scores = learned_rationale_scores(tuned, validation_rows, validation, rho, scoring)
                rows.append({"fold": fold, "k": k, "rule": rule, "repeat": repeat, "pool": len(pool),
                             "validation": len(validation), **{m: scores[m] for m in METRICS},
                             "mispredicted_share": float((~indexed.loc[ids, "correct"].astype(bool)).mean())})
        print(f"{fold} k={k} done", flush=True)
    return rows


def paired_gains(draws: pd.DataFrame) -> pd.DataFrame:
    """Each rule's row with its paired gains over the random draw of the same fold, k and repeat (`auroc_gain`,
    `f1_gain`)."""
    random = draws[draws["rule"] == RANDOM].set_index(["fold", "k", "repeat"])
    rules = draws[draws["rule"] != RANDOM].set_index(["fold", "k", "repeat"])
    return rules.assign(auroc_gain=rules["auroc"] - random.loc[rules.index, "auroc"].to_numpy(),
                        f1_gain=rules["f1_matched"] - random.loc[rules.index, "f1_matched"].to_numpy()).reset_index()


def summary(draws: pd.DataFrame) -> pd.DataFrame:
    """Per fold, k and rule (the random draws included): the repeats' mean AUROC and matched F1 on the validation
    examples, and each rule's mean paired difference from the random draws and the repeats where it is above."""
    gains = paired_gains(draws)
    rows = []
    for (fold, k, rule), group in draws.groupby(["fold", "k", "rule"], sort=False):
        own = gains[(gains["fold"] == fold) & (gains["k"] == k) & (gains["rule"] == rule)]
        rows.append({"fold": fold, "k": k, "rule": rule, "repeats": len(group), "auroc": group["auroc"].mean(),
                     "f1_matched": group["f1_matched"].mean(),
                     "auroc_vs_random": own["auroc_gain"].mean() if len(own) else 0.0,
                     "above_random": int((own["auroc_gain"] > 0).sum()) if len(own) else 0,
                     "f1_vs_random": own["f1_gain"].mean() if len(own) else 0.0,
                     "mispredicted_share": group["mispredicted_share"].mean()})
    return pd.DataFrame(rows)


def choose(draws: pd.DataFrame, noise: float = 2.0) -> pd.DataFrame:
    """Per rule over every (fold, k, repeat) pair: the mean paired AUROC and F1 gains over the random draws, their
    standard errors and the pairs above; `chosen` marks the rule `suggest` keeps: the largest mean AUROC gain, when it
    is above `noise` standard errors, else the seeded random sample (row `random`)."""
    gains = paired_gains(draws)
    table = gains.groupby("rule", sort=False).agg(
        pairs=("auroc_gain", "size"), auroc_gain=("auroc_gain", "mean"), auroc_gain_se=("auroc_gain", "sem"),
        above_random=("auroc_gain", lambda g: int((g > 0).sum())), f1_gain=("f1_gain", "mean"),
        f1_gain_se=("f1_gain", "sem")).reset_index()
    table = pd.concat([table, pd.DataFrame([{"rule": RANDOM, "pairs": table["pairs"].max(), "auroc_gain": 0.0,
                                             "auroc_gain_se": 0.0, "above_random": 0, "f1_gain": 0.0,
                                             "f1_gain_se": 0.0}])], ignore_index=True)
    best = table.iloc[table.loc[table["rule"] != RANDOM, "auroc_gain"].idxmax()]
    kept = best["rule"] if best["auroc_gain"] > noise * best["auroc_gain_se"] else RANDOM
    return table.assign(chosen=table["rule"] == kept)


def main(argv=None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", type=int, nargs="+", default=[8, 32, 128])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--rules", nargs="+", default=list(RULES), choices=list(RULES))
    parser.add_argument("--output-dir", type=Path, default=OUT)
    parser.add_argument("--env", default=None, help="the Kedro environment whose run it reads (default: local)")
    args = parser.parse_args(argv)
    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    bootstrap_project(ROOT)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    identity = run_identity("suggestion_rules", datetime.now(timezone.utc), kernels_description(torch.device("cpu"),
                                                                                                 False), ROOT,
                            env=args.env or "local")
    rows: list[dict] = []
    with KedroSession.create(project_path=ROOT, env=args.env) as session:
        context = session.load_context()
        for task in args.tasks:
            rows += fold_rows(context.catalog, context.params, task, args.ks, args.rules)
            pd.DataFrame(rows).to_csv(args.output_dir / "suggestion_rules_draws.csv", index=False,
                                      float_format="%.4f")
    draws = pd.DataFrame(rows)
    table = summary(draws)
    table.to_csv(args.output_dir / "suggestion_rules.csv", index=False, float_format="%.4f")
    chosen = choose(draws)
    chosen.to_csv(args.output_dir / "suggestion_rules_choice.csv", index=False, float_format="%.4f")
    # which run wrote the tables (the record's blocks name it), written last: complete or absent
    write_benchmark_run(args.output_dir, "suggestion_rules", identity,
                        ["suggestion_rules_draws.csv", "suggestion_rules.csv", "suggestion_rules_choice.csv"])
    print(markdown_table(table.round(3)))
    print("\nper rule over the (fold, k, repeat) pairs, paired with the random draw of the same refit seed:")
    print(markdown_table(chosen.round(4)))
    return chosen


if __name__ == "__main__":
    main()
