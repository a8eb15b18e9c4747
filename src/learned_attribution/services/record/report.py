"""The record's baselines table: every method of every fold on the examples the record holds for it, in both modes,
with bootstrap intervals, its coverage of the fold's examples, the learned explainers' paired difference from it on
the same examples, and its cost per explanation where the record timed it."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from learned_attribution.core.data.modes import GOLD, MODES, PREDICTED
from learned_attribution.core.explainers.learned import EXPNET_PLUS, PAPER_EXPNET
from learned_attribution.core.metrics.plausibility import bootstrap_ci, paired_bootstrap_diff

from .baselines import MAIN_JOB, RECORD_COLUMNS
from .parts import RecordError, read_part

TABLE_COLUMNS = ["task", "mode", "method", "n_examples", "coverage", "auroc", "auroc_low", "auroc_high", "f1",
                 "f1_low", "f1_high", "expnet_plus_minus_auroc", "expnet_plus_minus_auroc_low",
                 "expnet_plus_minus_auroc_high", "seconds_per_explanation", "kernels"]


def read_record(folder: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every finished part under `folder` (<task>/<method>/part-NNN.csv): (the rows with their `task`, one row per
    part: task, method, path, rows, seconds, explanations, kernels). `RecordError` naming the table when a part is
    not finished, edited, or of another run than its fold's main-job part."""
    folder = Path(folder)
    frames, parts = [], []
    for task_folder in sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []:
        main = task_folder / MAIN_JOB / "part-000.csv"
        if not main.is_file():
            raise RecordError(f"{task_folder}: no {MAIN_JOB} part; run the record pipeline after the main job")
        _, main_meta = read_part(main, RECORD_COLUMNS)
        for path in sorted(task_folder.glob("*/part-*.csv")):
            rows, meta = read_part(path, RECORD_COLUMNS)
            if meta.run != main_meta.run:
                raise RecordError(f"{path}: computed for another run of the fold ({meta.run}) than its {MAIN_JOB} "
                                  f"part ({main_meta.run}); recompute it (run the record pipeline again)")
            frames.append(rows.assign(task=task_folder.name))
            parts.append({"task": task_folder.name, "method": path.parent.name, "path": str(path),
                          "rows": meta.rows, "seconds": meta.seconds, "explanations": meta.explanations,
                          "kernels": meta.kernels})
    if not frames:
        raise RecordError(f"{folder}: no record parts")
    rows = pd.concat(frames, ignore_index=True)
    twice = rows.duplicated(["task", "method", "mode", "example_id"], keep=False)
    if twice.any():
        first = rows[twice].iloc[0]
        raise RecordError(f"{folder / first['task']}: {int(twice.sum())} rows hold an example twice (e.g. "
                          f"{first['method']} on {first['example_id']}, {first['mode']} mode): two parts of one method")
    return rows, pd.DataFrame(parts)


def in_mode(rows: pd.DataFrame, mode: str) -> pd.DataFrame:
    """Per-example rows in `mode`: predicted mode's rows, with each mispredicted example's gold row in its place in
    gold mode (a class-agnostic method has none: its predicted row is its gold row)."""
    predicted = rows[rows["mode"] == PREDICTED]
    if mode == PREDICTED:
        return predicted
    gold = rows[rows["mode"] == GOLD]
    keys = ["task", "method", "example_id"]
    replaced = predicted.set_index(keys).index.isin(gold.set_index(keys).index)
    return pd.concat([predicted[~replaced], gold], ignore_index=True)


