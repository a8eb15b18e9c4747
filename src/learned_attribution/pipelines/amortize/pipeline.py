"""amortize: for each task classifier (namespace `student_<task>`), a student of an expensive method trained on the
task's unlabeled training texts, scored on held-out texts (fidelity, faithfulness, cost) and on the task's rationale
test set beside the fold's methods; the MLflow hook logs each student's run and registers its bundle
(`adapters/hooks/runs.py`).

    kedro run --pipeline amortize        # after `kedro run --pipeline crosstask` (it reads the folds' metrics)
    kedro run --pipeline amortize_own --params "own.classifier=my_model,own.texts=texts.txt"   # your classifier
    kedro run --pipeline amortize --params amortize.teacher_minutes=50   # again until it ends: teacher in stages
"""
from typing import Sequence

from kedro.pipeline import Pipeline, node, pipeline

from learned_attribution.core.tasks import FOLD_PREFIX, STUDENT_PREFIX, TASKS
from learned_attribution.pipelines import bind
from learned_attribution.services.reporting.amortize import amortize_summary

from .nodes import (evaluate_student, fit_student, held_out_teacher_scores, own_texts, plausibility_settings,
                    plot_costs, student_bundle, student_plausibility, student_report, student_settings,
                    student_signals, student_table, student_texts, teacher_scores)

SETTINGS = ["settings", "compute_settings"]
PARAMETERS = {"amortize", "compute", "explained_layer", "max_length"}


def _student_nodes(task: str, plausibility: bool) -> list:
    """From the texts (`train_texts`, `held_out_texts`, `skipped_texts`) on: the teacher, the student, its bundle and
    its report; `plausibility` adds the rationale test set's rows and the fold's cost charts."""
    nodes = [
        node(teacher_scores, ["classifier", "train_texts", "teacher_cache", *SETTINGS, "teacher_deadline"],
             ["teacher", "teacher_failures"], name="teacher"),
        node(held_out_teacher_scores, ["classifier", "held_out_texts", "teacher_cache", *SETTINGS, "teacher_deadline"],
             ["held_out_teacher", "reference_teacher", "held_out_failures"], name="held_out_teacher"),
        node(student_signals, ["classifier", "train_texts", *SETTINGS], "signals", name="student_signals"),
        node(bind(fit_student, task=task), ["classifier", "train_texts", "signals", "teacher", "settings",
                                             "params:max_length", "compute_settings"], ["student", "student_variants"], name="fit_student"),
        node(evaluate_student, ["classifier", "student", "held_out_texts", "held_out_teacher", "reference_teacher",
                                *SETTINGS], ["fidelity", "faithfulness", "cost"], name="evaluate_student"),
        node(bind(student_bundle, task=task), ["classifier", "student", "settings"], "bundle", name="student_bundle"),
        node(bind(student_table, task=task),
             ["fidelity", "faithfulness", "cost", "settings", *(["plausibility"] if plausibility else [])], "table",
             name="student_table"),
        node(bind(student_report, task=task),
             ["table", "student_variants", "fidelity", "faithfulness", "cost", "skipped_texts", "teacher_failures",
              "held_out_failures", "train_texts", "held_out_texts", "settings"], "report", name="student_report"),
    ]
    if plausibility:
        nodes += [
            node(plausibility_settings, ["params:crosstask", "params:explained_layer", "params:seed"], "scoring",
                 name="parse_scoring"),
            node(bind(student_plausibility, task=task),
                 ["classifier", "student", "predictions", "fold_metrics", "budget", "scoring", "settings"],
                 "plausibility", name="student_plausibility"),
            node(bind(plot_costs, task=task), ["plausibility", "fold_cost", "cost"],
                 ["cost_plausibility_plot", "cost_faithfulness_plot"], name="plot_costs"),
        ]
    return nodes


def _settings_node():
    return node(student_settings, ["params:amortize", "params:explained_layer", "params:compute"],
                [*SETTINGS, "teacher_deadline"], name="parse_settings")


def student_template(task: str) -> Pipeline:
    """A task classifier's student, on the task's unlabeled training texts."""
    return pipeline([
        _settings_node(),
        node(student_texts, ["classifier", "tokenized", *SETTINGS], ["train_texts", "held_out_texts", "skipped_texts"],
             name="student_texts"),
        *_student_nodes(task, plausibility=True),
    ])


def create_own_pipeline() -> Pipeline:
    """`kedro run --pipeline amortize_own --params "own.classifier=DIR,own.texts=FILE"`: the student of a user's
    classifier folder on a user's text file (namespace `student_own`; the catalog reads both paths from the run's
    parameters, by default the SST-2 classifier and the shipped example texts)."""
    return pipeline(
        [_settings_node(),
         node(own_texts, ["classifier", "texts", *SETTINGS], ["train_texts", "held_out_texts", "skipped_texts"],
              name="own_texts"),
         *_student_nodes("own", plausibility=False)],
        namespace="student_own", parameters=PARAMETERS)


def create_pipeline(tasks: Sequence[str] = TASKS, **kwargs) -> Pipeline:
    """One student per task classifier, then the summary of them all."""
    students = [
        pipeline(student_template(task), namespace=f"{STUDENT_PREFIX}{task}",
                 inputs={"classifier": f"{task}.classifier", "tokenized": f"tokenized_{task}",
                         "predictions": f"{task}.rationale_predictions",
                         "fold_metrics": f"{FOLD_PREFIX}{task}.fold_metrics", "budget": f"{FOLD_PREFIX}{task}.budget",
                         "fold_cost": f"{FOLD_PREFIX}{task}.explain_cost"},
                 parameters=PARAMETERS | {"crosstask", "seed"})
        for task in tasks
    ]
    summary = node(amortize_summary, [f"{STUDENT_PREFIX}{task}.table" for task in tasks], "amortize_summary",
                   name="amortize_summary")
    return pipeline([*students, summary])
