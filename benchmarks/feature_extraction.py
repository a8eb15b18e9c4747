"""Benchmark: attention feature extraction vs a plain forward pass, fp32 vs bf16, and extraction memory.

Run from the project root with the virtualenv active:

    python benchmarks/feature_extraction.py            # default: 512 texts, 5 interleaved rounds
    python benchmarks/feature_extraction.py --quick    # a tiny run (seconds)
    python benchmarks/feature_extraction.py --help

Measured in ONE process, side by side: every method is timed batch by batch, each batch right next to
the reference method on the same batch (which goes first alternates), in several rounds (method order
reversed every other round); the table gives medians over rounds of examples/s and of the paired ratio
to the reference. A CPU shared with other jobs then slows a method and its reference alike, so the
RATIOS stay meaningful even when the absolute numbers do not:

1. throughput: examples/s of a plain forward pass (`output_attentions=False`), of the same forward pass
   asking for attentions, and of `extract_attention_features` (forward with attentions + one row per
   token), on the same texts, batches and batch size; ratio of each to the plain forward pass;
2. precision: fp32 vs bf16-autocast forward pass and training step (forward, backward, AdamW step);
3. memory: peak memory of the extraction, written chunk by chunk to a Parquet file, at two data sizes,
   chunked and (for contrast) as one chunk holding everything.

The model is the task's fine-tuned classifier (data/06_models/classifier_<task>) and the texts are the
task's rationale examples (data/03_primary/tokenized_<task>.parquet) when the pipeline has produced
them; on a fresh clone it falls back to the packaged encoder with a random 2-class head and the SST-2
GLUE test sentences (data/01_raw/sst2/glue/test.tsv) tokenized with the packaged tokenizer.

`attribution_throughput.py` imports the loading and timing helpers from this file.
"""
from __future__ import annotations

import argparse
import copy
import csv
import functools
import math
import os
import resource
import tempfile
import threading
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd
import torch

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUTPUT_DIR = PROJECT_ROOT / "data" / "08_reporting" / "benchmarks"
RATIONALE_ROLES = ("rationale_test", "rationale_val", "rationale_train")
FEATURE_COLUMNS = ["section", "method", "n_examples", "batch_size", "examples_per_s", "reference",
                   "ratio_to_reference", "peak_python_mib", "peak_rss_above_start_mib", "process_max_rss_mib",
                   "output_rows", "max_tokens", "rounds", "threads", "source"]


def say(message: str) -> None:
    """Progress line on stdout, flushed at once (the runs are long and the CPU is shared)."""
    print(message, flush=True)


# ----------------------------------------------------------------------------------------------------
# What is measured: model, tokenizer and texts
# ----------------------------------------------------------------------------------------------------

@dataclass
class BenchmarkSetup:
    model: torch.nn.Module  # eager-attention sequence classifier, eval mode
    tokenizer: object
    examples: pd.DataFrame  # example_id, input_ids, token_labels (None when the texts have no rationale)
    model_source: str  # where the model came from, in words
    text_source: str  # where the texts came from, in words
    task: str
    model_path: Path | None = None  # the saved classifier folder (None: built in memory)


def raw_sst2_examples(tokenizer, path: Path, max_length: int) -> pd.DataFrame:
    """The SST-2 GLUE test sentences tokenized with `tokenizer` (no rationale: token_labels None)."""
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: neither pipeline output nor the raw SST-2 test file is "
                                "available (see data/01_raw/README.md)")
    table = pd.read_csv(path, sep="\t", quoting=csv.QUOTE_NONE, dtype=str, keep_default_na=False)
    if "sentence" not in table:
        raise ValueError(f"{path}: expected a 'sentence' column, found {list(table.columns)}")
    encoded = tokenizer(list(table["sentence"]), truncation=True, max_length=max_length)["input_ids"]
    return pd.DataFrame({"example_id": [f"sst2:test:glue{i + 2}" for i in range(len(table))],
                         "input_ids": encoded, "token_labels": [None] * len(table)})


