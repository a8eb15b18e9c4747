"""Benchmark: fp32 against bf16 autocast, for an inference forward pass and for a training step.

Run from the project root with the virtualenv active:

    python benchmarks/bf16_autocast.py            # default: 128 texts forward, 32 training, 3 interleaved rounds
    python benchmarks/bf16_autocast.py --quick    # a tiny run (seconds)
    python benchmarks/bf16_autocast.py --help

Side by side in ONE process (harness.py: paired, interleaved rounds): the inference forward pass in fp32 (reference
`forward_fp32`) and under `torch.autocast("cpu", dtype=torch.bfloat16)` on `--n-texts` texts, and a training step as
`fine_tune` takes it (forward, fp32 loss, backward, gradient clipping, AdamW; reference `train_step_fp32`) on the
first `--n-train` texts, on a copy of the model. Where the CPU lacks native bf16 (avx512_bf16 / amx_bf16) it is
emulated and several times slower: what `compute.bf16: auto` decides by (core/models/runner.py, `bf16_native`).

Output: data/08_reporting/benchmarks/bf16_autocast.csv (section `precision`).
"""
from __future__ import annotations

import argparse
import copy
import functools
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from harness import (PairedWorkload, Step, add_common_arguments, describe_texts, forward_steps, length_batches,
                     load_setup, paired_rounds, positive_int, save_feature_table, say, section_rows, set_threads,
                     summarise, warm_up)


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

    def run(batch: list[int]) -> int:
        input_ids, attention_mask = pad_batch([ids[i] for i in batch], pad_token_id)
        training_step(model, list(model.parameters()), optimizer, loss_fn, input_ids, attention_mask, labels[batch],
                      bf16)
        return len(batch)

    return [functools.partial(run, batch) for batch in length_batches(examples, batch_size)]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_common_arguments(parser, n_texts=128, rounds=3, layer=False)  # 3 rounds: an emulated bf16 pass is slow
    parser.add_argument("--batch-size", type=positive_int, default=64,
                        help="inference batch size (the pipeline's features.batch_size)")
    parser.add_argument("--n-train", type=positive_int, default=32,
                        help="texts for the training-step comparison (the first of the sample)")
    parser.add_argument("--train-batch-size", type=positive_int, default=32,
                        help="training batch size (the classifiers' batch_size)")
    args = parser.parse_args(argv)
    if args.quick:
        args.n_texts, args.n_train, args.rounds, args.batch_size, args.train_batch_size = 4, 2, 1, 4, 2
    return args


def main(argv: Sequence[str] | None = None) -> pd.DataFrame:
    """Run the benchmark, print the table, save the CSV; returns the table."""
    from learned_attribution.core.models.runner import bf16_native

    args = parse_args(argv)
    threads = set_threads(args.threads)
    say(f"torch {torch.__version__}, {threads} intra-op threads, CPU native bf16 (avx512_bf16/amx_bf16): "
        f"{bf16_native(torch.device('cpu'))}")
    setup = load_setup(args.task, max(args.n_texts, args.n_train), args.seed, args.source, args.data_root)
    forward_examples = setup.examples.iloc[:args.n_texts]
    train_examples = setup.examples.iloc[:args.n_train]
    pad = setup.tokenizer.pad_token_id
    say(f"model: {setup.model_source}\ntexts: {setup.text_source}; {describe_texts(forward_examples)}")

    say(f"precision: fp32 vs bf16 autocast (forward on {args.n_texts} texts, batch {args.batch_size}; "
        f"training steps on {args.n_train} texts, batch {args.train_batch_size})")
    forward_pair = {"forward_bf16": PairedWorkload(
        forward_steps(setup.model, forward_examples, args.batch_size, pad, bf16=True),
        forward_steps(setup.model, forward_examples, args.batch_size, pad))}
    train_pair = {"train_step_bf16": PairedWorkload(
        training_steps(setup.model, train_examples, args.train_batch_size, pad, bf16=True),
        training_steps(setup.model, train_examples, args.train_batch_size, pad, bf16=False))}
    warm_up([*forward_pair.values(), *train_pair.values()], args.quick)
    forward = summarise(paired_rounds(forward_pair, args.rounds), "forward_fp32")
    train = summarise(paired_rounds(train_pair, args.rounds), "train_step_fp32")
    rows = [*section_rows("precision", forward, len(forward_examples), args.batch_size, threads, setup.source),
            *section_rows("precision", train, len(train_examples), args.train_batch_size, threads, setup.source)]
    return save_feature_table(rows, args.output_dir, "bf16_autocast.csv")


if __name__ == "__main__":
    main()
