"""Nodes of the amortize pipeline: thin calls into `services/amortize`, one classifier per namespace."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import matplotlib.figure
import pandas as pd

from learned_attribution.core.models.loading import TrainedClassifier
from learned_attribution.core.models.learned import LearnedModel
from learned_attribution.core.explainers.learned import STUDENT
from learned_attribution.services import amortize as amortization
from learned_attribution.services import bundle as bundles
from learned_attribution.services.amortize.examples import task_examples, text_examples
from learned_attribution.services.amortize.scores import evaluate_student as evaluated, plausibility_rows
from learned_attribution.services.config import AmortizeSettings, amortize_settings
from learned_attribution.services.amortize.student import fit_student as fitted, student_signals as signals_of
from learned_attribution.services.amortize.teacher import TeacherRun, teacher_attributions
from learned_attribution.services.deadline import invocation_deadline
from learned_attribution.services.config import ComputeSettings, ScoringSettings, compute_settings, scoring_settings
from learned_attribution.services.evaluation.cost import cost_plausibility
from learned_attribution.services.reporting.amortize import classifier_table, report_markdown
from learned_attribution.services.reporting.charts import cost_faithfulness_chart, cost_plausibility_chart

logger = logging.getLogger(__name__)


def student_settings(amortize: dict[str, Any], layer: int, compute: dict[str, Any]
                     ) -> tuple[AmortizeSettings, ComputeSettings, float]:
    """The student's parameter blocks, parsed once: `amortize` (on the code defaults) at the explained layer, and
    `compute`; and the teacher's deadline in this run, `amortize.teacher_minutes` from now (infinity without it):
    this node reads parameters only, so it runs at the start of a run and the run's teacher nodes share the
    minutes."""
    settings = amortize_settings(amortize, layer)
    return settings, compute_settings(compute), invocation_deadline(settings.teacher_minutes)


def plausibility_settings(crosstask: dict[str, Any], layer: int, seed: int) -> ScoringSettings:
    """The folds' scoring protocol, which a task classifier's student is scored by on the rationale test set."""
    return scoring_settings(crosstask, layer, seed)


def _scores_table(run: TeacherRun) -> pd.DataFrame:
    return run.scores.assign(scores=run.scores["scores"].map(lambda s: [float(v) for v in s]))


def student_texts(classifier: TrainedClassifier, tokenized: pd.DataFrame, settings: AmortizeSettings,
                  compute: ComputeSettings) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The task's unlabeled training texts (never a rationale set): (training texts, held-out texts, skipped
    texts), each text with its predicted class."""
    compute.place(classifier.model)
    train, held_out, skipped = task_examples(classifier, tokenized, settings)
    logger.info("%s: %d training and %d held-out texts for the student, %d skipped", tokenized["task"].iloc[0],
                len(train), len(held_out), len(skipped))
    return train, held_out, skipped


def own_texts(classifier: TrainedClassifier, texts: pd.DataFrame, settings: AmortizeSettings,
              compute: ComputeSettings) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """A user's text file for the student of a user's classifier, split as `learned-attribution fit` splits it."""
    compute.place(classifier.model)
    train, held_out, skipped = text_examples(classifier, list(texts["text"]), list(texts["example_id"]), settings)
    logger.info("own classifier %s: %d training and %d held-out texts for the student, %d skipped", classifier.path,
                len(train), len(held_out), len(skipped))
    return train, held_out, skipped


