"""Labels chosen for amortization: a grid of teacher texts x samples per text at equal teacher cost, per classifier.

Covert et al. (NeurIPS 2024) argue that a student taught on many noisy but unbiased labels can end closer to the
reference than one taught on fewer good ones. Each point of the grid runs the amortize pipeline for one task
classifier with `max_texts` = N and KernelSHAP at S samples (seed 0), N x S the same at every point (the teacher's
cost is its forward passes), and the same reference: the teacher at 2,000 samples with seed 1 (`reference_factor` =
2000 / S) on the same held-out texts (they do not depend on N), so its cached parts are computed once and every point
is judged against the same reference. Every default student variant trains at every point and the one with the best
validation Spearman is kept, as in the pipeline. It needs the task classifiers only (`kedro run --pipeline
classifiers`, or the main job).

    python benchmarks/label_budget_grid.py --task sst2                       # 600x200 1200x100 2400x50, 60 held out
    python benchmarks/label_budget_grid.py --task cola --points 1000x200 4000x50 --held-out 100

Resumable: a point whose reports are complete (a `done` file beside them) is not run again, and the teacher's parts
are cached by the pipeline, so a killed run continues where it stopped. Each point is one `kedro run` (fp32:
`compute.bf16=false`, so the points compare across machines), its reports copied to
data/08_reporting/benchmarks/label_budget_grid/<task>_<N>x<S>/ with its wall time. Output: the grid's table
(`<task>_grid.csv`, `<task>_grid.md`: the student's and its labels' Spearman with the reference, whether their
intervals are apart, comprehensiveness, cost), the project's students and variants tables for the points, printed.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from learned_attribution.core.tasks import TASKS
from learned_attribution.services.reporting.amortize import STUDENT_TABLES, student_variants_table, students_table
from learned_attribution.services.reporting.tables import table_lines

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "data" / "08_reporting" / "benchmarks" / "label_budget_grid"
REPORTS = ROOT / "data" / "08_reporting" / "amortize"
REFERENCE_SAMPLES, REFERENCE_SEED = 2000, 1
# The student, its bundle and the tables the grid reads; not the rationale test set's scoring, which needs the main
# job's folds (so the grid runs after the classifiers alone).
NODES = ("fit_student", "evaluate_student", "student_bundle")


def point_params(texts: int, samples: int, held_out: int) -> str:
    if REFERENCE_SAMPLES % samples:
        raise SystemExit(f"{samples} samples: the reference's {REFERENCE_SAMPLES} must be a multiple of it")
    return ",".join([
        "compute.bf16=false", f"amortize.max_texts={texts}", f"amortize.held_out_texts={held_out}",
        "amortize.teacher.method=kernel_shap", f"amortize.teacher.settings.n_samples={samples}",
        f"amortize.teacher.settings.seed={REFERENCE_SEED - 1}",
        f"amortize.reference_factor={REFERENCE_SAMPLES // samples}"])


def run_point(task: str, texts: int, samples: int, held_out: int, folder: Path) -> None:
    """One `kedro run` of the task's student at the point; its reports copied to `folder`, `done` written last."""
    namespace = f"student_{task}"
    command = [str(Path(sys.executable).with_name("kedro")), "run", "--pipeline", "amortize", "--namespaces",
               namespace, "--to-nodes", ",".join(f"{namespace}.{name}" for name in NODES),
               "--params", point_params(texts, samples, held_out)]
    print(f"{task} {texts}x{samples}: {' '.join(command)}", flush=True)
    start = time.perf_counter()
    subprocess.run(command, cwd=ROOT, check=True)
    wall = time.perf_counter() - start
    if folder.exists():  # an earlier, unfinished copy
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for report in REPORTS.glob(f"{task}_*"):
        shutil.copy2(report, folder / report.name)
    (folder / "wall_s").write_text(f"{wall:.0f}\n")
    (folder / "done").write_text("")


def point_tables(task: str, folder: Path) -> dict[str, pd.DataFrame]:
    return {name: pd.read_csv(folder / f"{task}_{name}.csv") for name in STUDENT_TABLES
            if (folder / f"{task}_{name}.csv").exists()}


