"""How far a learned mix of the per-token signals could get on each task, and where the signals fail.

Reads a run's ExpNet+ input partitions (`data/04_feature/explainer_signals_<task>/`, written by
`kedro run --pipeline crosstask`) and, on each task's rationale test set, reports:
- every single cheap signal's mean per-example AUROC on all examples, the correctly predicted and the
  mispredicted ones (signals are of the predicted class, so the signed ones flip on the latter);
- the ceilings of the convex stack (ExpNet+'s `stack` variant) and of the network (the `saliency` variant: every
  signal set, per-task standardisation, pairwise loss), with signed inputs and with magnitudes, each fit on the
  test set's own rationales (all examples, or one prediction subset) and scored on them (optimistic upper
  bounds), and cross-fitted (fit on one seeded half of the examples, scored on the other, and the reverse):
  what in-task supervision with these inputs reaches. Neither is a result: an explainer trained on other
  tasks is not expected to reach them.
The test rationales are read here, which the pipeline never does for a held-out task: this is a diagnosis.

    python benchmarks/stack_ceiling.py [--data data] [--tasks hatexplain sst2 cola]   # default: every task

Output: data/08_reporting/benchmarks/stack_ceiling.csv and .md (and printed).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import yaml

from learned_attribution.core.metrics.plausibility import mean_example_auroc
from learned_attribution.core.models.learned import (TrainingSettings, Variant, fit_variant, score_examples,
                                                     validation_auroc)
from learned_attribution.core.models.learned.recipe import SIGNS
from learned_attribution.core.models.signals import columns_for
from learned_attribution.core.tasks import TASKS
from learned_attribution.services.config import training_settings, variant as parsed_variant
from learned_attribution.services.reporting.tables import markdown_table

ROOT = Path(__file__).resolve().parents[1]


def single_signals(table: pd.DataFrame, n_heads: int, n_layers: int) -> pd.DataFrame:
    """The cheap signals as baselines read them (one column each)."""
    heads = range(n_heads)
    axg = table[[f"axg_h{h}" for h in heads]]
    return pd.DataFrame({
        "saliency (embedding gradient norm)": table["embedding_grad_norm"],
        "input x gradient (signed)": table["embedding_grad_x_input"],
        "|input x gradient|": table["embedding_grad_x_input"].abs(),
        "layer gradient norm": table["layer_grad_norm"],
        "layer gradient x input (signed)": table["layer_grad_x_input"],
        "|layer gradient x input|": table["layer_grad_x_input"].abs(),
        "attention x gradient (signed, head mean)": axg.mean(axis=1),
        "|attention x gradient| (head mean)": axg.abs().mean(axis=1),
        "raw attention (head mean)": table[[f"cls_to_tok_h{h}" for h in heads]].mean(axis=1),
        f"AFN norm, layer {2 * n_layers // 3}": table[f"afn_norm_l{2 * n_layers // 3}"],
    }, index=table.index)


def example_auroc(table: pd.DataFrame, score: pd.Series) -> float:
    groups = table.assign(score=score).groupby("example_id", sort=False)
    return mean_example_auroc([g["score"].to_numpy() for _, g in groups], [g["token_label"].to_numpy() for _, g in groups])


def cross_fitted_auroc(variant: Variant, table: pd.DataFrame, task: str, columns: list[str],
                       training: TrainingSettings, seed: int = 0) -> float:
    """Mean per-example AUROC when the examples are split in two seeded halves and each half is scored by `variant`
    fit on the other: what in-task supervision with these inputs reaches, without scoring its own training data."""
    ids = table["example_id"].unique()
    halves = np.array_split(np.random.default_rng(seed).permutation(ids), 2)
    scores, gold = [], []
    for fit_ids, scored_ids in (halves, halves[::-1]):
        fit_rows, scored_rows = (table[table["example_id"].isin(i)] for i in (fit_ids, scored_ids))
        model = fit_variant(variant, fit_rows, fit_rows, target=scored_rows, stats_tables={task: table},
                            columns=columns, rho=0.2, settings=training)
        scored = score_examples(model, scored_rows)
        labels = scored_rows.groupby("example_id", sort=False)["token_label"].apply(np.asarray)
        scores += list(scored["scores"])
        gold += [labels[i] for i in scored["example_id"]]
    return mean_example_auroc(scores, gold)


def ceiling(task: str, table: pd.DataFrame, settings: dict, catalogue: dict, n_heads: int, n_layers: int,
            seed: int = 13) -> list[dict]:
    """`settings`: the pipeline's `crosstask.expnet_plus` block (its training loop); `catalogue`: the ExpNet+ variant
    catalogue `expnet_plus_variants`, whose `stack` and `saliency` recipes are fit here."""
    subsets = {"all": table, "correct": table[table["correct"]], "incorrect": table[~table["correct"]]}
    counts = {subset: rows["example_id"].nunique() for subset, rows in subsets.items()}
    rows = []
    signals = single_signals(table, n_heads, n_layers)
    for name in signals:
        rows.append({"task": task, "what": name, **{f"auroc_{subset}": example_auroc(part, signals.loc[part.index, name])
                                                    for subset, part in subsets.items()}})
    training = training_settings(settings["training"], seed, "crosstask.expnet_plus.training")
    for label, name in (("convex stack", "stack"), ("network (every signal set)", "saliency")):
        for signs in SIGNS:
            variant = parsed_variant(f"{name}_{signs}", {**catalogue[name], "signs": signs},
                                     f"expnet_plus_variants.{name}")
            columns = columns_for(variant.feature_sets, n_heads, n_layers)
            present = {subset: part for subset, part in subsets.items() if len(part)}
            in_sample = {subset: validation_auroc(fit_variant(variant, part, part, target=part,
                                                              stats_tables={task: part}, columns=columns, rho=0.2,
                                                              settings=training), part)
                         for subset, part in present.items()}
            rows.append({"task": task, "what": f"CEILING: {label}, {signs} inputs, fit and scored on these rationales",
                         **{f"auroc_{subset}": value for subset, value in in_sample.items()}})
            rows.append({"task": task, "what": f"IN-TASK: {label}, {signs} inputs, cross-fitted on two halves",
                         **{f"auroc_{subset}": cross_fitted_auroc(variant, part, task, columns, training)
                            for subset, part in present.items()}})
    return [{**row, **{f"n_{subset}": count for subset, count in counts.items()}} for row in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT / "data")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=13, help="the training loop's seed")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    settings = yaml.safe_load((ROOT / "conf/base/parameters_crosstask.yml").read_text())["crosstask"]["expnet_plus"]
    catalogue = yaml.safe_load((ROOT / "conf/base/parameters_expnet_plus_variants.yml").read_text())[
        "expnet_plus_variants"]
    rows = []
    for task in args.tasks:
        parts = sorted((args.data / "04_feature" / f"explainer_signals_{task}").glob("*.parquet"))
        if not parts:
            raise SystemExit(f"no signal partitions in {args.data / '04_feature' / f'explainer_signals_{task}'}: "
                             "run `kedro run --pipeline crosstask` first")
        table = pd.concat([pd.read_parquet(p) for p in parts], ignore_index=True)
        table = table[table["role"] == "rationale_test"].reset_index(drop=True)
        n_heads = sum(c.startswith("cls_to_tok_h") for c in table.columns)
        n_layers = sum(c.startswith("raw_attention_l") for c in table.columns)
        rows += ceiling(task, table, settings, catalogue, n_heads, n_layers, args.seed)
        print(f"{task}: done", flush=True)
    result = pd.DataFrame(rows)
    out = args.data / "08_reporting" / "benchmarks"
    out.mkdir(parents=True, exist_ok=True)
    result.to_csv(out / "stack_ceiling.csv", index=False)
    (out / "stack_ceiling.md").write_text(markdown_table(result) + "\n")
    print(markdown_table(result))


if __name__ == "__main__":
    main()
