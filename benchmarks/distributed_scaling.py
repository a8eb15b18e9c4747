"""Benchmark: distributed attribution on Dask. One expensive method on the same M examples in
process and on local Dask clusters of 1 and 2 workers (one thread each): examples/s and speed-up.

Run from the project root with the virtualenv active, with nothing else running:

    python benchmarks/distributed_scaling.py                   # LIME (200 samples) on 64 texts
    python benchmarks/distributed_scaling.py --method kernel_shap --n-texts 128 --workers 1 2 4
    python benchmarks/distributed_scaling.py --quick           # a tiny run (seconds), numbers mean little

The in-process reference runs with `--threads-per-worker` torch threads, as each worker does, so the ratios say
what adding workers buys on this machine. The examples, batches and seeds are the same in every
configuration, and the script checks that every configuration returns the in-process scores (largest
absolute difference in the table). A cluster's start-up is not timed: it is paid once per node, not per
example.

Outputs: data/08_reporting/benchmarks/distributed_scaling.csv and distributed_scaling.png.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from harness import (DEFAULT_OUTPUT_DIR, PROJECT_ROOT, describe_texts, load_setup, parse_setting, positive_int, say,
                     saved_figure, write_table)

COLUMNS = ["configuration", "workers", "threads_per_worker", "method", "n_examples", "seconds", "examples_per_s",
           "speedup_vs_in_process", "max_abs_difference_vs_in_process", "settings"]


def scores_by_example(run) -> dict[str, np.ndarray]:
    return {r.example_id: np.asarray(r.scores) for r in run.scores.itertuples()}


def main(argv: Sequence[str] | None = None) -> pd.DataFrame:
    from learned_attribution.core.explainers import build_method
    from learned_attribution.core.explainers.apply import explain_examples
    from learned_attribution.core.models.loading import TrainedClassifier
    from learned_attribution.core.models.runner import predict_proba
    from learned_attribution.services.distributed import DaskSettings, dask_client, explain_on_dask

    args = parse_args(argv)
    settings = {"n_samples": 200, "seed": 0} if args.method in ("lime", "kernel_shap") else {}
    if args.quick and args.method in ("lime", "kernel_shap"):
        settings["n_samples"] = 20
    settings.update({key: value for method, key, value in args.settings if method == args.method})
    torch.set_num_threads(args.threads_per_worker)
    setup = load_setup(args.task, args.n_texts, args.seed, args.source, args.data_root)
    examples = setup.examples.reset_index(drop=True)
    examples["predicted"] = predict_proba(setup.model, list(examples["input_ids"]), args.batch_size,
                                          setup.tokenizer.pad_token_id).argmax(1)
    classifier = TrainedClassifier(setup.model, setup.tokenizer, setup.model_path)
    say(f"{args.method} {settings} on {describe_texts(examples)}; model: {setup.model_source}")

    rows = []
    started = time.perf_counter()
    reference = explain_examples(setup.model, setup.tokenizer, examples,
                                 {args.method: build_method(args.method, **settings)}, args.batch_size)
    seconds = time.perf_counter() - started
    rows.append({"configuration": f"in process ({args.threads_per_worker} thread)", "workers": 0, "seconds": seconds,
                 "max_abs_difference_vs_in_process": 0.0})
    say(f"  in process: {len(examples) / seconds:.2f} examples/s")
    expected = scores_by_example(reference)
    for workers in args.workers:
        dask = DaskSettings("local", n_workers=workers, threads_per_worker=args.threads_per_worker, methods=None,
                            batches_per_task=1, retries=0, device="cpu")
        with dask_client(dask) as client:
            # Warm-up: each worker loads the classifier once (paid once per node, not per example).
            explain_on_dask(client, classifier, examples.iloc[:workers * args.batch_size],
                            {args.method: settings}, args.batch_size, dask)
            started = time.perf_counter()
            run = explain_on_dask(client, classifier, examples, {args.method: settings}, args.batch_size, dask)
            seconds = time.perf_counter() - started
        got = scores_by_example(run)
        difference = max(float(np.abs(got[i] - expected[i]).max()) if len(got[i]) else 0.0 for i in expected)
        rows.append({"configuration": f"dask LocalCluster {workers}x{args.threads_per_worker}", "workers": workers,
                     "seconds": seconds, "max_abs_difference_vs_in_process": difference})
        say(f"  {workers} worker(s): {len(examples) / seconds:.2f} examples/s (max |diff| {difference:.1e})")
    table = pd.DataFrame(rows)
    table["threads_per_worker"] = args.threads_per_worker
    table["method"] = args.method
    table["n_examples"] = len(examples)
    table["examples_per_s"] = table["n_examples"] / table["seconds"]
    table["speedup_vs_in_process"] = table["examples_per_s"] / table["examples_per_s"].iloc[0]
    table["settings"] = " ".join(f"{k}={v}" for k, v in settings.items())
    table = table[COLUMNS]
    write_table(table, args.output_dir, "distributed_scaling.csv")
    save_chart(table, args.output_dir / "distributed_scaling.png")
    say(table.round(3).to_string(index=False))
    return table


def save_chart(table: pd.DataFrame, path: Path) -> None:
    with saved_figure(path, (7, 3.5)) as (_, axis):
        bars = axis.bar(table["configuration"], table["examples_per_s"], color="#4c72b0")
        for bar, speedup in zip(bars, table["speedup_vs_in_process"]):
            axis.annotate(f"{speedup:.2f}x", (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center",
                          va="bottom", fontsize=9)
        axis.set_ylabel("examples / s")
        axis.set_title(f"{table['method'].iloc[0]} on {table['n_examples'].iloc[0]} examples: in process vs Dask "
                       "workers", fontsize=10)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    from learned_attribution.core.tasks import TASKS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--method", default="lime", help="a registered baseline")
    parser.add_argument("--task", default="sst2", choices=list(TASKS))
    parser.add_argument("--source", default="auto", choices=["auto", "pipeline", "raw"],
                        help="auto: the pipeline's classifier and texts if present, else the packaged encoder "
                             "with a random head on the raw SST-2 test sentences")
    parser.add_argument("--n-texts", type=positive_int, default=64)
    parser.add_argument("--batch-size", type=positive_int, default=16)
    parser.add_argument("--workers", type=positive_int, nargs="+", default=[1, 2])
    parser.add_argument("--threads-per-worker", type=positive_int, default=1)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--set", dest="settings", type=parse_setting, action="append", default=[],
                        metavar="METHOD.KEY=VALUE")
    parser.add_argument("--data-root", type=Path, default=PROJECT_ROOT / "data")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT_DIR)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.n_texts, args.batch_size = 8, 2
    return args


if __name__ == "__main__":
    main()
