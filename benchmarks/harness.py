"""What the benchmark scripts share (it measures nothing itself): the model and texts they measure on, paired
interleaved timing, the length-sorted batches and forward steps, the common options, and how tables and charts are
written.

The model is the task's fine-tuned classifier (data/06_models/classifier_<task>) and the texts are the task's
rationale examples (data/03_primary/tokenized_<task>.parquet) when the pipeline has produced them; on a fresh clone
it falls back to the packaged encoder with a random 2-class head and the SST-2 GLUE test sentences
(data/01_raw/sst2/glue/test.tsv) tokenized with the packaged tokenizer.

Timing is paired: every method is timed batch by batch, each batch right next to its reference method on the same
batch (which goes first alternates), in several rounds (method order reversed every other round); a table gives the
medians over rounds of examples/s and of the paired ratio to the reference. A CPU shared with other jobs then slows
a method and its reference alike, so the RATIOS stay meaningful even when the absolute numbers do not.
"""
from __future__ import annotations

import argparse
import csv
import functools
import math
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd
import yaml

if TYPE_CHECKING:
    import torch

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUTPUT_DIR = PROJECT_ROOT / "data" / "08_reporting" / "benchmarks"
RATIONALE_ROLES = ("rationale_test", "rationale_val", "rationale_train")
# The columns of the feature extraction scripts' tables (feature_extraction, bf16_autocast, extraction_memory).
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

    @property
    def source(self) -> str:
        """Model and texts in words, the tables' `source` column."""
        return f"{self.model_source}; {self.text_source}"


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
    """A seeded sample of `n_texts` rows; when the pool is smaller, it is repeated (second value True). A smaller
    sample is the first rows of a larger one, so scripts that load the largest size they need slice it."""
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
    import torch

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


def summarise(timings: pd.DataFrame, references: str | Mapping[str, str],
              ratio: str = "ratio_to_reference") -> pd.DataFrame:
    """Per method: median over rounds of examples/s and of its paired ratio to its reference (`references`: one
    name for every method, or method -> name), in column `ratio`. Each reference's own row comes first and pools,
    per round, all its timings beside the methods it paired with; its ratio is 1."""
    if isinstance(references, str):
        references = dict.fromkeys(timings["method"], references)
    rows = []
    timings = timings.assign(reference=timings["method"].map(references))
    for reference, group in timings.groupby("reference", sort=False):
        pooled = group.groupby("round")[["reference_examples", "reference_seconds"]].sum()
        rows.append({"method": reference,
                     "examples_per_s": float((pooled["reference_examples"] / pooled["reference_seconds"]).median()),
                     "reference": reference, ratio: 1.0, "rounds": len(pooled)})
    for method, group in timings.groupby("method", sort=False):
        rows.append({"method": method, "examples_per_s": float(group["examples_per_s"].median()),
                     "reference": references[method], ratio: float(group["ratio"].median()), "rounds": len(group)})
    return pd.DataFrame(rows)


def warm_up(workloads: Sequence[PairedWorkload], skip: bool) -> None:
    """Run the first step of every workload and its reference once, untimed (first-call costs: allocator,
    kernels, lazy imports); skipped by --quick."""
    if not skip:
        for workload in workloads:
            workload.steps[0]()
            workload.reference_steps[0]()


# ----------------------------------------------------------------------------------------------------
# Batches and forward steps
# ----------------------------------------------------------------------------------------------------

def length_batches(examples: pd.DataFrame, batch_size: int) -> list[list[int]]:
    """The length-sorted batches the pipeline's extraction uses (same batches for every method)."""
    from learned_attribution.core.models.runner import iter_batches

    return list(iter_batches(list(examples["input_ids"]), batch_size))


def forward_steps(model: torch.nn.Module, examples: pd.DataFrame, batch_size: int, pad_token_id: int,
                  output_attentions: bool = False, bf16: bool = False) -> list[Step]:
    """Per batch: pad it and run one inference forward pass under `torch.inference_mode`."""
    import torch

    from learned_attribution.core.models.runner import pad_batch

    ids = list(examples["input_ids"])

    def run(batch: list[int]) -> int:
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            input_ids, attention_mask = pad_batch([ids[i] for i in batch], pad_token_id)
            model(input_ids=input_ids, attention_mask=attention_mask, output_attentions=output_attentions)
        return len(batch)

    return [functools.partial(run, batch) for batch in length_batches(examples, batch_size)]


# ----------------------------------------------------------------------------------------------------
# Options
# ----------------------------------------------------------------------------------------------------