def record_table(rows: pd.DataFrame, parts: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """One row per task, mode and method (`TABLE_COLUMNS`): mean AUROC and matched F1 with bootstrap 95% intervals
    over the examples the record holds for it (failed explanations left out), its coverage of the fold's examples,
    ExpNet+'s paired AUROC difference from it on the same examples, and the seconds per explanation of its record
    parts (NaN for the main job's methods: their cost is the fold's cost table's)."""
    out = []
    for mode in MODES:
        table = in_mode(rows, mode)
        table = table[table["error"].isna()]
        for task, fold in table.groupby("task", sort=True):
            n_fold = fold["example_id"].nunique()
            plus = fold[fold["method"] == EXPNET_PLUS].set_index("example_id")["auroc"]
            for method, group in fold.groupby("method", sort=False):
                auroc = group["auroc"].to_numpy(float)
                defined = auroc[~np.isnan(auroc)]
                f1 = group["f1"].to_numpy(float)
                timed = parts[(parts["task"] == task) & (parts["method"] == method)]
                diff = (np.nan, np.nan, np.nan)
                if method != EXPNET_PLUS and len(plus):
                    own = group.set_index("example_id")["auroc"]
                    shared = own.index.intersection(plus.index)
                    diff = paired_bootstrap_diff(plus.loc[shared].to_numpy(float), own.loc[shared].to_numpy(float),
                                                 n_boot, seed)
                out.append({"task": task, "mode": mode, "method": method, "n_examples": len(group),
                            "coverage": len(group) / n_fold, "auroc": float(defined.mean()) if len(defined) else
                            np.nan, **dict(zip(("auroc_low", "auroc_high"), bootstrap_ci(defined, n_boot, seed)
                                                if len(defined) else (np.nan, np.nan))),
                            "f1": float(f1.mean()), **dict(zip(("f1_low", "f1_high"), bootstrap_ci(f1, n_boot, seed))),
                            **dict(zip(("expnet_plus_minus_auroc", "expnet_plus_minus_auroc_low",
                                        "expnet_plus_minus_auroc_high"), diff)),
                            "seconds_per_explanation": (timed["seconds"].sum() / timed["explanations"].sum()
                                                        if len(timed) and timed["explanations"].sum() else np.nan),
                            "kernels": ", ".join(sorted(set(timed["kernels"]))) if len(timed) else ""})
    table = pd.DataFrame(out, columns=TABLE_COLUMNS)
    first = {EXPNET_PLUS: 0, PAPER_EXPNET: 1}
    order = table.assign(_mode=table["mode"].map(MODES.index), _method=table["method"].map(first).fillna(2))
    return (order.sort_values(["task", "_mode", "_method"], kind="stable").drop(columns=["_mode", "_method"])
            .reset_index(drop=True))


def _cells(row) -> tuple[str, str, str, str]:
    """A table row's examples (coverage), AUROC [CI], ExpNet+'s paired difference [CI] and seconds per explanation
    as markdown cells (empty where undefined)."""
    diff = ("" if np.isnan(row.expnet_plus_minus_auroc) else
            f"{row.expnet_plus_minus_auroc:+.3f} [{row.expnet_plus_minus_auroc_low:+.3f}, "
            f"{row.expnet_plus_minus_auroc_high:+.3f}]")
    cost = "" if np.isnan(row.seconds_per_explanation) else f"{row.seconds_per_explanation:.3f}"
    return (f"{row.n_examples} ({row.coverage:.0%})", f"{row.auroc:.3f} [{row.auroc_low:.3f}, {row.auroc_high:.3f}]",
            diff, cost)


def record_markdown(table: pd.DataFrame) -> str:
    """The table as markdown, one section per task and mode."""
    lines = []
    for (task, mode), group in table.groupby(["task", "mode"], sort=False):
        lines += [f"### {task}, {mode} mode", "",
                  "| method | examples (coverage) | AUROC [95% CI] | matched F1 [95% CI] | ExpNet+ minus it, AUROC "
                  "[95% CI] | s per explanation |", "|---|---|---|---|---|---|"]
        for row in group.itertuples():
            coverage, auroc, diff, cost = _cells(row)
            lines.append(f"| {row.method} | {coverage} | {auroc} | {row.f1:.3f} [{row.f1_low:.3f}, "
                         f"{row.f1_high:.3f}] | {diff} | {cost} |")
        lines.append("")
    return "\n".join(lines)


def record_section(table: pd.DataFrame, parts: pd.DataFrame) -> str:
    """The results document's table of the record: per fold and mode, ExpNet+ and each method the record ran on
    every example (its parts), with coverage, AUROC, ExpNet+'s paired difference and the cost per explanation."""
    timed = set(parts.loc[parts["explanations"] > 0, "method"])
    kernels = ", ".join(sorted(set(parts.loc[parts["explanations"] > 0, "kernels"]))) or "none yet"
    lines = ["| fold | mode | method | examples (coverage) | AUROC [95% CI] | ExpNet+ minus it [95% CI] | "
             "s per explanation |", "|---|---|---|---|---|---|---|"]
    shown = table[table["method"].isin(timed | {EXPNET_PLUS})]
    for row in shown.itertuples():
        coverage, auroc, diff, cost = _cells(row)
        lines.append(f"| {row.task} | {row.mode} | {row.method} | {coverage} | {auroc} | {diff} | {cost} |")
    minutes = parts[parts["explanations"] > 0].groupby("method", sort=False)["seconds"].sum() / 60
    spent = ", ".join(f"{method} {value:.1f}" for method, value in minutes.items())
    return "\n".join(lines + ["", coverage_line(table), "",
                               f"The record's parts took {minutes.sum():.1f} min of wall time ({spent}), on "
                               f"{kernels}."])


def coverage_line(table: pd.DataFrame) -> str:
    """How many methods the record holds on every example of every fold in both modes, and which fall short."""
    # a fold and mode the record holds no row of for a method counts as 0%
    per_method = table.pivot_table(index="method", columns=["task", "mode"], values="coverage").fillna(0).min(axis=1)
    complete = sorted(per_method[per_method >= 1].index)
    short = [f"{method} {value:.0%}" for method, value in per_method[per_method < 1].items()]
    folds = table["task"].nunique()
    return (f"Methods on every example of all {folds} folds in both modes: {len(complete)} of {len(per_method)}"
            f"{' (below 100%: ' + ', '.join(short) + ')' if short else ''}.")


def record_summary(table: pd.DataFrame, parts: pd.DataFrame) -> str:
    """README's table of the record: per fold and mode, ExpNet+'s AUROC and its paired difference from each method
    the record ran on every example, with intervals."""
    timed = sorted(set(parts.loc[parts["explanations"] > 0, "method"]))
    lines = ["| fold | mode | ExpNet+ AUROC | " + " | ".join(f"minus {method}" for method in timed) + " |",
             "|---|---|---|" + "---|" * len(timed)]
    for (task, mode), group in table.groupby(["task", "mode"], sort=False):
        rows = group.set_index("method")
        if EXPNET_PLUS not in rows.index:
            continue
        cells = []
        for method in timed:
            if method not in rows.index:
                cells.append("")
                continue
            row = rows.loc[method]
            cells.append(f"{row.expnet_plus_minus_auroc:+.3f} [{row.expnet_plus_minus_auroc_low:+.3f}, "
                         f"{row.expnet_plus_minus_auroc_high:+.3f}] ({row.coverage:.0%})")
        plus = rows.loc[EXPNET_PLUS]
        lines.append(f"| {task} | {mode} | {plus.auroc:.3f} [{plus.auroc_low:.3f}, {plus.auroc_high:.3f}] | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines + ["", coverage_line(table)])
