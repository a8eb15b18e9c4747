"""Benchmark: the peak memory of attention feature extraction written to a Parquet file, chunked and not.

Run from the project root with the virtualenv active:

    python benchmarks/extraction_memory.py            # default: 512 and 2,048 texts, 256 examples per chunk
    python benchmarks/extraction_memory.py --quick    # a tiny run (seconds)
    python benchmarks/extraction_memory.py --help

The extraction written chunk by chunk to a Parquet file (as the pipeline writes its parts), at two data sizes
(`--memory-sizes`, default N and 4N), with `--chunk-size` examples per chunk and, for contrast, as one chunk holding
everything, and a plain forward pass for the model's own working memory. Three measures:
- `peak_python_mib`: the `tracemalloc` peak during the run: Python objects and numpy/pandas buffers (the feature rows
  held in memory); it does not see torch's allocator or pyarrow's memory pool;
- `peak_rss_above_start_mib`: the process's resident memory sampled every 5 ms, peak minus its value just before
  the run (in a separate run without tracemalloc, freed malloc memory returned to the OS first);
- `process_max_rss_mib`: `getrusage` `ru_maxrss`, the whole process's lifetime peak.
`ratio_to_reference` is `peak_python_mib` over that of the same mode at the smallest size: about 1 means bounded,
about 4 means it grows with the data.

Output: data/08_reporting/benchmarks/extraction_memory.csv (section `memory`).
"""
from __future__ import annotations

import argparse
import functools
import os
import resource
import tempfile
import threading
import tracemalloc
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import pandas as pd
import torch

from harness import (Step, add_common_arguments, describe_texts, forward_steps, load_setup, positive_int,
                     save_feature_table, say, set_threads)

MODES = ("forward_plain", "extraction_chunked", "extraction_unchunked")


def current_rss_bytes() -> float:
    """Resident set size of this process now, from /proc/self/statm (Linux); NaN elsewhere."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return float("nan")


def process_max_rss_mib() -> float:
    """Peak RSS of the whole process so far (getrusage ru_maxrss, KiB on Linux): never goes down."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def release_freed_memory() -> None:
    """Hand memory that glibc's malloc keeps after frees back to the OS (no-op elsewhere), so that the RSS
    before a measurement is not inflated by what earlier measurements freed."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


class RssSampler:
    """Samples the process RSS every `interval` seconds in a thread; `peak` is the highest sample."""

    def __init__(self, interval: float = 0.005):
        self.interval = interval
        self.peak = current_rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, current_rss_bytes())

    def __enter__(self) -> "RssSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, current_rss_bytes())


@dataclass
class MemoryResult:
    n_examples: int
    chunk_size: int | None  # None: not an extraction
    output_rows: int
    peak_python_mib: float  # tracemalloc peak: Python objects and numpy/pandas buffers (not torch's allocator)
    peak_rss_above_start_mib: float  # sampled RSS peak minus RSS at the start (all allocators, approximate)
    process_max_rss_mib: float  # ru_maxrss after the run (process lifetime peak)


def write_features(model: torch.nn.Module, tokenizer, examples: pd.DataFrame, batch_size: int, layer: int,
                   chunk_size: int, output_path: Path) -> int:
    """Extract features for `examples` and write them chunk by chunk to one Parquet file (as the pipeline
    writes its parts); returns the number of token rows written. Only the current chunk is held."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from learned_attribution.core.models.features import extract_attention_features, frame_token_ids

    rows, writer = 0, None
    try:
        for chunk in extract_attention_features(model, examples, layer, batch_size, tokenizer.pad_token_id,
                                                frame_token_ids(tokenizer), tokenizer, chunk_size):
            table = pa.Table.from_pandas(chunk, preserve_index=False)
            if writer is None:
                writer = pq.ParquetWriter(output_path, table.schema)
            writer.write_table(table)
            rows += len(chunk)
            del chunk, table
    finally:
        if writer is not None:
            writer.close()
    return rows


def run_all(steps: Sequence[Step]) -> Callable[[], int]:
    """One callable running every step; it writes no feature rows, so it returns 0."""

    def run() -> int:
        for step in steps:
            step()
        return 0

    return run