def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def parse_setting(text: str) -> tuple[str, str, object]:
    """`method.key=value` (value parsed as YAML: 1000, 0.5, null, true) -> (method, key, value)."""
    head, sep, value = text.partition("=")
    method, dot, key = head.partition(".")
    if not sep or not dot or not method or not key:
        raise argparse.ArgumentTypeError(f"--set {text!r}: expected METHOD.KEY=VALUE, e.g. lime.n_samples=1000")
    return method, key, yaml.safe_load(value)


def add_common_arguments(parser: argparse.ArgumentParser, n_texts: int = 512, rounds: int | None = 5,
                         layer: bool = True) -> None:
    """The options of every script measuring on `load_setup`'s model and texts (`rounds` None: not a timed one;
    `layer` False: one that reads no attention layer)."""
    from learned_attribution.core.tasks import TASKS

    parser.add_argument("--task", default="sst2", choices=list(TASKS),
                        help="whose classifier and rationale texts to use when the pipeline output exists")
    parser.add_argument("--source", default="auto", choices=["auto", "pipeline", "raw"],
                        help="auto: pipeline output if present, else the packaged encoder with a random head on "
                             "the raw SST-2 test sentences; pipeline / raw force one of them")
    parser.add_argument("--n-texts", type=positive_int, default=n_texts, help="texts to measure on")
    if rounds is not None:
        parser.add_argument("--rounds", type=positive_int, default=rounds,
                            help="interleaved timing rounds (median taken)")
    parser.add_argument("--threads", type=positive_int, default=None,
                        help="torch intra-op threads (default: torch's default). On a CPU shared with other "
                             "jobs, 1 avoids threads spinning against each other")
    parser.add_argument("--seed", type=int, default=13, help="seed of the text sample (and of a random head)")
    if layer:
        parser.add_argument("--layer", type=int, default=-1, help="attention layer read for ExpNet features")
    parser.add_argument("--data-root", type=Path, default=PROJECT_ROOT / "data", help="the project's data folder")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT_DIR, help="where the CSV (and PNG) go")
    parser.add_argument("--quick", action="store_true",
                        help="a tiny run (a few texts, 1 round) to check that it works; its numbers mean little")


def set_threads(threads: int | None) -> int:
    import torch

    if threads is not None:
        torch.set_num_threads(threads)
    return torch.get_num_threads()


# ----------------------------------------------------------------------------------------------------
# Tables and charts
# ----------------------------------------------------------------------------------------------------

def write_table(table: pd.DataFrame, output_dir: Path, name: str) -> Path:
    """`table` saved as `output_dir/name` (CSV, no index; the folder made if needed); returns the path."""
    output_dir.mkdir(parents=True, exist_ok=True)
    path = output_dir / name
    table.to_csv(path, index=False)
    return path


def section_rows(section: str, summary: pd.DataFrame, n_examples: int, batch_size: int, threads: int,
                 source: str) -> list[dict]:
    """A `summarise` table as rows of a feature extraction table, under `section`."""
    return [{"section": section, "n_examples": n_examples, "batch_size": batch_size, "threads": threads,
             "source": source, **record} for record in summary.to_dict("records")]


def print_timed(table: pd.DataFrame) -> None:
    """The timed rows of a feature extraction table, each beside its reference."""
    say("\nThroughput (medians over rounds; ratio = median over rounds of the batch-by-batch paired ratio to the "
        "reference)")
    say(table[["section", "method", "n_examples", "batch_size", "examples_per_s", "reference",
               "ratio_to_reference"]].to_string(index=False, float_format=lambda v: f"{v:.3f}"))


def save_feature_table(rows: list[dict], output_dir: Path, name: str,
                       report: Callable[[pd.DataFrame], None] = print_timed) -> pd.DataFrame:
    """The rows of a feature extraction script in the columns they all write (`FEATURE_COLUMNS` and chunk_size),
    saved as `output_dir/name` and printed by `report`; returns the table."""
    table = pd.DataFrame(rows).reindex(columns=FEATURE_COLUMNS + ["chunk_size"])
    table = table.astype({"output_rows": "Int64", "max_tokens": "Int64", "chunk_size": "Int64", "rounds": "Int64"})
    path = write_table(table, output_dir, name)
    report(table)
    say(f"saved {path}")
    return table


@contextmanager
def saved_figure(path: Path, figsize: tuple[float, float]) -> Iterator[tuple[object, object]]:
    """(pyplot, axis) of a new figure drawn off screen; on exit it is laid out, saved to `path` and closed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=figsize)
    yield plt, axis
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
