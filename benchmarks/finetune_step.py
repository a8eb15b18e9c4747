"""Where one fine-tuning step of a task classifier spends its time: forward, backward, gradient clipping and the
AdamW update, with every weight trained and with the word embeddings frozen, side by side in one process.

The step is the `classifiers` pipeline's own (`core/models/classifier.training_step`, split into its parts here),
on the packaged encoder with a fresh 2-class head, on batches of real sentences of the task (`--task` cola or sst2,
its raw training file tokenized by the packaged tokenizer), length-grouped as in the pipeline. Each round times every
configuration on the same batch, the order alternating; the table gives the median per part and each
configuration's step as a ratio to the full step of the same round. Run it with the slow kind's kernels on a faster
machine (the kernels it ran with are printed):

    ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 python benchmarks/finetune_step.py --bf16 off

Output: data/08_reporting/benchmarks/finetune_step.csv.
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Sequence

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pandas as pd
import torch

from harness import DEFAULT_OUTPUT_DIR, PROJECT_ROOT, write_table

CONFIGURATIONS = {"every weight": False, "word embeddings frozen": True}


RAW_TEXT = {"cola": ("cola/raw/in_domain_train.tsv", None, 3), "sst2": ("sst2/glue/train.tsv", 0, 0)}


def sentences(task: str, n: int, seed: int) -> list[str]:
    """`n` seeded sentences of the task's raw training file (the classifiers' own data)."""
    path, header, column = RAW_TEXT[task]
    frame = pd.read_csv(PROJECT_ROOT / "data" / "01_raw" / path, sep="\t", header=header, quoting=3)
    texts = frame.iloc[:, column].astype(str)
    return texts.sample(n=min(n, len(texts)), random_state=seed).tolist()


def step_parts(model, optimizer, input_ids, attention_mask, labels, bf16: bool) -> dict[str, float]:
    """One `training_step`, each part timed."""
    from learned_attribution.core.models.runner import autocast

    times, started = {}, time.perf_counter()
    with autocast(input_ids.device, bf16):
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
    loss = torch.nn.functional.cross_entropy(logits.float(), labels)
    times["forward"] = time.perf_counter() - started
    started = time.perf_counter()
    loss.backward()
    times["backward"] = time.perf_counter() - started
    started = time.perf_counter()
    torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
    times["clip"] = time.perf_counter() - started
    started = time.perf_counter()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    times["optimizer"] = time.perf_counter() - started
    times["step"] = sum(times.values())
    return times


def main(argv: Sequence[str] | None = None) -> pd.DataFrame:
    from learned_attribution.core.models.classifier import trainable_parameters
    from learned_attribution.core.models.loading import load_tokenizer, new_classifier
    from learned_attribution.core.models.runner import (kernels_description, length_grouped_batches, pad_batch,
                                                         resolve_bf16)

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="cola", choices=sorted(RAW_TEXT))
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--bf16", choices=["auto", "on", "off"], default="auto")
    parser.add_argument("--encoder", default="packaged:all-MiniLM-L6-v2")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="3 rounds of batch 4: checks that it runs")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT_DIR)
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.batch_size = 3, 4
    bf16 = resolve_bf16({"auto": "auto", "on": True, "off": False}[args.bf16], torch.device("cpu"))
    kernels = kernels_description(torch.device("cpu"), bf16)
    print(f"kernels: {kernels}; threads {torch.get_num_threads()}", flush=True)
    tokenizer = load_tokenizer(args.encoder)
    texts = sentences(args.task, args.batch_size * args.rounds, args.seed)
    ids = [tokenizer(text, truncation=True, max_length=128)["input_ids"] for text in texts]
    batches = length_grouped_batches([len(i) for i in ids], args.batch_size, shuffle=True, seed=args.seed)
    setups = {}
    for name, frozen in CONFIGURATIONS.items():
        torch.manual_seed(args.seed)
        model = new_classifier(args.encoder, ["a", "b"]).train()
        trained = trainable_parameters(model, frozen)
        setups[name] = (model, torch.optim.AdamW(trained, lr=5e-5, weight_decay=0.01, fused=True),
                        sum(p.numel() for p in trained))
    rows = []
    for round_, batch in enumerate([batches[0], *batches]):  # the first batch warms up and is not kept
        input_ids, attention_mask = pad_batch([ids[i] for i in batch], tokenizer.pad_token_id)
        labels = torch.as_tensor([i % 2 for i in batch])
        order = list(setups) if round_ % 2 else list(reversed(setups))
        for name in order:
            model, optimizer, n_trained = setups[name]
            parts = step_parts(model, optimizer, input_ids, attention_mask, labels, bf16)
            if round_:
                rows.append({"configuration": name, "round": round_, "tokens": int(input_ids.shape[1]),
                             "trained_parameters": n_trained, **parts})
    table = pd.DataFrame(rows)
    full = table[table["configuration"] == "every weight"].set_index("round")["step"]
    table["step_vs_every_weight"] = table["step"] / table["round"].map(full)
    summary = table.groupby("configuration", sort=False).agg(
        trained_parameters=("trained_parameters", "first"), forward_s=("forward", "median"),
        backward_s=("backward", "median"), clip_s=("clip", "median"), optimizer_s=("optimizer", "median"),
        step_s=("step", "median"), step_vs_every_weight=("step_vs_every_weight", "median")).reset_index()
    summary.insert(0, "kernels", kernels)
    print(summary.round(4).to_string(index=False), flush=True)
    write_table(summary, args.output_dir, "finetune_step.csv")
    return summary


if __name__ == "__main__":
    main()
