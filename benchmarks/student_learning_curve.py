"""Analysis: does an amortized student lack texts?. After `kedro run --pipeline amortize`, each task's
student is refit, as the pipeline fits it (every student variant of the run's `amortize` settings, the best on
validation kept), on nested seeded shares of its teacher's texts, and scored against the reference teacher on the
held-out texts, from the run's own cached outputs (no teacher work is redone; seconds to minutes per task).

Run from the project root with the virtualenv active:

    python benchmarks/student_learning_curve.py                        # every task's classifier
    python benchmarks/student_learning_curve.py --env base_size --tasks sst2
    python benchmarks/student_learning_curve.py --fractions 0.25 0.5 1

Output (the record, committed: docs/record/): student_learning_curve.csv (one row per task and share: n_texts, the
selected variant, its Spearman on its own training and validation texts, the held-out Spearman with its 95%
interval, top-k overlaps) and, written last, student_learning_curve.json (which run: commit, kernels, dates; the
amortize run's sizes are its `amortize` parameters); docs/amortize.md's block shows it (`learned-attribution
results`). And a printed table.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Sequence

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
INPUTS = {"classifier": "{task}.classifier", "texts": "student_{task}.train_texts",
          "signals": "student_{task}.signals", "teacher": "student_{task}.teacher",
          "held_out": "student_{task}.held_out_texts", "reference": "student_{task}.reference_teacher"}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    from learned_attribution.core.tasks import TASKS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default=None, help="Kedro environment of the amortize run (default: the project's)")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--fractions", nargs="+", type=float, default=[0.125, 0.25, 0.5, 1.0],
                        help="shares of the teacher's texts to refit on (nested; 1 = all of them)")
    parser.add_argument("--output-dir", type=Path, default=ROOT / "docs" / "record", help="default: docs/record")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> pd.DataFrame:
    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    from datetime import datetime, timezone

    import torch

    from learned_attribution.core.atomic import atomic_file
    from learned_attribution.core.models.runner import kernels_description
    from learned_attribution.services.amortize.curve import learning_curve
    from learned_attribution.services.config import amortize_settings
    from learned_attribution.services.record.runs import run_identity, write_benchmark_run

    args = parse_args(argv)
    identity = run_identity("student_learning_curve", datetime.now(timezone.utc),
                            kernels_description(torch.device("cpu"), False), ROOT, env=args.env or "local")
    os.chdir(ROOT)  # the catalog's paths are relative to the project root
    bootstrap_project(ROOT)
    with KedroSession.create(project_path=ROOT, env=args.env) as session:
        context = session.load_context()
        catalog, params = context.catalog, context.params
        settings = amortize_settings(params["amortize"], params["explained_layer"])  # as the pipeline parses it
        output_dir = args.output_dir
        tables = []
        for task in args.tasks:
            names = {key: name.format(task=task) for key, name in INPUTS.items()}
            missing = [name for name in names.values() if not catalog.exists(name)]
            if missing:
                raise SystemExit(f"{task}: the amortize run's outputs {missing} are missing: run `kedro run --pipeline "
                                 f"amortize{' --env ' + args.env if args.env else ''}` first")
            data = {key: catalog.load(name) for key, name in names.items()}
            print(f"{task}: {len(data['teacher'])} teacher texts, {len(data['held_out'])} held-out", flush=True)
            curve = learning_curve(data["classifier"], data["texts"], data["signals"], data["teacher"], data["held_out"],
                                   data["reference"], settings, args.fractions)
            tables.append(curve.assign(task=task))
    table = pd.concat(tables, ignore_index=True)
    table = table[["task", *[c for c in table.columns if c != "task"]]]
    output_dir.mkdir(parents=True, exist_ok=True)
    path = output_dir / "student_learning_curve.csv"
    with atomic_file(path) as partial:
        table.to_csv(partial, index=False, float_format="%.4f")
    # which run wrote the table, with its SHA-256 (docs/amortize.md's block names the run), written last
    write_benchmark_run(output_dir, "student_learning_curve", identity, [path.name])
    shown = ["task", "n_texts", "variant", "train_spearman", "val_spearman", "spearman", "spearman_low", "spearman_high"]
    print(table[shown].round(3).to_string(index=False))
    print(f"wrote {path}")
    return table


if __name__ == "__main__":
    main()