def take_examples(pool: pd.DataFrame, n_texts: int, seed: int) -> tuple[pd.DataFrame, bool]:
    """A seeded sample of `n_texts` rows; when the pool is smaller, it is repeated (second value True)."""
    if n_texts < 1:
        raise ValueError(f"--n-texts must be at least 1, got {n_texts}")
    if len(pool) == 0:
        raise ValueError("no texts to benchmark: the example pool is empty")
    shuffled = pool.sample(frac=1.0, random_state=seed).reset_index(drop=True)
    repeats = math.ceil(n_texts / len(shuffled))
    sample = pd.concat([shuffled] * repeats, ignore_index=True).iloc[:n_texts].reset_index(drop=True)
    if repeats > 1:
        # Repeated texts need distinct ids (feature rows are keyed by example_id).
        sample["example_id"] = [f"{eid}#{i}" for i, eid in enumerate(sample["example_id"])]
    return sample, repeats > 1


def load_setup(task: str = "sst2", n_texts: int = 512, seed: int = 13, source: str = "auto",
               data_root: Path = PROJECT_ROOT / "data", max_length: int = 128) -> BenchmarkSetup:
    """Model and texts to benchmark (see module docstring). `source`: auto, pipeline or raw."""
    from learned_attribution.core.models.loading import PACKAGED_ENCODER, load_classifier, load_tokenizer, new_classifier

    if source not in ("auto", "pipeline", "raw"):
        raise ValueError(f"--source must be auto, pipeline or raw; got {source!r}")
    classifier_dir = data_root / "06_models" / f"classifier_{task}"
    table_path = data_root / "03_primary" / f"tokenized_{task}.parquet"
    use_pipeline = source == "pipeline" or (source == "auto" and (classifier_dir / "config.json").exists()
                                            and table_path.exists())
    if use_pipeline:
        for needed in (classifier_dir / "config.json", table_path):
            if not needed.exists():
                raise FileNotFoundError(f"--source pipeline: {needed} is missing; run `kedro run --pipeline crosstask`"
                                        " first or use --source raw")
        classifier = load_classifier(classifier_dir)
        model, tokenizer = classifier.model, classifier.tokenizer
        table = pd.read_parquet(table_path, columns=["example_id", "role", "input_ids", "token_labels"])
        pool = table[table["role"].isin(RATIONALE_ROLES)].drop(columns="role")
        pool["input_ids"] = pool["input_ids"].map(list)
        model_source = f"fine-tuned classifier {classifier_dir.relative_to(data_root.parent)}"
        text_source = f"{task} rationale examples from {table_path.relative_to(data_root.parent)}"
    else:
        torch.manual_seed(seed)  # the random classification head
        tokenizer = load_tokenizer(PACKAGED_ENCODER)
        model = new_classifier(PACKAGED_ENCODER, ("LABEL_0", "LABEL_1"))
        pool = raw_sst2_examples(tokenizer, data_root / "01_raw" / "sst2" / "glue" / "test.tsv", max_length)
        model_source = f"{PACKAGED_ENCODER} with a random 2-class head (no pipeline output used)"
        text_source = "SST-2 GLUE test sentences (data/01_raw/sst2/glue/test.tsv)"
        task = "sst2"
    model.eval()
    examples, repeated = take_examples(pool.reset_index(drop=True), n_texts, seed)
    if repeated:
        text_source += f" (only {len(pool)} available: repeated to reach {n_texts})"
    return BenchmarkSetup(model, tokenizer, examples, model_source, text_source, task,
                          classifier_dir if use_pipeline else None)


def describe_texts(examples: pd.DataFrame) -> str:
    lengths = examples["input_ids"].map(len)
    return f"{len(examples)} texts, {lengths.mean():.1f} tokens on average (min {lengths.min()}, max {lengths.max()})"


# ----------------------------------------------------------------------------------------------------
# Paired, interleaved timing
# ----------------------------------------------------------------------------------------------------

Step = Callable[[], int]  # processes one batch, returns the number of examples in it


@dataclass
class PairedWorkload:
    """A method's steps (one per batch) and the reference method's steps on the very same batches."""

    steps: list[Step]
    reference_steps: list[Step]

    def __post_init__(self) -> None:
        if len(self.steps) != len(self.reference_steps) or not self.steps:
            raise ValueError(f"a paired workload needs one reference step per step (and at least one); got "
                             f"{len(self.steps)} steps and {len(self.reference_steps)} reference steps")


