"""GPU check: does everything run on an accelerator, give the CPU's scores, and how fast is it?

Run from the project root with the virtualenv active, on a machine with CUDA:

    python benchmarks/gpu_check.py                      # agreement, throughput on cuda, smoke crosstask on cuda
    python benchmarks/gpu_check.py --device cpu --quick # the same code path where there is no GPU (CPU vs CPU: exact)

1. Agreement. Every registered method (the paper's ExpNet and ExpNet+ included, from the trained fold when it
   exists) explains the same fixed batch of texts with the classifier on `--device` and on the CPU (TF32 off,
   fp32). Per method: the largest absolute score difference divided by the largest absolute CPU score of the
   example, over the batch. Tolerances: 1e-3 for attention, gradient, activation and learned methods (the same
   arithmetic in another kernel order); 2e-2 for the perturbation methods, whose surrogate fits (LIME,
   KernelSHAP) amplify last-digit differences of the forward passes (their masks are drawn on the CPU
   generator, so both devices see the same samples).
2. Throughput. `benchmarks/attribution_throughput.py --device <device>`: absolute examples/s of a plain
   forward pass and of every method on the device (its CSV, with `--output-dir`).
3. The smoke crosstask (`kedro run --pipeline crosstask --env smoke`) with `compute.device=<device>`, its wall
   time, into a temporary SQLite MLflow store.

Outputs (data/08_reporting/benchmarks/): gpu_check_agreement.csv, gpu_check.json (device name, the smoke run's
wall time, pass/fail), attribution_throughput_<device>.csv.
"""
from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from attribution_steps import make_batches
from explainers_under_test import build_explainers, learned_models
from harness import DEFAULT_OUTPUT_DIR, PROJECT_ROOT, load_setup, say

TOLERANCE = {"perturbation": 2e-2}
DEFAULT_TOLERANCE = 1e-3


def agreement(setup, device: torch.device, n_texts: int, batch_size: int, quick: bool, seed: int) -> pd.DataFrame:
    """Per method: the largest |device - CPU| score difference relative to the example's largest |CPU score|."""
    from learned_attribution.core.explainers import METHODS
    from learned_attribution.core.models.runner import predict_proba

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    examples = setup.examples.iloc[:n_texts]
    cpu_model = setup.model.cpu().eval()
    device_model = copy.deepcopy(cpu_model).to(device).eval()
    predicted = predict_proba(cpu_model, list(examples["input_ids"]), batch_size, setup.tokenizer.pad_token_id).argmax(1)
    targets = dict(enumerate(predicted.tolist()))
    overrides = {"lime": {"n_samples": 40 if quick else 200}, "kernel_shap": {"n_samples": 40 if quick else 200},
                 "integrated_gradients": {"n_steps": 8 if quick else 20}}
    learned = learned_models(list(METHODS), cpu_model, setup.task, PROJECT_ROOT / "data", seed)
    explainers = build_explainers(list(METHODS), overrides, learned, -1, setup.tokenizer)
    rows = []
    for name, explainer in explainers.items():
        differences = []
        for (_, cpu_batch), (_, device_batch) in zip(make_batches(examples, batch_size, setup.tokenizer, targets),
                                                     make_batches(examples, batch_size, setup.tokenizer, targets,
                                                                  device)):
            reference = explainer.explain(cpu_model, cpu_batch).scores.detach().float().cpu()
            scores = explainer.explain(device_model, device_batch).scores.detach().float().cpu()
            keep = ~cpu_batch.special_mask
            for row in range(reference.shape[0]):
                ref, got = reference[row][keep[row]], scores[row][keep[row]]
                differences.append(float((got - ref).abs().max() / ref.abs().max().clamp(min=1e-12)))
        family = explainer.family
        tolerance = TOLERANCE.get(family, DEFAULT_TOLERANCE)
        worst = float(np.max(differences))
        rows.append({"method": name, "family": family, "n_examples": len(differences),
                     "max_relative_difference": worst, "median_relative_difference": float(np.median(differences)),
                     "tolerance": tolerance, "agrees": worst <= tolerance})
        say(f"  {name:32s} max rel. diff {worst:.2e} (tolerance {tolerance:.0e}) {'ok' if worst <= tolerance else 'FAIL'}")
    return pd.DataFrame(rows)


def smoke_run(device: str) -> float:
    """Wall seconds of the smoke crosstask on `device` (temporary MLflow store)."""
    with tempfile.TemporaryDirectory() as scratch:
        command = [sys.executable, "-m", "kedro", "run", "--pipeline", "crosstask", "--env", "smoke", "--params",
                   f"compute.device={device},mlflow.tracking_uri=sqlite:///{scratch}/mlflow.db"]
        started = time.perf_counter()
        subprocess.run(command, cwd=PROJECT_ROOT, check=True)
        return time.perf_counter() - started


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    from learned_attribution.core.tasks import TASKS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="the device checked against the CPU (cuda, cuda:N, mps)")
    parser.add_argument("--task", default="sst2", choices=list(TASKS))
    parser.add_argument("--n-texts", type=int, default=32, help="texts of the fixed agreement batch set")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-smoke", action="store_true")
    parser.add_argument("--quick", action="store_true", help="8 texts, fewer samples, quick throughput")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT_DIR)
    args = parser.parse_args(argv)
    if args.quick:
        args.n_texts, args.batch_size = 8, 4
    return args


def main(argv: Sequence[str] | None = None) -> dict:
    from learned_attribution.core.models.runner import resolve_device

    args = parse_args(argv)
    try:
        device = resolve_device(args.device)
    except ValueError as error:
        raise SystemExit(f"gpu_check: {error}. Nothing was measured.") from error
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else str(device)
    say(f"gpu_check on {device} ({name}), torch {torch.__version__}")
    args.output_dir.mkdir(parents=True, exist_ok=True)
    setup = load_setup(args.task, max(args.n_texts, 8), args.seed)
    say(f"[1/3] agreement with the CPU on {args.n_texts} texts ({setup.model_source})")
    table = agreement(setup, device, args.n_texts, args.batch_size, args.quick, args.seed)
    table.insert(0, "device", name)
    table.to_csv(args.output_dir / "gpu_check_agreement.csv", index=False)
    summary = {"device": name, "torch": torch.__version__, "agreement_pass": bool(table["agrees"].all()),
               "methods_outside_tolerance": table.loc[~table["agrees"], "method"].tolist()}
    if not args.skip_throughput:
        say("[2/3] attribution throughput on the device")
        throughput_dir = Path(tempfile.mkdtemp())
        subprocess.run([sys.executable, str(PROJECT_ROOT / "benchmarks" / "attribution_throughput.py"), "--device",
                        str(device), "--output-dir", str(throughput_dir), *(["--quick"] if args.quick else [])],
                       cwd=PROJECT_ROOT, check=True)
        throughput = pd.read_csv(throughput_dir / "attribution_throughput.csv")
        throughput.to_csv(args.output_dir / f"attribution_throughput_{device.type}.csv", index=False)
        summary["forward_examples_per_s"] = float(
            throughput.loc[throughput["method"] == "forward_all", "examples_per_s"].iloc[0])
    if not args.skip_smoke:
        say("[3/3] smoke crosstask on the device")
        summary["smoke_crosstask_seconds"] = round(smoke_run(str(device)), 1)
    (args.output_dir / "gpu_check.json").write_text(json.dumps(summary, indent=2))
    say(json.dumps(summary, indent=2))
    return summary


if __name__ == "__main__":
    main()
