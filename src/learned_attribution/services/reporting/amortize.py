"""The amortized students' reports: one student's page, the summary over the task classifiers, and the students
table of docs/results.md and README."""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from learned_attribution.core.explainers.learned import EXPNET_PLUS, STUDENT

from .tables import interval_text, markdown_table, table_lines, with_intervals

STUDENT_COLUMNS = ["task (teacher texts, held-out texts)", "Spearman with the reference: student",
                   "teacher (its labels)", "student beats its labels",
                   "student with its labels, on its training texts", "comprehensiveness: student", "teacher",
                   "saliency", ">= 0.9x teacher and > saliency", "throughput (x forward): student", "teacher",
                   "AUROC: student", "saliency", "ExpNet+"]

# The one table of a classifier (`classifier_table`): its rows, and its columns besides the top-k agreements.
TABLE_ROWS = (STUDENT, "teacher", "saliency", EXPNET_PLUS)  # "teacher": the row whose method starts with it
TABLE_HEADERS = {"spearman": "Spearman with the reference", "ratio_to_forward": "throughput (x forward)",
                 "auroc": "AUROC (rationale test set)"}


def _intervals(metrics) -> list[str]:
    return [c for m in metrics for c in (m, f"{m}_low", f"{m}_high")]


def _by_method(table: pd.DataFrame | None, columns: list[str]) -> pd.DataFrame:
    """`columns` of `table` (those it has) indexed by method, the first row of each method."""
    if table is None or not len(table):
        return pd.DataFrame(index=pd.Index([], name="method"))
    table = table.assign(method=table["method"].astype(str)).drop_duplicates("method")
    return table.set_index("method")[[c for c in columns if c in table.columns]]


def classifier_table(fidelity: pd.DataFrame, faithfulness: pd.DataFrame, cost: pd.DataFrame,
                     plausibility: pd.DataFrame | None = None, *, task: str | None,
                     counts: Sequence[int] = (5,)) -> pd.DataFrame:
    """One classifier's students table, tidy (one row per method, one column per measurement), on the held-out
    texts: the student, its teacher at the training budget (its labels) and saliency, and ExpNet+ where the
    rationale test set has it. Columns: Spearman and top-k agreement (`top5_tokens`: k tokens, each of `counts`)
    with the reference teacher (`fidelity`), comprehensiveness and sufficiency AOPC (`faithfulness`), each with its
    bootstrap 95% interval (`_low`, `_high`); throughput as a ratio to a forward pass (`cost`); and AUROC on the
    rationale test set at the fold's matched budget, with its interval (`plausibility`; empty without one). A
    measurement a method lacks is empty (NaN)."""
    fidelity_metrics = ["spearman", *(f"top{int(k)}_tokens" for k in counts)]
    columns = ["task", "method", *_intervals(fidelity_metrics), *_intervals(["comprehensiveness", "sufficiency"]),
               "ratio_to_forward", *_intervals(["auroc"])]
    plausible = None
    if plausibility is not None and len(plausibility):
        plausible = plausibility[(plausibility["subset"] == "all") & (plausibility["rule"] == "matched")]
    parts = [_by_method(fidelity, _intervals(fidelity_metrics)),
             _by_method(faithfulness, _intervals(["comprehensiveness", "sufficiency"])),
             _by_method(cost, ["ratio_to_forward"]), _by_method(plausible, _intervals(["auroc"]))]
    named = list(dict.fromkeys(m for part in parts for m in part.index))
    rows = [next((m for m in named if m == row or (row == "teacher" and m.startswith("teacher"))), None)
            for row in TABLE_ROWS]
    table = pd.DataFrame(index=pd.Index([m for m in rows if m is not None], name="method"))
    for part in parts:
        table = table.join(part)
    return table.reset_index().assign(task=task).reindex(columns=columns)


def classifier_table_markdown(table: pd.DataFrame) -> str:
    """`classifier_table` as Markdown: each measurement as `value [low, high]`, the throughput ratio beside."""
    if not len(table):
        return "(no rows)"
    metrics = [c for c in table.columns if f"{c}_low" in table.columns]
    shown = with_intervals(table, metrics, keys=("method",))
    shown.insert(shown.columns.get_loc("auroc"), "ratio_to_forward", table["ratio_to_forward"])
    headers = {c: TABLE_HEADERS.get(c, c.replace("top", "top-").replace("_tokens", " agreement"))
               for c in shown.columns}
    return markdown_table(shown.rename(columns=headers), digits=4)


