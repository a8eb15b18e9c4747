"""Benchmark: the speed of attention feature extraction beside a plain forward pass.

Run from the project root with the virtualenv active:

    python benchmarks/feature_extraction.py            # default: 512 texts, 5 interleaved rounds
    python benchmarks/feature_extraction.py --quick    # a tiny run (seconds)
    python benchmarks/feature_extraction.py --help

Examples/s of a plain forward pass (`output_attentions=False`, the reference `forward_plain`), of the same forward
pass asking for attentions, and of `extract_attention_features` (forward with attentions + one row per token), on
the same texts, batches and batch size, timed side by side in ONE process (harness.py: paired, interleaved rounds);
the ratio of each to the plain forward pass. bf16_autocast.py measures fp32 against bf16, extraction_memory.py the
extraction's memory.

Output: data/08_reporting/benchmarks/feature_extraction.csv (section `throughput`).
"""
from __future__ import annotations

import argparse
import functools
from typing import Sequence

import pandas as pd
import torch

from harness import (PairedWorkload, Step, add_common_arguments, describe_texts, forward_steps, length_batches,
                     load_setup, paired_rounds, positive_int, save_feature_table, say, section_rows, set_threads,
                     summarise, warm_up)


def extraction_steps(model: torch.nn.Module, tokenizer, examples: pd.DataFrame, batch_size: int,
                     layer: int) -> list[Step]:
    """Per batch: `extract_attention_features` on that batch's examples (forward with attentions, then one
    row per token, as a DataFrame that is dropped)."""
    from learned_attribution.core.models.features import extract_attention_features, frame_token_ids

    special = frame_token_ids(tokenizer)

    def run(rows: pd.DataFrame) -> int:
        for _chunk in extract_attention_features(model, rows, layer, batch_size, tokenizer.pad_token_id, special,
                                                 tokenizer, chunk_size=len(rows)):
            pass
        return len(rows)

    return [functools.partial(run, examples.iloc[batch]) for batch in length_batches(examples, batch_size)]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_common_arguments(parser)
    parser.add_argument("--batch-size", type=positive_int, default=64,
                        help="inference batch size (the pipeline's features.batch_size)")
    args = parser.parse_args(argv)
    if args.quick:
        args.n_texts, args.rounds, args.batch_size = min(args.n_texts, 8), 1, 4
    return args


def main(argv: Sequence[str] | None = None) -> pd.DataFrame:
    """Run the benchmark, print the table, save the CSV; returns the table."""
    args = parse_args(argv)
    threads = set_threads(args.threads)
    say(f"torch {torch.__version__}, {threads} intra-op threads")
    setup = load_setup(args.task, args.n_texts, args.seed, args.source, args.data_root)
    examples, pad = setup.examples, setup.tokenizer.pad_token_id
    say(f"model: {setup.model_source}\ntexts: {setup.text_source}; {describe_texts(examples)}")

    say(f"throughput: plain forward vs attention feature extraction, batch {args.batch_size}")
    plain = forward_steps(setup.model, examples, args.batch_size, pad)
    workloads = {
        "forward_with_attentions": PairedWorkload(
            forward_steps(setup.model, examples, args.batch_size, pad, output_attentions=True), plain),
        "attention_features": PairedWorkload(
            extraction_steps(setup.model, setup.tokenizer, examples, args.batch_size, args.layer), plain),
    }
    warm_up(list(workloads.values()), args.quick)
    summary = summarise(paired_rounds(workloads, args.rounds), "forward_plain")
    rows = section_rows("throughput", summary, len(examples), args.batch_size, threads, setup.source)
    return save_feature_table(rows, args.output_dir, "feature_extraction.csv")


if __name__ == "__main__":
    main()
