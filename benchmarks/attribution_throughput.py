"""Benchmark: the cost of an explanation. Every registered explainer beside a plain classification forward pass.

Run from the project root with the virtualenv active:

    python benchmarks/attribution_throughput.py            # default: 512 texts, 3 rounds
    python benchmarks/attribution_throughput.py --quick    # a tiny run (seconds)
    python benchmarks/attribution_throughput.py --no-batch1  # batched timings only (no one-text columns)
    python benchmarks/attribution_throughput.py --set lime.n_samples=1000 --set integrated_gradients.n_steps=50

In ONE process, on the same texts, batches and batch size, a plain classification forward pass
(`torch.inference_mode`, logits only) and every explainer in `learned_attribution.core.explainers.METHODS`
at its default settings (LIME and KernelSHAP 500 samples, Integrated Gradients 20 steps; `--set`
overrides) explain the classifier's predicted class (explainers_under_test.py: the learned ones' models). Every
method is timed batch by batch, each batch right next to a plain forward pass on the same batch (which of the two
goes first alternates), in several rounds (method order reversed every other round; harness.py); the table gives the
median over rounds of examples/s and of this paired ratio to the forward pass, so background load (other jobs on the
CPU) cancels. Entries `api:<method>` (`--no-api` skips them) go through the public API end to end on word lists.

Expensive methods (`--expensive`, default LIME, KernelSHAP, Integrated Gradients, Occlusion) run on the
first `--n-expensive` texts of the same seeded sample; throughput is per example, and their ratio is taken
against a forward pass on exactly those texts (reference `forward_subset`), so the comparison stays like
for like. A batch that takes less than `--min-seconds` is repeated until that long.

One text at a time (a served model answers requests of one or a few texts), in the same run after the batched
timings, the table's `*_batch1`, `*_one_text_*` and `batched_vs_alone` columns (one_text_cost.py; `--no-batch1`
skips them). The targets each explainer must meet are checked on the table (attribution_targets.py).

Outputs: data/08_reporting/benchmarks/attribution_throughput.csv, attribution_throughput.png (log-scale
bar chart) and attribution_targets.csv (the targets, checked).
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Sequence

import pandas as pd
import torch

from learned_attribution.core.models.runner import predict_proba, resolve_device

from attribution_steps import ModelCallTally, api_steps, classify_steps, explainer_steps, make_batches
from attribution_targets import save_chart, targets_table
from explainers_under_test import api_explainer, build_explainers, explainer_settings, learned_models
from harness import (PairedWorkload, add_common_arguments, describe_texts, load_setup, paired_rounds, parse_setting,
                     positive_int, say, set_threads, summarise, write_table)
from one_text_cost import batch1_columns

ATTRIBUTION_COLUMNS = ["method", "family", "n_examples", "batch_size", "examples_per_s", "reference",
                       "ratio_to_forward", "model_calls_per_example", "rounds", "threads", "settings", "error",
                       "source", "n_examples_batch1", "examples_per_s_batch1", "ratio_to_forward_batch1",
                       "api_one_text_s", "captum_one_text_s", "api_vs_captum_one_text", "captum_max_abs_difference",
                       "batched_vs_alone"]
BATCH1_COLUMNS = ATTRIBUTION_COLUMNS[ATTRIBUTION_COLUMNS.index("n_examples_batch1"):]
DEFAULT_EXPENSIVE = ("lime", "kernel_shap", "integrated_gradients", "occlusion")
QUICK_SETTINGS = {"lime": {"n_samples": 16}, "kernel_shap": {"n_samples": 16}, "integrated_gradients": {"n_steps": 4}}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_common_arguments(parser, rounds=3)
    parser.add_argument("--batch-size", type=positive_int, default=16,
                        help="explanation batch size for every method (the pipeline's crosstask.batch_size)")
    parser.add_argument("--methods", nargs="+", default=None,
                        help="explainers to run; every registered one when not given")
    parser.add_argument("--expensive", nargs="*", default=list(DEFAULT_EXPENSIVE),
                        help="methods measured on the first --n-expensive texts only")
    parser.add_argument("--n-expensive", type=positive_int, default=8, help="texts for the expensive methods")
    parser.add_argument("--set", dest="settings", type=parse_setting, action="append", default=[],
                        metavar="METHOD.KEY=VALUE", help="override an explainer setting (repeatable)")
    parser.add_argument("--expnet", type=Path, default=None,
                        help="the paper's ExpNet folder (default: data/06_models/heldout_<task>/expnet_paper; a quick one is "
                             "trained on random features if missing)")
    parser.add_argument("--no-api", dest="api", action="store_false",
                        help="skip the entries through the public API (api:expnet_paper, api:expnet_plus:<variant>, "
                             "api:saliency)")
    parser.add_argument("--device", default="cpu",
                        help="auto, cpu, cuda, cuda:N or mps: where the classifier and every method run")
    parser.add_argument("--min-seconds", type=float, default=0.25,
                        help="a batch that takes less is repeated until this long (method and forward pass alike)")
    parser.add_argument("--no-batch1", dest="batch1", action="store_false",
                        help="skip the one-text-at-a-time columns (batch 1, the captum one-text reference, IG alone)")
    parser.add_argument("--batch1-texts", type=positive_int, default=None,
                        help="texts (the first of the sample) explained one at a time; the expensive methods use "
                             "the first --n-expensive of them (default 32; 1 with --quick)")
    parser.add_argument("--min-seconds-batch1", type=float, default=0.0,
                        help="as --min-seconds, for the one-text timings (a text takes tens of milliseconds or more)")
    args = parser.parse_args(argv)
    if args.quick:
        args.n_texts, args.n_expensive, args.rounds, args.batch_size, args.min_seconds = 8, 2, 1, 4, 0.0
    if args.batch1_texts is None:
        args.batch1_texts = 1 if args.quick else 32
    return args


def explainer_overrides(args: argparse.Namespace, methods: Sequence[str]) -> dict[str, dict]:
    """Method -> settings that differ from its defaults (`--quick`'s, then every `--set`); an unknown method named
    anywhere on the command line stops the run."""
    names = list(args.methods or methods)
    unknown = [n for n in names + list(args.expensive) + [m for m, _, _ in args.settings] if n not in methods]
    if unknown:
        raise SystemExit(f"unknown explainer(s) {sorted(set(unknown))}; registered: {sorted(methods)}")
    overrides: dict[str, dict] = {}
    if args.quick:
        for method, settings in QUICK_SETTINGS.items():
            overrides.setdefault(method, {}).update(settings)
    for method, key, value in args.settings:
        overrides.setdefault(method, {})[key] = value
    return overrides


def main(argv: Sequence[str] | None = None) -> pd.DataFrame:
    """Run the benchmark, print the tables, save CSVs and the chart; returns the throughput table."""
    from learned_attribution.core.explainers import METHODS

    args = parse_args(argv)
    threads = set_threads(args.threads)
    names = list(args.methods or METHODS)
    overrides = explainer_overrides(args, list(METHODS))

    say(f"torch {torch.__version__}, {threads} intra-op threads")
    setup = load_setup(args.task, args.n_texts, args.seed, args.source, args.data_root)
    device = resolve_device(args.device)
    setup.model.to(device)
    say(f"device: {device}" + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""))
    examples = setup.examples
    subset = examples.iloc[:min(args.n_expensive, len(examples))]
    say(f"model: {setup.model_source}\ntexts: {setup.text_source}; {describe_texts(examples)}; "
        f"expensive methods ({', '.join(n for n in names if n in args.expensive)}) on the first {len(subset)} "
        f"({describe_texts(subset)})")

    # Explanations are of the predicted class.
    probabilities = predict_proba(setup.model, list(examples["input_ids"]), args.batch_size,
                                  setup.tokenizer.pad_token_id)
    predicted = dict(enumerate(probabilities.argmax(1).tolist()))
    batches = {"forward_all": make_batches(examples, args.batch_size, setup.tokenizer, predicted, device),
               "forward_subset": make_batches(subset, args.batch_size, setup.tokenizer, predicted, device)}

    learned = learned_models(names, setup.model, setup.task, args.data_root, args.seed, args.expnet)
    for name, note in learned.notes.items():
        say(f"{name}: {note}")
    explainers = build_explainers(names, overrides, learned, args.layer, setup.tokenizer)

    forward = {reference: classify_steps(setup.model, reference_batches)
               for reference, reference_batches in batches.items()}
    workloads: dict[str, PairedWorkload] = {}
    tallies: dict[str, ModelCallTally] = {}
    references: dict[str, str] = {}
    errors: dict[str, str] = {}
    say("warm-up: every method and the forward pass on their shortest batch")
    for step in forward.values():
        step[0]()
    for name, explainer in explainers.items():
        reference = "forward_subset" if name in args.expensive else "forward_all"
        try:
            explainer_steps(setup.model, explainer, batches[reference][:1], ModelCallTally())[0]()
        except Exception as error:  # noqa: BLE001 - one failing method must not stop the benchmark
            errors[name] = f"{type(error).__name__}: {error}"
            say(f"  {name} FAILED on warm-up: {errors[name]}")
            continue
        tallies[name] = ModelCallTally()
        workloads[name] = PairedWorkload(explainer_steps(setup.model, explainer, batches[reference], tallies[name]),
                                         forward[reference])
        references[name] = reference

    api_folder = tempfile.TemporaryDirectory()
    fold, entries, api_settings = None, {}, {}
    if args.api and learned.expnet_paper is not None and learned.expnet_plus:
        fold = api_explainer(setup, learned.expnet_paper, learned.expnet_plus, args.layer,
                             Path(api_folder.name) / "fold")
        batch_indices = [indices for indices, _ in batches["forward_all"]]
        entries = {"api:expnet_paper": ("expnet_paper", None), "api:saliency": ("saliency", None),
                   **{f"api:expnet_plus:{v}": ("expnet_plus", m) for v, m in learned.expnet_plus.items()}}
        for name, (method, variant) in entries.items():
            steps = api_steps(fold, method, variant, examples, batch_indices, setup.tokenizer)
            steps[0]()
            workloads[name] = PairedWorkload(steps, forward["forward_all"])
            references[name] = "forward_all"
            tallies[name] = ModelCallTally()
            api_settings[name] = (f"{variant.variant.describe()} " if variant is not None else "") + \
                "(public API: tokenise, classify, explain, words)"

    say(f"timing {len(workloads)} methods x {args.rounds} rounds, each batch beside a plain forward pass on the "
        f"same batch (batch size {args.batch_size})")
    summary = summarise(paired_rounds(workloads, args.rounds, args.min_seconds), references, "ratio_to_forward")
    one_text = batch1_columns(args, setup, explainers, list(workloads), entries, fold, predicted, device) \
        if args.batch1 else {}
    api_folder.cleanup()
    table = throughput_table(summary, explainers, tallies, api_settings, errors, one_text,
                             {"forward_all": len(examples), "forward_subset": len(subset)},
                             {"batch_size": args.batch_size, "threads": threads, "source": setup.source})
    for kind, note in learned.notes.items():
        if kind == "expnet_paper":
            table.loc[table["method"] == "expnet_paper", "settings"] += f" ({note})"
            continue
        rows_of = table["method"].str.startswith(f"{kind}:")
        table.loc[rows_of, "settings"] = [f"{explainers[m].model.variant.describe()} ({note})"
                                          for m in table.loc[rows_of, "method"]]

    csv_path = write_table(table, args.output_dir, "attribution_throughput.csv")
    targets = targets_table(table)
    write_table(targets, args.output_dir, "attribution_targets.csv")
    chart_path = args.output_dir / "attribution_throughput.png"
    save_chart(table, chart_path, f"{setup.model_source}; batch {args.batch_size}; {threads} thread(s)")
    print_report(table, targets, errors, bool(one_text), args.rounds, len(subset), len(examples))
    say(f"saved {csv_path}, {chart_path}, {args.output_dir / 'attribution_targets.csv'}")
    return table


def throughput_table(summary: pd.DataFrame, explainers: dict, tallies: dict[str, ModelCallTally],
                     api_settings: dict[str, str], errors: dict[str, str], one_text: dict[str, dict],
                     n_texts: dict[str, int], shared: dict) -> pd.DataFrame:
    """The benchmark's table, fastest first: a row per timed entry (`summary`), then one per explainer that failed,
    each with its one-text columns. `n_texts`: each reference's text count; `shared`: the columns of every row."""
    rows = []
    for record in summary.to_dict("records"):
        name = record["method"]
        if name in api_settings:
            # A learned explainer classifies in its own pass; a baseline needs a classification pass first.
            rows.append({**record, **shared, "family": "api", "n_examples": n_texts["forward_all"],
                         "model_calls_per_example": 2.0 if name == "api:saliency" else 1.0,
                         "settings": api_settings[name], "error": ""})
            continue
        is_forward = name.startswith("forward")
        explainer = explainers.get(name)
        rows.append({**record, **shared, "family": "reference" if is_forward else explainer.family,
                     "n_examples": n_texts[record["reference"]],
                     "model_calls_per_example": 1.0 if is_forward else tallies[name].per_example,
                     "settings": "" if is_forward else explainer_settings(explainer), "error": ""})
    for name, error in errors.items():
        rows.append({"method": name, "family": explainers[name].family, "n_examples": 0, **shared,
                     "examples_per_s": float("nan"), "reference": "", "ratio_to_forward": float("nan"),
                     "model_calls_per_example": float("nan"), "rounds": 0,
                     "settings": explainer_settings(explainers[name]), "error": error})
    for row in rows:
        row.update(one_text.get(row["method"], {}))
    table = pd.DataFrame(rows).reindex(columns=ATTRIBUTION_COLUMNS)
    return table.sort_values("examples_per_s", ascending=False, na_position="last").reset_index(drop=True)


def print_report(table: pd.DataFrame, targets: pd.DataFrame, errors: dict[str, str], one_text: bool, rounds: int,
                 n_subset: int, n_texts: int) -> None:
    say(f"\nThroughput (median of {rounds} rounds; ratio = median over rounds of the ratio to a forward pass "
        f"timed beside it, batch by batch;\nexpensive methods ran on {n_subset} of the {n_texts} texts: "
        "throughput is per example, their reference is forward_subset)")
    say(table[["method", "family", "n_examples", "examples_per_s", "ratio_to_forward", "model_calls_per_example"]]
        .to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    if one_text:
        say("\nOne text at a time (batch 1; ratio_to_forward_batch1 = beside a forward pass on the same one text; "
            "api/captum_one_text_s = seconds per text of tokenizer_batch + explain and of captum's own call, timed side "
            "by side; batched_vs_alone = IG's seconds per text alone / batched)")
        shown = table[table[BATCH1_COLUMNS[1]].notna()]
        say(shown[["method", *BATCH1_COLUMNS]].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    if errors:
        say(f"FAILED: {errors}")
    if len(targets):
        say("\nTargets (ExpNet vs a baseline = ratio of their ratios to the forward pass on their own texts)")
        say(targets.to_string(index=False, float_format=lambda v: f"{v:.3g}"))


if __name__ == "__main__":
    main()
