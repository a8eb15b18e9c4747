"""Choose a task's fine-tuning settings on its classifier_val slice only (the test split is never read).

Each configuration fine-tunes the packaged encoder on the task's classifier_train rows exactly as the
`classifiers` pipeline does (`train_classifier`) and records the validation metrics of every epoch.
Output: data/08_reporting/benchmarks/tune_<task>.csv (one row per configuration and epoch).

    python benchmarks/tune_classifier.py --task cola \
        --config lr=5e-5,batch_size=16,epochs=4 --config lr=1e-4,epochs=5
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pandas as pd
import torch
import yaml

from learned_attribution.pipelines.classifiers.nodes import train_classifier

ROOT = Path(__file__).resolve().parents[1]
ALIASES = {"lr": "learning_rate"}


def parse_config(text: str) -> dict:
    """`lr=5e-5,epochs=4` -> {"learning_rate": 5e-05, "epochs": 4} (values parsed as YAML, then as floats)."""
    settings = {}
    for item in filter(None, text.split(",")):
        key, _, value = item.partition("=")
        if not value:
            raise SystemExit(f"--config {text!r}: expected key=value pairs, got {item!r}")
        parsed = yaml.safe_load(value)
        if isinstance(parsed, str):  # YAML 1.1 reads "5e-5" as a string
            try:
                parsed = float(parsed)
            except ValueError:
                pass
        settings[ALIASES.get(key.strip(), key.strip())] = parsed
    return settings


def main(argv=None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="cola")
    parser.add_argument("--config", action="append", required=True, help="overrides of the task's classifier params")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    params = yaml.safe_load((ROOT / "conf/base/parameters_classifiers.yml").read_text())["classifiers"][args.task]
    encoder = yaml.safe_load((ROOT / "conf/base/parameters.yml").read_text())["encoder"]
    tokenized = pd.read_parquet(ROOT / f"data/03_primary/tokenized_{args.task}.parquet")
    output = ROOT / f"data/08_reporting/benchmarks/tune_{args.task}.csv"
    output.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    for text in args.config:
        settings = {**params, **parse_config(text)}
        started = time.perf_counter()
        _, history = train_classifier(tokenized, encoder, settings, args.seed)
        history.insert(1, "config", text)
        history["seed"] = args.seed
        history["seconds"] = time.perf_counter() - started
        rows.append(history)
        table = pd.concat(rows, ignore_index=True)
        table.to_csv(output, index=False)  # after every configuration: a crash loses nothing measured
        print(history[["config", "epoch", "train_loss", "val_accuracy", "val_mcc"]].round(4).to_string(index=False),
              flush=True)
    print(f"saved {output}")
    return table


if __name__ == "__main__":
    main()