def time_step(step: Step, min_seconds: float) -> tuple[float, int]:
    """Run `step` until `min_seconds` have passed (at least once); returns (seconds, examples) in total.
    Short steps are repeated so that one timing is not dominated by timer and scheduler noise."""
    examples, started = 0, time.perf_counter()
    while True:
        examples += step()
        elapsed = time.perf_counter() - started
        if elapsed >= min_seconds:
            return elapsed, examples


def paired_rounds(workloads: dict[str, PairedWorkload], rounds: int, min_seconds: float = 0.0,
                  label: str = "") -> pd.DataFrame:
    """Time each method batch by batch, each batch right next to the reference on the same batch.

    Which of the two goes first alternates from batch to batch and round to round, and the order of the
    methods is reversed every other round, so background load (other jobs on the CPU) hits a method and
    its reference alike. Returns one row per round and method: seconds, examples, reference_seconds,
    reference_examples, examples_per_s, reference_examples_per_s and ratio (examples_per_s over the
    reference's examples_per_s in the same round).
    """
    if rounds < 1:
        raise ValueError(f"--rounds must be at least 1, got {rounds}")
    names = list(workloads)
    rows = []
    for round_index in range(rounds):
        for name in names if round_index % 2 == 0 else names[::-1]:
            workload = workloads[name]
            totals = np.zeros(4)  # seconds, examples, reference seconds, reference examples
            for index, (step, reference) in enumerate(zip(workload.steps, workload.reference_steps)):
                if (index + round_index) % 2 == 0:
                    totals[2:] += time_step(reference, min_seconds)
                    totals[:2] += time_step(step, min_seconds)
                else:
                    totals[:2] += time_step(step, min_seconds)
                    totals[2:] += time_step(reference, min_seconds)
            seconds, examples, reference_seconds, reference_examples = totals
            row = {"round": round_index, "method": name, "seconds": seconds, "examples": int(examples),
                   "reference_seconds": reference_seconds, "reference_examples": int(reference_examples),
                   "examples_per_s": examples / seconds,
                   "reference_examples_per_s": reference_examples / reference_seconds}
            row["ratio"] = row["examples_per_s"] / row["reference_examples_per_s"]
            rows.append(row)
            say(f"  {label}round {round_index + 1}/{rounds} {name:<24} {row['examples_per_s']:9.3f} ex/s "
                f"({int(examples)} ex in {seconds:.2f} s); reference {row['reference_examples_per_s']:8.2f} ex/s; "
                f"ratio {row['ratio']:.4g}")
    return pd.DataFrame(rows)


def summarise_pairs(timings: pd.DataFrame, reference: str) -> pd.DataFrame:
    """Per method: median over rounds of examples/s and of the paired ratio to the reference. The
    reference's own row pools all its timings of a round (every pairing) and has ratio 1."""
    rows = []
    pooled = timings.groupby("round")[["reference_examples", "reference_seconds"]].sum()
    rows.append({"method": reference,
                 "examples_per_s": float((pooled["reference_examples"] / pooled["reference_seconds"]).median()),
                 "reference": reference, "ratio_to_reference": 1.0, "rounds": len(pooled)})
    for method, group in timings.groupby("method", sort=False):
        rows.append({"method": method, "examples_per_s": float(group["examples_per_s"].median()),
                     "reference": reference, "ratio_to_reference": float(group["ratio"].median()),
                     "rounds": len(group)})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------------
# Steps (one batch each)
# ----------------------------------------------------------------------------------------------------

def length_batches(examples: pd.DataFrame, batch_size: int) -> list[list[int]]:
    """The length-sorted batches the pipeline's extraction uses (same batches for every method)."""
    from learned_attribution.core.models.runner import iter_batches

    return list(iter_batches(list(examples["input_ids"]), batch_size))