def grid_row(task: str, texts: int, samples: int, folder: Path) -> dict:
    tables = point_tables(task, folder)
    fidelity = tables["fidelity"].set_index("method")
    student = fidelity.loc["student"]
    teacher = fidelity[fidelity.index.astype(str).str.startswith("teacher")].iloc[0]
    faithful = tables["faithfulness"].set_index("method")
    teacher_faith = faithful[faithful.index.astype(str).str.startswith("teacher")].iloc[0]
    cost = tables["cost"].set_index("method")["ratio_to_forward"]
    teacher_cost = next(v for m, v in cost.items() if str(m).startswith("teacher"))
    variants = tables["variants"]
    chosen = variants[variants["selected"].astype(bool)].iloc[0]
    return {"task": task, "texts": texts, "samples": samples, "teacher_passes": texts * samples,
            "student_spearman": student["spearman"], "student_low": student["spearman_low"],
            "student_high": student["spearman_high"], "labels_spearman": teacher["spearman"],
            "labels_low": teacher["spearman_low"], "labels_high": teacher["spearman_high"],
            "beats_labels": bool(student["spearman"] > teacher["spearman"]),
            "apart": bool(student["spearman_low"] > teacher["spearman_high"]),
            "comprehensiveness_ratio": faithful.loc["student", "comprehensiveness"]
            / teacher_faith["comprehensiveness"],
            "student_x_forward": cost["student"], "throughput_x_teacher": cost["student"] / teacher_cost,
            "selected": chosen["variant"],
            **{f"val_{v}": s for v, s in zip(variants["variant"], variants["val_spearman"])},
            "wall_min": float((folder / "wall_s").read_text()) / 60}


def grid_markdown(grid: pd.DataFrame) -> str:
    """The grid as a table to read: per point, both Spearmans with their intervals, whether the student is above
    its labels and apart, its comprehensiveness as a multiple of the teacher's, its cost and throughput, the variant
    kept and the two text students' validation Spearman, the point's wall time."""
    rows = [[f"{r.task} {r.texts} x {r.samples}", f"{r.teacher_passes:,}",
             f"{r.student_spearman:.3f} [{r.student_low:.3f}, {r.student_high:.3f}]",
             f"{r.labels_spearman:.3f} [{r.labels_low:.3f}, {r.labels_high:.3f}]",
             "apart" if r.apart else ("yes" if r.beats_labels else "no"), f"{r.comprehensiveness_ratio:.2f}x",
             f"{1 / r.student_x_forward:.2f}x", f"{r.throughput_x_teacher:.0f}x", r.selected,
             f"{r.val_student_encoder:.3f} / {r.val_student_attention:.3f}", f"{r.wall_min:.1f}"]
            for r in grid.itertuples()]
    return table_lines(["point (texts x samples)", "teacher passes", "student: Spearman with the reference",
                        "its labels", "student above its labels", "comprehensiveness vs teacher",
                        "student's cost (x a forward pass)", "throughput vs teacher", "student kept",
                        "validation: encoder / attention student", "wall (min)"], rows)


def main() -> pd.DataFrame:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=list(TASKS), required=True)
    parser.add_argument("--points", nargs="+", default=["600x200", "1200x100", "2400x50"],
                        help="TEXTSxSAMPLES, each a run of the student (default: 600x200 1200x100 2400x50)")
    parser.add_argument("--held-out", type=int, default=60, help="held-out texts (default 60)")
    parser.add_argument("--report-only", action="store_true", help="tabulate the points already run")
    args = parser.parse_args()
    points = [tuple(int(v) for v in point.split("x")) for point in args.points]
    for texts, samples in points:
        folder = OUT / f"{args.task}_{texts}x{samples}"
        if not args.report_only and not (folder / "done").exists():
            run_point(args.task, texts, samples, args.held_out, folder)
    done = [(t, s) for t, s in points if (OUT / f"{args.task}_{t}x{s}" / "done").exists()]
    grid = pd.DataFrame([grid_row(args.task, t, s, OUT / f"{args.task}_{t}x{s}") for t, s in done])
    tables = {f"{args.task} {t}x{s}": point_tables(args.task, OUT / f"{args.task}_{t}x{s}") for t, s in done}
    text = "\n\n".join([grid_markdown(grid), students_table(tables),
                        student_variants_table(tables)])
    OUT.mkdir(parents=True, exist_ok=True)
    grid.to_csv(OUT / f"{args.task}_grid.csv", index=False)
    (OUT / f"{args.task}_grid.md").write_text(text + "\n")
    print(text)
    return grid


if __name__ == "__main__":
    main()
