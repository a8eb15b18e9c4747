"""Which examples to annotate: selection rules for `learned-attribution suggest`, measured on the few-shot curve.

For each fold and k, each rule picks k examples of the fold's few-shot pool (the held-out task's annotated
rationale_train and rationale_val examples, as `kedro run --pipeline fewshot` draws them) from one pass of the held-out
classifier; the pool is refit exactly as the curve refits a draw (that k's stored prior and the schedule, seeded as
draw 0) and scored on the held-out rationale test set (AUROC and matched F1, bootstrap 95% intervals). Beside them,
the curve's random draws (their mean and range). Rules:

- `uncertainty x diversity`: `suggest`'s rule, the classifier's uncertainty x the distance to the nearest pick in
  its [CLS] space (`core.selection.weighted_farthest_first`);
- `diversity`: the same traversal with every weight 1 (greedy k-center from the most typical text);
- `confidence x diversity`: weighted by the largest class probability instead;
- `uncertainty`: the k most uncertain texts.

Run after `kedro run --pipeline crosstask` and `kedro run --pipeline fewshot` (it reads both runs' outputs through
the project's catalog; minutes):

    python benchmarks/suggestion_rules.py            # ks 8 32 128
    python benchmarks/suggestion_rules.py --ks 32

Output: data/08_reporting/benchmarks/suggestion_rules.csv and the table printed.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from learned_attribution.core.models.learned import transformed_rows
from learned_attribution.core.models.learned.fewshot import fine_tune
from learned_attribution.core.selection import weighted_farthest_first
from learned_attribution.core.tasks import FOLD_PREFIX, TASKS
from learned_attribution.pipelines import token_table
from learned_attribution.services.evaluation.fewshot import annotated_pool, fewshot_settings
from learned_attribution.services.evaluation.protocol import learned_rationale_scores, scored_examples
from learned_attribution.services.reporting.tables import markdown_table
from learned_attribution.services.config import scoring_settings
from learned_attribution.services.suggest import pool_candidates

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "data" / "08_reporting" / "benchmarks"


def rule_picks(candidates, k: int) -> dict[str, list[int]]:
    """Each rule's k picks (indices into the candidates)."""
    uncertainty = candidates.uncertainty
    return {"uncertainty x diversity": weighted_farthest_first(candidates.features, uncertainty, k),
            "diversity": weighted_farthest_first(candidates.features, np.ones_like(uncertainty), k),
            "confidence x diversity": weighted_farthest_first(candidates.features, 1.0 - uncertainty, k),
            "uncertainty": list(np.argsort(-uncertainty, kind="stable")[:k])}


def fold_rows(catalog, params, task: str, ks: list[int]) -> list[dict]:
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
        rows.append({"fold": fold, "k": k, "rule": f"random ({len(draws)} draws: mean, lowest-highest)",
                     "auroc": draws["auroc"].mean(), "auroc_low": draws["auroc"].min(),
                     "auroc_high": draws["auroc"].max(), "f1_matched": draws["f1_matched"].mean(),
                     "f1_matched_low": draws["f1_matched"].min(), "f1_matched_high": draws["f1_matched"].max()})
        for rule, picked in rule_picks(candidates, k).items():
            ids = [candidates.ids[i] for i in picked]
            tuned = fine_tune(prior, pool_rows.of_examples(ids), refit.schedule)
            scores = learned_rationale_scores(tuned, test_rows, test, rho, scoring)
            chosen = pool.set_index(pool["example_id"].astype(str)).loc[ids]
            rows.append({"fold": fold, "k": k, "rule": rule,
                         **{m: scores[m] for m in ("auroc", "auroc_low", "auroc_high", "f1_matched", "f1_matched_low",
                                                   "f1_matched_high")},
                         "mispredicted_share": float((~chosen["correct"].astype(bool)).mean()),
                         "mean_uncertainty": float(candidates.uncertainty[picked].mean())})
        print(f"{fold} k={k} done", flush=True)
    return rows


def main() -> pd.DataFrame:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", type=int, nargs="+", default=[8, 32, 128])
    parser.add_argument("--output-dir", type=Path, default=OUT)
    args = parser.parse_args()
    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    bootstrap_project(ROOT)
    with KedroSession.create(project_path=ROOT) as session:
        context = session.load_context()
        rows = [row for task in TASKS for row in fold_rows(context.catalog, context.params, task, args.ks)]
    table = pd.DataFrame(rows)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.output_dir / "suggestion_rules.csv", index=False)
    shown = table.assign(**{
        "AUROC": [f"{a:.3f} [{lo:.3f}, {hi:.3f}]" for a, lo, hi in zip(table["auroc"], table["auroc_low"],
                                                                      table["auroc_high"])],
        "F1 matched": [f"{a:.3f} [{lo:.3f}, {hi:.3f}]" for a, lo, hi in
                       zip(table["f1_matched"], table["f1_matched_low"], table["f1_matched_high"])]})
    print(markdown_table(shown[["fold", "k", "rule", "AUROC", "F1 matched", "mispredicted_share",
                                "mean_uncertainty"]].round(3)))
    return table


if __name__ == "__main__":
    main()