def forward_steps(model: torch.nn.Module, examples: pd.DataFrame, batch_size: int, pad_token_id: int,
                  output_attentions: bool = False, bf16: bool = False) -> list[Step]:
    """Per batch: pad it and run one inference forward pass under `torch.inference_mode`."""
    from learned_attribution.core.models.runner import pad_batch

    ids = list(examples["input_ids"])

    def step_for(batch: list[int]) -> Step:
        def run() -> int:
            with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                input_ids, attention_mask = pad_batch([ids[i] for i in batch], pad_token_id)
                model(input_ids=input_ids, attention_mask=attention_mask, output_attentions=output_attentions)
            return len(batch)
        return run

    return [step_for(batch) for batch in length_batches(examples, batch_size)]


def extraction_steps(model: torch.nn.Module, tokenizer, examples: pd.DataFrame, batch_size: int,
                     layer: int) -> list[Step]:
    """Per batch: `extract_attention_features` on that batch's examples (forward with attentions, then one
    row per token, as a DataFrame that is dropped)."""
    from learned_attribution.core.models.features import extract_attention_features, frame_token_ids

    special = frame_token_ids(tokenizer)

    def step_for(batch: list[int]) -> Step:
        rows = examples.iloc[batch]

        def run() -> int:
            for _chunk in extract_attention_features(model, rows, layer, batch_size, tokenizer.pad_token_id,
                                                     special, tokenizer, chunk_size=len(rows)):
                pass
            return len(rows)
        return run

    return [step_for(batch) for batch in length_batches(examples, batch_size)]


def training_steps(model: torch.nn.Module, examples: pd.DataFrame, batch_size: int, pad_token_id: int,
                   bf16: bool) -> list[Step]:
    """Training steps as `fine_tune` takes them (autocast forward, fp32 loss, backward, clipping, AdamW),
    one per batch, on a private copy of the model so the measured model is left untouched."""
    from learned_attribution.core.models.classifier import training_step
    from learned_attribution.core.models.runner import pad_batch

    model = copy.deepcopy(model).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    loss_fn = torch.nn.CrossEntropyLoss()
    ids = list(examples["input_ids"])
    labels = torch.as_tensor(np.arange(len(ids)) % model.config.num_labels)  # any labels: only time counts

    def step_for(batch: list[int]) -> Step:
        def run() -> int:
            input_ids, attention_mask = pad_batch([ids[i] for i in batch], pad_token_id)
            training_step(model, list(model.parameters()), optimizer, loss_fn, input_ids, attention_mask,
                          labels[batch], bf16)
            return len(batch)
        return run

    return [step_for(batch) for batch in length_batches(examples, batch_size)]


# ----------------------------------------------------------------------------------------------------
# Memory
# ----------------------------------------------------------------------------------------------------

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


# ----------------------------------------------------------------------------------------------------
# Main
# ----------------------------------------------------------------------------------------------------