def measure_memory(run: Callable[[], int], n_examples: int, chunk_size: int) -> MemoryResult:
    """Peak memory of `run` (returns the rows it wrote), run twice: once watching the process RSS, once
    under tracemalloc (separately, because tracemalloc's own bookkeeping would inflate the RSS)."""
    release_freed_memory()
    start_rss = current_rss_bytes()
    with RssSampler() as sampler:
        rows = run()
    release_freed_memory()
    tracemalloc.start()
    try:
        traced_rows = run()
        _, peak_python = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    if traced_rows != rows:
        raise RuntimeError(f"the two runs wrote {rows} and {traced_rows} rows; expected the same")
    return MemoryResult(n_examples, chunk_size, rows, peak_python / 2 ** 20, (sampler.peak - start_rss) / 2 ** 20,
                        process_max_rss_mib())


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_common_arguments(parser, rounds=None)
    parser.add_argument("--batch-size", type=positive_int, default=64,
                        help="inference batch size (the pipeline's features.batch_size)")
    parser.add_argument("--memory-sizes", type=positive_int, nargs="+", default=None,
                        help="data sizes measured (default: n-texts and 4 x n-texts)")
    parser.add_argument("--chunk-size", type=positive_int, default=256, help="examples per written chunk")
    args = parser.parse_args(argv)
    if args.quick:
        args.batch_size, args.chunk_size = 4, 4
        args.memory_sizes = args.memory_sizes or [4, 12]
    if args.memory_sizes is None:
        args.memory_sizes = [args.n_texts, 4 * args.n_texts]
    return args


def main(argv: Sequence[str] | None = None) -> pd.DataFrame:
    """Run the benchmark, print the table, save the CSV; returns the table."""
    args = parse_args(argv)
    threads = set_threads(args.threads)
    say(f"torch {torch.__version__}, {threads} intra-op threads")
    sizes = sorted(args.memory_sizes)
    setup = load_setup(args.task, sizes[-1], args.seed, args.source, args.data_root)
    say(f"model: {setup.model_source}\ntexts: {setup.text_source}; {describe_texts(setup.examples)}")
    say(f"memory of the extraction written to Parquet: sizes {list(args.memory_sizes)}, "
        f"chunked ({args.chunk_size} examples per chunk), unchunked (one chunk) for contrast, and a plain "
        "forward pass for the model's own working memory")
    pad = setup.tokenizer.pad_token_id
    with tempfile.TemporaryDirectory() as folder:
        results = {}
        for mode in MODES:
            for size in sizes:
                subset = setup.examples.iloc[:size]
                chunk_size = size if mode == "extraction_unchunked" else args.chunk_size
                if mode == "forward_plain":  # the model's own working memory, for comparison
                    run, chunk_size = run_all(forward_steps(setup.model, subset, args.batch_size, pad)), None
                else:
                    run = functools.partial(write_features, setup.model, setup.tokenizer, subset, args.batch_size,
                                            args.layer, chunk_size, Path(folder) / f"{mode}_{size}.parquet")
                result = measure_memory(run, size, chunk_size)
                results[(mode, size)] = result
                say(f"  {mode:<21} n={size:<6} rows={result.output_rows:<8} python peak "
                    f"{result.peak_python_mib:8.1f} MiB, RSS peak above start "
                    f"{result.peak_rss_above_start_mib:8.1f} MiB")
    rows = []
    for (mode, size), result in results.items():
        reference = results[(mode, sizes[0])]
        rows.append({"section": "memory", "method": mode, "n_examples": size,
                     "batch_size": args.batch_size, "reference": f"{mode} n={sizes[0]}",
                     "ratio_to_reference": result.peak_python_mib / reference.peak_python_mib,
                     "peak_python_mib": result.peak_python_mib,
                     "peak_rss_above_start_mib": result.peak_rss_above_start_mib,
                     "process_max_rss_mib": result.process_max_rss_mib,
                     "output_rows": result.output_rows if mode != "forward_plain" else None,
                     "max_tokens": int(setup.examples["input_ids"].iloc[:size].map(len).max()),
                     "threads": threads, "source": setup.source, "chunk_size": result.chunk_size})
    return save_feature_table(rows, args.output_dir, "extraction_memory.csv", report=print_memory)


def print_memory(table: pd.DataFrame) -> None:
    say("\nPeak memory of the extraction written to Parquet.\n"
        "python = tracemalloc peak: Python objects + numpy/pandas buffers (not torch's allocator);\n"
        "RSS above start = sampled resident memory minus its value just before the run, in a separate run "
        "without tracemalloc,\n  freed malloc memory returned to the OS first; it includes torch's working "
        "memory for the longest batch\n  (forward_plain: the model alone, no features);\n"
        "ratio = python peak / python peak of the same mode at the smallest size")
    say(table[["method", "n_examples", "chunk_size", "max_tokens", "output_rows", "peak_python_mib",
               "peak_rss_above_start_mib", "process_max_rss_mib", "ratio_to_reference"]]
        .to_string(index=False, float_format=lambda v: f"{v:.2f}"))


if __name__ == "__main__":
    main()