def report_markdown(result, settings, title: str, table: pd.DataFrame | None = None) -> str:
    """The amortization's report: the classifier's one table (`table`, by default `classifier_table` of the
    result's, without plausibility), then the student variants, fidelity, faithfulness and cost tables, with
    intervals."""
    top = [f"top{round(100 * f)}" for f in settings.top_k_fractions]
    tokens = [f"top{int(k)}_tokens" for k in settings.top_k_tokens]
    reference = settings.teacher.at_budget(settings.reference_factor).describe()
    if table is None:
        table = classifier_table(result.fidelity, result.faithfulness, result.cost, task=None,
                                 counts=settings.top_k_tokens)
    lines = [f"# {title}", "",
             f"Teacher {settings.teacher.describe()} on {result.n_train} unlabeled training texts; {result.n_held_out} "
             f"held-out texts for everything below ({len(result.skipped)} texts skipped as too short, "
             f"{len(result.failures)} teacher failures). Intervals: bootstrap 95% over texts.", "",
             f"## The student beside its labels (the teacher), saliency and the reference, {reference}", "",
             "Fidelity to the reference (Spearman, top-k agreement), faithfulness (ERASER AOPC), throughput as a "
             "multiple of a forward pass, and AUROC on the rationale test set where the classifier has one.", "",
             classifier_table_markdown(table), "",
             "## Student variants (validation Spearman with the teacher's labels)", "",
             markdown_table(result.variants.round(4)), "",
             f"## Fidelity against the reference teacher, {reference}", "",
             "Per-text Spearman correlation and top-k overlap (k = 10% and 20% of the tokens). The teacher's row is "
             "its own agreement, at the training budget, with the reference: the student beats its labels where its "
             "row is higher.", "",
             markdown_table(with_intervals(result.fidelity, ["spearman", *top, *tokens])) if len(result.fidelity) else
             "(no reference: reference_factor 0)", "",
             "## Faithfulness (ERASER AOPC, predicted class)", "",
             markdown_table(with_intervals(result.faithfulness, ["comprehensiveness", "sufficiency"])), "",
             "## Cost (examples per second; ratio to a plain forward pass over the same texts, one run)", "",
             markdown_table(result.cost.round(4)), ""]
    return "\n".join(lines)


def amortize_summary(*tables: pd.DataFrame) -> str:
    """data/08_reporting/amortize.md: one table per task classifier (`classifier_table`, task by task)."""
    lines = ["# Amortized students", "",
             "Per task classifier, one table: its student, trained on the teacher's attributions of the task's "
             "unlabeled training texts, beside its labels (the teacher at the training budget) and saliency, on the "
             "same held-out texts: Spearman and top-k agreement with the reference teacher (reference_factor x the "
             "budget, another draw), ERASER comprehensiveness and sufficiency, throughput as a multiple of a forward "
             "pass, and AUROC on the rationale test set (matched budget, beside ExpNet+). Intervals: bootstrap 95%.",
             ""]
    for table in tables:
        lines += [f"## {table['task'].iloc[0]}", "", classifier_table_markdown(table), ""]
    return "\n".join(lines)


STUDENT_TABLES = ("variants", "fidelity", "faithfulness", "cost", "plausibility")


