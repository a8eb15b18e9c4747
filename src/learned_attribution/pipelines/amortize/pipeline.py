"""amortize (issue 14): for each task classifier (namespace `student_<task>`), a student of an expensive method
trained on the task's unlabeled training texts, scored on held-out texts (fidelity, faithfulness, cost) and on
the task's rationale test set beside the fold's methods, logged to MLflow (experiment `amortize`) and registered.

    kedro run --pipeline amortize        # after `kedro run --pipeline crosstask` (it reads the folds' metrics)
    kedro run --pipeline amortize_own --params "own.classifier=my_model,own.texts=texts.txt"   # your classifier
"""
from typing import Sequence

from kedro.pipeline import Pipeline, node, pipeline

from learned_attribution.pipelines.crosstask.pipeline import _bind
from learned_attribution.core.tasks import TASKS

from .nodes import (amortize_summary, evaluate_student, fit_student, held_out_teacher_scores, log_student, own_texts,
                    plot_costs, student_card, student_plausibility, student_report, student_signals,
                    student_texts, teacher_scores)


def _student_nodes(task: str, plausibility: bool) -> list:
    """From the texts (`train_texts`, `held_out_texts`, `skipped_texts`) on: the teacher, the student, its report
    and its MLflow run; `plausibility` adds the rationale test set's rows and the fold's cost charts."""
    log_inputs = ["report", "student_variants", "fidelity", "faithfulness", "cost", "student", "card", "classifier",
                  "params:amortize", "params:mlflow"]
    nodes = [
        node(teacher_scores, ["classifier", "train_texts", "teacher_cache", "params:amortize", "params:compute"],
             ["teacher", "teacher_failures"], name="teacher"),
        node(held_out_teacher_scores, ["classifier", "held_out_texts", "teacher_cache", "params:amortize",
                                       "params:compute"],
             ["held_out_teacher", "reference_teacher", "held_out_failures"], name="held_out_teacher"),
        node(student_signals, ["classifier", "train_texts", "params:amortize", "params:compute"], "signals",
             name="student_signals"),
        node(_bind(fit_student, task=task), ["classifier", "signals", "teacher", "params:amortize",
                                             "params:max_length", "params:compute"],
             ["student", "student_variants"], name="fit_student"),
        node(evaluate_student, ["classifier", "student", "held_out_texts", "held_out_teacher", "reference_teacher",
                                "params:amortize", "params:compute"],
             ["fidelity", "faithfulness", "cost"], name="evaluate_student"),
        node(_bind(student_card, task=task), ["classifier", "params:amortize"], "card", name="student_card"),
        node(_bind(student_report, task=task),
             ["student_variants", "fidelity", "faithfulness", "cost", "skipped_texts", "teacher_failures",
              "held_out_failures", "train_texts", "held_out_texts", "params:amortize"], "report",
             name="student_report"),
        node(_bind(log_student, task=task), log_inputs + (["plausibility"] if plausibility else []), "mlflow_run",
             name="log_student"),
    ]
    if plausibility:
        nodes += [
            node(_bind(student_plausibility, task=task),
                 ["classifier", "student", "predictions", "fold_metrics", "budget", "params:crosstask",
                  "params:amortize", "params:seed"], "plausibility", name="student_plausibility"),
            node(_bind(plot_costs, task=task), ["plausibility", "fold_cost", "cost"],
                 ["cost_plausibility_plot", "cost_faithfulness_plot"], name="plot_costs"),
        ]
    return nodes


def student_template(task: str) -> Pipeline:
    """A task classifier's student, on the task's unlabeled training texts."""
    return pipeline([
        node(student_texts, ["classifier", "tokenized", "params:amortize", "params:compute"],
             ["train_texts", "held_out_texts", "skipped_texts"], name="student_texts"),
        *_student_nodes(task, plausibility=True),
    ])


def create_own_pipeline() -> Pipeline:
    """`kedro run --pipeline amortize_own --params "own.classifier=DIR,own.texts=FILE"`: the student of a user's
    classifier folder on a user's text file (namespace `student_own`; the catalog reads both paths from the run's
    parameters, by default the SST-2 classifier and the shipped example texts)."""
    return pipeline(
        [node(own_texts, ["classifier", "texts", "params:amortize", "params:compute"],
              ["train_texts", "held_out_texts", "skipped_texts"], name="own_texts"),
         *_student_nodes("own", plausibility=False)],
        namespace="student_own", parameters={"params:amortize", "params:compute", "params:max_length", "params:mlflow"})


def create_pipeline(tasks: Sequence[str] = TASKS, **kwargs) -> Pipeline:
    """One student per task classifier, then the summary of them all."""
    students = [
        pipeline(student_template(task), namespace=f"student_{task}",
                 inputs={"classifier": f"{task}.classifier", "tokenized": f"tokenized_{task}",
                         "predictions": f"{task}.rationale_predictions", "fold_metrics": f"heldout_{task}.fold_metrics",
                         "budget": f"heldout_{task}.budget", "fold_cost": f"heldout_{task}.explain_cost"},
                 parameters={"params:amortize", "params:compute", "params:max_length", "params:crosstask",
                             "params:seed", "params:mlflow"})
        for task in tasks
    ]
    summary = node(amortize_summary, [f"student_{task}.{name}" for task in tasks
                                      for name in ("fidelity", "faithfulness", "cost", "plausibility")],
                   "amortize_summary", name="amortize_summary")
    return pipeline([*students, summary])