def warm_up(workloads: Sequence[PairedWorkload], skip: bool) -> None:
    """Run the first step of every workload and its reference once, untimed (first-call costs: allocator,
    kernels, lazy imports); skipped by --quick."""
    if not skip:
        for workload in workloads:
            workload.steps[0]()
            workload.reference_steps[0]()


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments shared by both benchmark scripts."""
    from learned_attribution.core.tasks import TASKS

    parser.add_argument("--task", default="sst2", choices=list(TASKS),
                        help="whose classifier and rationale texts to use when the pipeline output exists")
    parser.add_argument("--source", default="auto", choices=["auto", "pipeline", "raw"],
                        help="auto: pipeline output if present, else the packaged encoder with a random head on "
                             "the raw SST-2 test sentences; pipeline / raw force one of them")
    parser.add_argument("--n-texts", type=positive_int, default=512, help="texts to measure on")
    parser.add_argument("--rounds", type=positive_int, default=5, help="interleaved timing rounds (median taken)")
    parser.add_argument("--threads", type=positive_int, default=None,
                        help="torch intra-op threads (default: torch's default). On a CPU shared with other "
                             "jobs, 1 avoids threads spinning against each other")
    parser.add_argument("--seed", type=int, default=13, help="seed of the text sample (and of a random head)")
    parser.add_argument("--layer", type=int, default=-1, help="attention layer read for ExpNet features")
    parser.add_argument("--data-root", type=Path, default=PROJECT_ROOT / "data", help="the project's data folder")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT_DIR, help="where the CSV (and PNG) go")
    parser.add_argument("--quick", action="store_true",
                        help="a tiny run (a few texts, 1 round) to check that it works; its numbers mean little")


def set_threads(threads: int | None) -> int:
    if threads is not None:
        torch.set_num_threads(threads)
    return torch.get_num_threads()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_common_arguments(parser)
    parser.add_argument("--batch-size", type=positive_int, default=64,
                        help="inference batch size (the pipeline's features.batch_size)")
    parser.add_argument("--n-precision", type=positive_int, default=128,
                        help="texts for the fp32 vs bf16 forward comparison (first N of the sample)")
    parser.add_argument("--precision-rounds", type=positive_int, default=3,
                        help="interleaved rounds of the fp32 vs bf16 section (slow where the CPU lacks native bf16)")
    parser.add_argument("--n-train", type=positive_int, default=32,
                        help="texts for the fp32 vs bf16 training-step comparison")
    parser.add_argument("--train-batch-size", type=positive_int, default=32,
                        help="training batch size (the classifiers' batch_size)")
    parser.add_argument("--memory-sizes", type=positive_int, nargs="+", default=None,
                        help="data sizes for the memory measurement (default: n-texts and 4 x n-texts)")
    parser.add_argument("--chunk-size", type=positive_int, default=256,
                        help="examples per written chunk in the memory measurement")
    parser.add_argument("--skip-precision", action="store_true", help="skip the fp32 vs bf16 section")
    parser.add_argument("--skip-memory", action="store_true", help="skip the memory section")
    args = parser.parse_args(argv)
    if args.quick:
        args.n_texts, args.rounds, args.precision_rounds = min(args.n_texts, 8), 1, 1
        args.n_precision, args.n_train = 4, 2
        args.batch_size, args.train_batch_size, args.chunk_size = 4, 2, 4
        args.memory_sizes = args.memory_sizes or [4, 12]
    if args.memory_sizes is None:
        args.memory_sizes = [args.n_texts, 4 * args.n_texts]
    return args


def main(argv: Sequence[str] | None = None) -> pd.DataFrame:
    """Run the benchmark, print the table, save the CSV; returns the table."""

    from learned_attribution.core.models.runner import bf16_native

    args = parse_args(argv)
    threads = set_threads(args.threads)
    say(f"torch {torch.__version__}, {threads} intra-op threads, CPU native bf16 (avx512_bf16/amx_bf16): "
        f"{bf16_native(torch.device('cpu'))}")
    largest = max([args.n_texts] + (list(args.memory_sizes) if not args.skip_memory else []))
    setup = load_setup(args.task, largest, args.seed, args.source, args.data_root)
    examples = setup.examples.iloc[:args.n_texts]
    pad = setup.tokenizer.pad_token_id
    source = f"{setup.model_source}; {setup.text_source}"
    say(f"model: {setup.model_source}\ntexts: {setup.text_source}; {describe_texts(examples)}")
    rows = []

    def add_rows(section: str, summary: pd.DataFrame, n: int, batch_size: int) -> None:
        for record in summary.to_dict("records"):
            rows.append({"section": section, "n_examples": n, "batch_size": batch_size, "threads": threads,
                         "source": source, **record})

    say(f"[1/3] throughput: plain forward vs attention feature extraction, batch {args.batch_size}")
    plain = forward_steps(setup.model, examples, args.batch_size, pad)
    workloads = {
        "forward_with_attentions": PairedWorkload(
            forward_steps(setup.model, examples, args.batch_size, pad, output_attentions=True), plain),
        "attention_features": PairedWorkload(
            extraction_steps(setup.model, setup.tokenizer, examples, args.batch_size, args.layer), plain),
    }
    warm_up(list(workloads.values()), args.quick)
    add_rows("throughput", summarise_pairs(paired_rounds(workloads, args.rounds), "forward_plain"),
             len(examples), args.batch_size)

    if not args.skip_precision:
        say(f"[2/3] precision: fp32 vs bf16 autocast (forward on {args.n_precision} texts, batch {args.batch_size}; "
            f"training steps on {args.n_train} texts, batch {args.train_batch_size})")
        forward_examples = setup.examples.iloc[:args.n_precision]
        train_examples = setup.examples.iloc[:args.n_train]
        forward_pair = {"forward_bf16": PairedWorkload(
            forward_steps(setup.model, forward_examples, args.batch_size, pad, bf16=True),
            forward_steps(setup.model, forward_examples, args.batch_size, pad))}
        train_pair = {"train_step_bf16": PairedWorkload(
            training_steps(setup.model, train_examples, args.train_batch_size, pad, bf16=True),
            training_steps(setup.model, train_examples, args.train_batch_size, pad, bf16=False))}
        warm_up([*forward_pair.values(), *train_pair.values()], args.quick)
        forward_timings = paired_rounds(forward_pair, args.precision_rounds)
        add_rows("precision", summarise_pairs(forward_timings, "forward_fp32"), len(forward_examples), args.batch_size)
        train_timings = paired_rounds(train_pair, args.precision_rounds)
        add_rows("precision", summarise_pairs(train_timings, "train_step_fp32"), len(train_examples),
                 args.train_batch_size)

    if not args.skip_memory:
        say(f"[3/3] memory of the extraction written to Parquet: sizes {list(args.memory_sizes)}, "
            f"chunked ({args.chunk_size} examples per chunk), unchunked (one chunk) for contrast, and a plain "
            "forward pass for the model's own working memory")
        sizes = sorted(args.memory_sizes)
        with tempfile.TemporaryDirectory() as folder:
            results = {}
            for mode in ("forward_plain", "extraction_chunked", "extraction_unchunked"):
                for size in sizes:
                    subset = setup.examples.iloc[:size]
                    chunk_size = size if mode == "extraction_unchunked" else args.chunk_size
                    if mode == "forward_plain":  # the model's own working memory, for comparison
                        run, chunk_size = run_all(forward_steps(setup.model, subset, args.batch_size, pad)), None
                    else:
                        run = functools.partial(write_features, setup.model, setup.tokenizer, subset,
                                                args.batch_size, args.layer, chunk_size,
                                                Path(folder) / f"{mode}_{size}.parquet")
                    result = measure_memory(run, size, chunk_size)
                    results[(mode, size)] = result
                    say(f"  {mode:<21} n={size:<6} rows={result.output_rows:<8} python peak "
                        f"{result.peak_python_mib:8.1f} MiB, RSS peak above start "
                        f"{result.peak_rss_above_start_mib:8.1f} MiB")
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
                             "threads": threads, "source": source, "chunk_size": result.chunk_size})

    table = pd.DataFrame(rows).reindex(columns=FEATURE_COLUMNS + ["chunk_size"])
    table = table.astype({"output_rows": "Int64", "max_tokens": "Int64", "chunk_size": "Int64", "rounds": "Int64"})
    args.output_dir.mkdir(parents=True, exist_ok=True)
    path = args.output_dir / "feature_extraction.csv"
    table.to_csv(path, index=False)
    print_report(table)
    say(f"saved {path}")
    return table


def print_report(table: pd.DataFrame) -> None:
    timed = table[table["section"] != "memory"]
    say("\nThroughput (medians over rounds; ratio = median over rounds of the batch-by-batch paired ratio to the "
        "reference)")
    say(timed[["section", "method", "n_examples", "batch_size", "examples_per_s", "reference",
               "ratio_to_reference"]].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    memory = table[table["section"] == "memory"]
    if len(memory):
        say("\nPeak memory of the extraction written to Parquet.\n"
            "python = tracemalloc peak: Python objects + numpy/pandas buffers (not torch's allocator);\n"
            "RSS above start = sampled resident memory minus its value just before the run, in a separate run "
            "without tracemalloc,\n  freed malloc memory returned to the OS first; it includes torch's working "
            "memory for the longest batch\n  (forward_plain: the model alone, no features);\n"
            "ratio = python peak / python peak of the same mode at the smallest size")
        say(memory[["method", "n_examples", "chunk_size", "max_tokens", "output_rows", "peak_python_mib",
                    "peak_rss_above_start_mib", "process_max_rss_mib", "ratio_to_reference"]]
            .to_string(index=False, float_format=lambda v: f"{v:.2f}"))


if __name__ == "__main__":
    main()