def teacher_scores(classifier: TrainedClassifier, texts: pd.DataFrame, cache: Path, settings: AmortizeSettings,
                   compute: ComputeSettings, deadline: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The teacher on the training texts, in resumable parts under `cache` (on Dask where configured), none
    started past the run's `deadline`: (token scores, failures)."""
    compute.place(classifier.model)
    run = teacher_attributions(classifier, texts, settings.teacher, Path(cache) / "train",
                               part_size=settings.part_size, batch_size=settings.batch_size, dask=compute.dask,
                               deadline=deadline)
    return _scores_table(run), run.failures


def held_out_teacher_scores(classifier: TrainedClassifier, texts: pd.DataFrame, cache: Path,
                            settings: AmortizeSettings, compute: ComputeSettings, deadline: float
                            ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """On the held-out texts: the teacher at its training budget and the reference teacher (`reference_factor` x
    the budget, an independent draw), both in resumable parts, none started past the run's `deadline`; (teacher
    scores, reference scores, failures)."""
    compute.place(classifier.model)
    runs = {name: teacher_attributions(classifier, texts, teacher, Path(cache) / name, part_size=settings.part_size,
                                       batch_size=settings.batch_size, dask=compute.dask, deadline=deadline)
            for name, teacher in (("held_out", settings.teacher),
                                  ("reference", settings.teacher.at_budget(max(1, settings.reference_factor))))}
    failures = pd.concat([r.failures.assign(teacher=name) for name, r in runs.items()], ignore_index=True)
    return _scores_table(runs["held_out"]), _scores_table(runs["reference"]), failures


def student_signals(classifier: TrainedClassifier, texts: pd.DataFrame, settings: AmortizeSettings,
                    compute: ComputeSettings) -> pd.DataFrame:
    """The classifier's single-pass signals for the training texts (every set a student variant reads)."""
    compute.place(classifier.model)
    return signals_of(classifier, texts, settings.feature_sets, settings.layer, 2 * settings.batch_size)


def fit_student(classifier: TrainedClassifier, texts: pd.DataFrame, signals: pd.DataFrame, teacher: pd.DataFrame,
                settings: AmortizeSettings, max_length: int, compute: ComputeSettings, *, task: str
                ) -> tuple[LearnedModel, pd.DataFrame]:
    """Every student variant trained on the teacher's scores (of the training `texts`, from their `signals` or their
    token ids, the attention student from the classifier's hidden states, computed on the compute device); the best on
    validation Spearman is the student."""
    compute.place(classifier.model)
    return fitted(classifier, texts, signals, teacher, settings.variants, settings.training_settings(), settings.val_fraction,
                  settings.seed, compute.device, context=amortization.student_context(settings, max_length, task=task),
                  layer=settings.layer)


def evaluate_student(classifier: TrainedClassifier, student: LearnedModel, texts: pd.DataFrame, teacher: pd.DataFrame,
                     reference: pd.DataFrame, settings: AmortizeSettings, compute: ComputeSettings
                     ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Fidelity to the reference teacher, faithfulness and cost of the student, its teacher and saliency on the
    held-out texts."""
    compute.place(classifier.model)
    return evaluated(classifier, student, texts, teacher, reference if settings.reference_factor else None, settings)


def student_bundle(classifier: TrainedClassifier, student: LearnedModel, settings: AmortizeSettings, *,
                   task: str) -> bundles.Bundle:
    """The student's folder (what `StudentExplainer` and the served model read): the student and its card."""
    return bundles.Bundle(amortization.student_card_for(settings, classifier, task), {bundles.STUDENT: student})


def student_table(fidelity: pd.DataFrame, faithfulness: pd.DataFrame, cost: pd.DataFrame, settings: AmortizeSettings,
                  plausibility: pd.DataFrame | None = None, *, task: str) -> pd.DataFrame:
    """data/08_reporting/amortize/<task>_table.csv: the classifier's one table (fidelity, faithfulness, cost and,
    with the rationale test set's rows, plausibility; `reporting.amortize.classifier_table`)."""
    return classifier_table(fidelity, faithfulness, cost, plausibility, task=task, counts=settings.top_k_tokens)


def student_report(table: pd.DataFrame, variants: pd.DataFrame, fidelity: pd.DataFrame, faithfulness: pd.DataFrame,
                   cost: pd.DataFrame, skipped: pd.DataFrame, train_failures: pd.DataFrame,
                   held_out_failures: pd.DataFrame, train: pd.DataFrame, held_out: pd.DataFrame,
                   settings: AmortizeSettings, *, task: str) -> str:
    """data/08_reporting/amortize/<task>.md: the classifier's one table, then the tables it is made of."""
    result = amortization.Amortized(None, variants, fidelity, faithfulness, cost, skipped,
                                    pd.concat([train_failures, held_out_failures], ignore_index=True), len(train),
                                    len(held_out))
    return report_markdown(result, settings, f"Student of the {task} classifier", table)


def student_plausibility(classifier: TrainedClassifier, student: LearnedModel, predictions: pd.DataFrame,
                         fold_metrics: pd.DataFrame, budget: dict[str, float], scoring: ScoringSettings,
                         settings: AmortizeSettings, *, task: str) -> pd.DataFrame:
    """The student's rows on the task's rationale test set (the fold's protocol and budget), beside the fold's
    matched rows of every method."""
    rows = plausibility_rows(classifier, student, predictions, budget["rho"], scoring, settings.layer, task)
    return pd.concat([rows, fold_metrics[fold_metrics["rule"] == "matched"]], ignore_index=True)


def plot_costs(plausibility: pd.DataFrame, fold_cost: pd.DataFrame, student_cost: pd.DataFrame, *, task: str
               ) -> tuple[matplotlib.figure.Figure, matplotlib.figure.Figure]:
    """The fold's two cost charts with the student in them (PNG): throughput (ratio to a plain forward pass) against
    AUROC and against comprehensiveness AOPC on the fold's seeded sample. The fold's methods are timed in the fold,
    the student on the held-out texts of this pipeline, each against a forward pass over the same texts."""
    student = student_cost[student_cost["method"] == STUDENT][["method", "ratio_to_forward"]]
    cost = pd.concat([fold_cost[["method", "ratio_to_forward"]], student], ignore_index=True)
    plausible = cost_plausibility(plausibility, cost)
    ratios = dict(zip(cost["method"], cost["ratio_to_forward"]))
    sample = plausibility[(plausibility["subset"] == "sample") & plausibility["comprehensiveness"].notna()]
    sample = sample.drop_duplicates("method")
    faithful = sample.assign(ratio_to_forward=sample["method"].map(ratios)).dropna(subset=["ratio_to_forward"])
    title = f"heldout_{task}: cost vs {{}} of every method and the amortized student"
    return (cost_plausibility_chart(plausible, title.format("plausibility")),
            cost_faithfulness_chart(faithful[["method", "family", "ratio_to_forward", "comprehensiveness"]],
                                    title.format("faithfulness (the fold's sample)")))
