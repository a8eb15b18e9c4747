"""The main job's stage table on this machine's own kernels and on the slow kind's, side by side in one run.

Runs `kedro run --pipeline crosstask` twice from scratch, each into a data folder of its own (a copy of conf/ whose
`data_root` points there, passed with `--conf-source`) and its own MLflow store, then prints per stage the wall time
(first node start to last node end) and the sum of node times of both runs and their ratio, with the kernels each ran
on (`node_timings/crosstask.csv`, written by the timing hook):

- `native`: torch's and oneDNN's best kernels here; `compute.bf16: auto` decides bf16 (on where it is native);
- `slow`: the slow kind's kernels, fp32 AVX2: `ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2` and bf16 off.
  On a machine without AVX-512 both runs use the same kernels (the table says so); on one without AVX2 the slow
  kind cannot be emulated and the script stops in one line.

    python benchmarks/stage_benchmark.py                 # the default run twice (the main job's real cost)
    python benchmarks/stage_benchmark.py --env smoke     # minutes: the smoke slices, checks that it runs
    python benchmarks/stage_benchmark.py --only slow     # one side only

Output: data/08_reporting/benchmarks/stage_benchmark.csv (one row per kernels and stage) and each run's folder
under data/08_reporting/benchmarks/stage_runs/<kernels>/ (deleted first, so a run never reads an older one's outputs).
Peak memory of each run (max RSS of its kedro process) is in the table too.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

import pandas as pd
import yaml

from harness import DEFAULT_OUTPUT_DIR, PROJECT_ROOT, write_table

SLOW_KERNELS = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
KINDS = ("native", "slow")


def cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    line = next((line for line in text.splitlines() if line.startswith("flags")), "")
    return set(line.split(":", 1)[-1].split())


def conf_copy(folder: Path, env: str, data_root: Path) -> Path:
    """conf/ copied to `folder`, the environment's `data_root` pointing at `data_root` (the raw files stay read from
    data/01_raw: their catalog paths do not use data_root)."""
    target = folder / "conf"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(PROJECT_ROOT / "conf", target)
    globals_file = target / (env or "base") / "globals.yml"
    values = yaml.safe_load(globals_file.read_text()) if globals_file.is_file() else {}
    values["data_root"] = str(data_root)
    globals_file.write_text(yaml.safe_dump(values))
    return target


def run_kind(kind: str, env: str, folder: Path, pipeline: str) -> dict:
    """One from-scratch run of `pipeline` on `kind`'s kernels; its timings and peak memory."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    data_root = folder / "data"
    conf = conf_copy(folder, env, data_root)
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "KEDRO_DISABLE_TELEMETRY": "1"}
    params = [f"mlflow.tracking_uri=sqlite:///{folder / 'mlflow.db'}"]
    if kind == "slow":
        environment.update(SLOW_KERNELS)
        params.append("compute.bf16=false")
    command = [sys.executable, "-m", "kedro", "run", "--pipeline", pipeline, "--conf-source", str(conf),
               "--params", ",".join(params), *(["--env", env] if env else [])]
    print(f"[{kind}] {' '.join(command)}", flush=True)
    started = time.perf_counter()
    with open(folder / "run.log", "w") as log:
        process = subprocess.Popen(command, cwd=PROJECT_ROOT, env=environment, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)  # this run's own peak memory (ru_maxrss: KiB on Linux)
    seconds = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    if code:
        raise SystemExit(f"[{kind}] kedro run failed (exit {code}): see {folder / 'run.log'}")
    peak_gb = usage.ru_maxrss / 1024 ** 2
    timings = pd.read_csv(data_root / "08_reporting" / "node_timings" / f"{pipeline}.csv")
    print(f"[{kind}] {seconds / 60:.1f} min, peak RSS {peak_gb:.2f} GB ({timings['kernels'].iloc[0]})", flush=True)
    return {"timings": timings, "seconds": seconds, "peak_gb": peak_gb}


def stage_rows(kind: str, run: dict) -> list[dict]:
    """Per stage and in total: wall minutes (the nodes' shares of the run's wall time, as docs/results.md counts them)
    and the sum of node minutes; the process's own minutes and peak memory on the total row."""
    from learned_attribution.services.reporting.cost import stage_walls

    timings = run["timings"]
    walls = stage_walls(timings)
    rows = []
    for stage, nodes in [*timings.groupby("stage", sort=False), ("total", timings)]:
        rows.append({"kernels_kind": kind, "kernels": timings["kernels"].iloc[0], "stage": stage,
                     "wall_min": walls[nodes.index].sum() / 60,
                     "node_min": nodes["seconds"].sum() / 60,
                     "process_min": run["seconds"] / 60 if stage == "total" else float("nan"),
                     "peak_rss_gb": run["peak_gb"] if stage == "total" else float("nan")})
    return rows


def main(argv: Sequence[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="", help="Kedro environment (default: base, the main job itself)")
    parser.add_argument("--pipeline", default="crosstask")
    parser.add_argument("--only", choices=KINDS, action="append", help="run one kind only (repeatable)")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT_DIR)
    args = parser.parse_args(argv)
    kinds = args.only or list(KINDS)
    flags = cpu_flags()
    if "slow" in kinds and flags and "avx2" not in flags:
        raise SystemExit("this CPU lacks AVX2: the slow kind's kernels (fp32 AVX2) cannot be emulated here; run with "
                         "--only native")
    same = not ({"avx512f", "avx512_bf16", "amx_bf16"} & flags)
    if same and "slow" in kinds:
        print("this CPU has no AVX-512: its own kernels are the slow kind's; both runs use AVX2 (bf16 off)", flush=True)
    runs = {kind: run_kind(kind, args.env, args.output_dir / "stage_runs" / kind, args.pipeline) for kind in kinds}
    table = pd.DataFrame([row for kind, run in runs.items() for row in stage_rows(kind, run)])
    if set(KINDS) <= set(runs):
        wide = table.pivot_table(index="stage", columns="kernels_kind", values=["wall_min", "node_min"], sort=False)
        wide[("wall_min", "slow / native")] = wide[("wall_min", "slow")] / wide[("wall_min", "native")]
        print(wide.round(2).to_string(), flush=True)
    for kind in runs:
        print(f"{kind}: {table.loc[table['kernels_kind'] == kind, 'kernels'].iloc[0]}", flush=True)
    print(table.round(3).to_string(index=False), flush=True)
    write_table(table, args.output_dir, "stage_benchmark.csv")
    return table


if __name__ == "__main__":
    main()
