"""Benchmark: word-to-subword projection of a task's example table, pandas in one call vs Hugging Face
`datasets` `Dataset.map(batched=True)` (what the data pipeline runs), side by side in one process.

    python benchmarks/projection.py --task sst2 --rounds 3      # from the project root, after data_processing

Both drivers call the same `project_batch`; the Dataset timing includes `Dataset.from_pandas` and
`to_pandas` (the node's whole cost). Rounds alternate which driver goes first; the median is reported, and
the two outputs are checked equal. Output: data/08_reporting/benchmarks/projection.csv.
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> pd.DataFrame:
    import datasets

    from learned_attribution.core.models.loading import PACKAGED_ENCODER, load_tokenizer
    from learned_attribution.core.models.projection import project_dataset, project_to_subwords
    from learned_attribution.core.tasks import TASKS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="sst2", choices=list(TASKS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-rows", type=int, default=None, help="first N rows only (a quick run)")
    parser.add_argument("--data-root", type=Path, default=ROOT / "data")
    parser.add_argument("--output-dir", type=Path, default=ROOT / "data" / "08_reporting" / "benchmarks")
    args = parser.parse_args(argv)
    datasets.disable_progress_bars()
    source = args.data_root / "02_intermediate" / f"examples_{args.task}.parquet"
    if not source.exists():
        raise SystemExit(f"{source} is missing: run `kedro run --pipeline data_processing` first")
    examples = pd.read_parquet(source)
    if args.max_rows:
        examples = examples.iloc[:args.max_rows]
    tokenizer = load_tokenizer(PACKAGED_ENCODER)
    print(f"{args.task}: {len(examples)} examples from {source}", flush=True)

    def with_pandas():
        return project_to_subwords(examples, tokenizer, 128)

    def with_datasets():
        table = datasets.Dataset.from_pandas(examples, preserve_index=False)
        return project_dataset(table, tokenizer, 128).to_pandas()

    seconds = {"pandas": [], "datasets_map": []}
    outputs = {}
    for round_ in range(args.rounds):
        order = [("pandas", with_pandas), ("datasets_map", with_datasets)]
        for name, run in (order if round_ % 2 == 0 else order[::-1]):
            started = time.perf_counter()
            outputs[name] = run()
            seconds[name].append(time.perf_counter() - started)
    for column in ("input_ids", "token_labels", "truncated"):
        left = [None if v is None else list(v) if hasattr(v, "__len__") else v for v in outputs["pandas"][column]]
        right = [None if v is None else list(v) if hasattr(v, "__len__") else v for v in outputs["datasets_map"][column]]
        if left != right:
            raise SystemExit(f"the two drivers disagree on {column}")
    rows = [{"task": args.task, "driver": name, "n_examples": len(examples), "median_seconds": statistics.median(s),
             "examples_per_s": len(examples) / statistics.median(s), "rounds": len(s)} for name, s in seconds.items()]
    table = pd.DataFrame(rows)
    table["ratio_to_pandas"] = table["median_seconds"] / table.loc[table["driver"] == "pandas", "median_seconds"].iloc[0]
    args.output_dir.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.output_dir / "projection.csv", index=False)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    return table


if __name__ == "__main__":
    main()