def students_table(students: dict[str, dict[str, pd.DataFrame]]) -> str:
    """Markdown: per task classifier, its amortized student beside its teacher: Spearman with the
    reference teacher on the held-out texts (the teacher's own at the training budget beside it; the student's with
    its labels on its own training texts, which says whether it underfits), comprehensiveness
    AOPC (student, teacher, saliency), throughput as a ratio to a forward pass, and AUROC on the rationale test set
    (student, saliency, ExpNet+; empty without a `plausibility` table), with 95% intervals; beside the task, the texts
    the student learned from (its teacher's labelled training and validation texts) and the held-out texts."""
    lines = []
    for task, tables in students.items():
        def row(name: str, method: str, prefix: bool = False) -> pd.Series | None:
            table = tables[name]
            chosen = table[table["method"].astype(str).str.startswith(method)] if prefix else \
                table[table["method"] == method]
            return chosen.iloc[0] if len(chosen) else None

        def shown(record, metric: str) -> str:
            return "" if record is None else interval_text(record, metric)

        plausible = tables.get("plausibility")  # none for a classifier without a rationale test set (yours)
        plausible = pd.DataFrame({"method": [], "subset": [], "rule": []}) if plausible is None else plausible
        plausible = plausible[(plausible["subset"] == "all") & (plausible["rule"] == "matched")]
        auroc = {m: plausible[plausible["method"] == m] for m in (STUDENT, "saliency", EXPNET_PLUS)}
        student, teacher = row("fidelity", STUDENT), row("fidelity", "teacher", prefix=True)
        beats = "" if student is None or teacher is None else ("yes" if student["spearman"] > teacher["spearman"]
                                                               else "no")
        cost = tables["cost"].set_index("method")["ratio_to_forward"]
        teacher_cost = next((v for m, v in cost.items() if str(m).startswith("teacher")), float("nan"))
        faithful = {m: row("faithfulness", m, prefix=m == "teacher") for m in (STUDENT, "teacher", "saliency")}
        met = "" if any(v is None for v in faithful.values()) else (
            "yes" if faithful[STUDENT]["comprehensiveness"] >= 0.9 * faithful["teacher"]["comprehensiveness"]
            and faithful[STUDENT]["comprehensiveness"] > faithful["saliency"]["comprehensiveness"] else "no")
        selected = tables["variants"][tables["variants"]["selected"].astype(bool)]
        chosen = selected.iloc[0] if len(selected) else pd.Series(dtype=object)
        taught = [str(int(chosen["n_train"] + chosen["n_val"]))] if {"n_train", "n_val"} <= set(chosen.index) else []
        held_out = [] if student is None else [f"n = {int(student['n_examples'])}"]
        n_texts = f" ({', '.join(taught + held_out)})" if taught or held_out else ""
        on_train = f"{chosen['train_spearman']:.3f}" if "train_spearman" in chosen.index else ""
        lines.append([
            f"{task}{n_texts}", shown(student, "spearman"), shown(teacher, "spearman"), beats, on_train,
            *[shown(faithful[m], "comprehensiveness") for m in (STUDENT, "teacher", "saliency")], met,
            f"{cost.get('student', float('nan')):.3f}", f"{teacher_cost:.4f}",
            *[interval_text(frame.iloc[0], "auroc") if len(frame) else "" for frame in auroc.values()]])
    return table_lines(STUDENT_COLUMNS, lines)


VARIANT_COLUMNS = ["task", "student variant", "Spearman with its labels: training texts", "validation texts",
                   "best epoch", "selected"]


def student_variants_table(students: dict[str, dict[str, pd.DataFrame]]) -> str:
    """Markdown: every student variant of each task classifier (`variants.csv`), best validation first: its
    Spearman with the teacher's labels on its own training texts and on the validation texts (the one it is
    selected by); a training value near the validation one says the variant underfits."""
    lines = []
    for task, tables in students.items():
        for _, row in tables["variants"].iterrows():
            lines.append([task, str(row["variant"]), f"{row['train_spearman']:.3f}", f"{row['val_spearman']:.3f}",
                          str(int(row["best_epoch"])), "yes" if bool(row["selected"]) else ""])
    return table_lines(VARIANT_COLUMNS, lines)


def learning_curve_table(curve: pd.DataFrame) -> str:
    """Markdown: `benchmarks/student_learning_curve.py`'s refits, per task and share of the teacher's texts: the
    variant kept, its Spearman with its labels on its own training texts and on its validation texts (what a choice
    of sizes reads), and the held-out Spearman with the reference teacher, with its interval (what is reported),
    and its change from the share before (rising at the last doubling: the student lacks texts)."""
    rows = []
    for task, group in curve.groupby("task", sort=False):
        change = group.sort_values("n_texts")["spearman"].diff()
        for (_, row), step in zip(group.sort_values("n_texts").iterrows(), change):
            rows.append([task, int(row["n_texts"]), str(row["variant"]), f"{row['train_spearman']:.3f}",
                         f"{row['val_spearman']:.3f}", interval_text(row, "spearman"),
                         "" if pd.isna(step) else f"{step:+.3f}"])
    return table_lines(["task", "teacher texts", "variant kept", "Spearman with its labels: training",
                        "validation", "held-out Spearman with the reference", "held-out: change from the share before"],
                       rows)
