"""Amortized explainers: a one-pass *student* trained to reproduce an expensive attribution method (its *teacher*:
KernelSHAP by default; LIME, occlusion, Integrated Gradients too) on a classifier's own unlabeled texts. No rationales
are read and any supported classifier can be explained: the student's inputs are that classifier's single-pass
signals (`core/models/signals.py`), its network the one learned-explainer core (`models/learned`, objective `distill`,
early stopping on the validation teacher labels' per-example Spearman).

The steps, each a plain function that the Kedro pipeline `amortize`, the `learned-attribution fit` command and the
tests call alike:
1. `examples`: texts -> subword ids and the classifier's predicted class (the class every method explains); texts
   with fewer than `MIN_TOKENS` real tokens have nothing to rank and are skipped, counted and listed; a seeded split
   into training and held-out texts.
2. `teacher.teacher_attributions`: the teacher on every text, in process or as Dask tasks, written as Parquet parts
   of `part_size` texts into a cache folder. Each part is written atomically under a name that fingerprints what it
   holds (the teacher and its settings, the classifier's weights, the texts' ids), so a killed run resumes where it
   stopped and never reuses a part computed for other inputs. A text the teacher fails on is listed with its error
   and left out of the student's training. With `teacher_minutes`, an invocation starts no part past that many
   minutes and stops with `TeacherUnfinished` (the parts kept): a long teacher runs as several invocations.
3. `student.student_signals`: the classifier's signals for the same texts.
4. `student.fit_student`: every student variant trained on the teacher's scores (a seeded validation slice of the
   texts for early stopping): the per-token networks over the signals, the encoder student over the texts' token
   ids (a copy of the classifier's encoder, `models/learned/encoder.py`), the attention student over the
   classifier's hidden states (new attention layers, `models/learned/attention_student.py`); the one with the best
   validation Spearman is the student.
5. `scores.evaluate_student`: fidelity, faithfulness and throughput on held-out texts, against a reference teacher
   at `reference_factor` x the training budget (an independent draw for the sampling teachers).

A student is bound to the classifier it was trained on (its weights' fingerprint is in its context); applying it to
another classifier is refused, naming both (`models/artifacts.check_compatible`). Its folder is a bundle
(`services/bundle.py`). This module holds the end-to-end `amortize` of the `fit` command and the student's bundle.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import pandas as pd
import torch

from learned_attribution.core.models.architectures import architecture

from .. import bundle as bundles
from ..reporting.amortize import classifier_table, report_markdown
from .examples import classifier_max_length, text_examples
from .scores import evaluate_student
from ..config import AmortizeSettings
from .student import fit_student, student_signals
from .teacher import teacher_attributions
from ..deadline import invocation_deadline

logger = logging.getLogger(__name__)

TABLES = ("variants", "fidelity", "faithfulness", "cost", "skipped", "failures")  # what a student's folder carries


@dataclass
class Amortized:
    """What one amortization produced: the student and its report tables."""

    student: Any  # core.models.learned.LearnedModel
    variants: pd.DataFrame  # every student variant's validation Spearman (the selected one first)
    fidelity: pd.DataFrame  # student and teacher against the reference teacher, on the held-out texts
    faithfulness: pd.DataFrame  # student, teacher and saliency: comprehensiveness and sufficiency (AOPC)
    cost: pd.DataFrame  # examples per second and the ratio to a plain forward pass
    skipped: pd.DataFrame  # texts not used (too short, empty), with the reason
    failures: pd.DataFrame  # texts the teacher failed on (training and held-out), with the error
    n_train: int = 0
    n_held_out: int = 0


def student_context(settings: AmortizeSettings, max_length: int, **extra) -> dict:
    """What a student's saved context records besides its classifier: the teacher, the layer read, its rationale
    share and max_length."""
    return {**extra, "teacher": settings.teacher.identity(), "layer": settings.layer, "rho": settings.rho,
            "max_length": int(max_length)}


def student_card_for(settings: AmortizeSettings, classifier, task: str | None = None) -> dict:
    """The card of a student's bundle: its teacher is the baseline shown beside it."""
    return bundles.student_card(teacher=settings.teacher.method, teacher_settings=settings.teacher.settings,
                                classifier=classifier, rho=settings.rho, layer=settings.layer, task=task)


def amortize(classifier, texts: Sequence[str | Sequence[str]], ids: Sequence[str] | None, settings: AmortizeSettings,
             cache: str | Path, dask=None, device: str | torch.device = "cpu", progress: bool = True,
             context: dict | None = None) -> Amortized:
    """Every step for one classifier and its unlabeled texts: split off the held-out texts, the teacher on the
    training texts (cached parts, resumable; on Dask with `dask`), the signals, the student, and its evaluation on
    the held-out texts against the reference teacher (`reference_factor` x the budget; with 0, the fidelity table
    is skipped). With `settings.teacher_minutes`, the three teacher runs share that many minutes from the start of
    this call and `teacher.TeacherUnfinished` is raised when they run out (the parts computed are kept: call again
    to continue)."""
    architecture(classifier.model)  # an unsupported family stops here, before any work, naming the supported ones
    deadline = invocation_deadline(settings.teacher_minutes)
    cache = Path(cache)
    train, held_out, skipped = text_examples(classifier, texts, ids, settings)
    max_length = classifier_max_length(classifier, settings)
    logger.info("amortize: %d training texts, %d held-out texts, %d skipped; teacher %s", len(train), len(held_out),
                len(skipped), settings.teacher.describe())
    parts = {"part_size": settings.part_size, "batch_size": settings.batch_size, "progress": progress,
             "deadline": deadline}
    run = teacher_attributions(classifier, train, settings.teacher, cache / "train", dask=dask, **parts)
    held_teacher = teacher_attributions(classifier, held_out, settings.teacher, cache / "held_out", **parts)
    reference = (teacher_attributions(classifier, held_out, settings.teacher.at_budget(settings.reference_factor),
                                      cache / "reference", dask=dask, **parts) if settings.reference_factor else None)
    signals = student_signals(classifier, train, settings.feature_sets, settings.layer, 2 * settings.batch_size)
    student, variants = fit_student(classifier, train, signals, run.scores, settings.variants, settings.training_settings(),
                                    settings.val_fraction, settings.seed, device, layer=settings.layer,
                                    context=student_context(settings, max_length, **(context or {})))
    fidelity, faithful, cost = evaluate_student(classifier, student, held_out, held_teacher.scores,
                                                None if reference is None else reference.scores, settings)
    failures = pd.concat([run.failures.assign(texts="train"), held_teacher.failures.assign(texts="held_out")],
                         ignore_index=True)
    return Amortized(student, variants, fidelity, faithful, cost, skipped, failures, len(train), len(held_out))


def student_bundle(result: Amortized, settings: AmortizeSettings, classifier, title: str,
                   task: str | None = None) -> bundles.Bundle:
    """A student's bundle: the student, its card, its tables (`table.csv`: the one table of `classifier_table`) and
    its report."""
    table = classifier_table(result.fidelity, result.faithfulness, result.cost, task=task,
                             counts=settings.top_k_tokens)
    return bundles.Bundle(card=student_card_for(settings, classifier, task), learned={bundles.STUDENT: result.student},
                          tables={**{name: getattr(result, name) for name in TABLES}, "table": table},
                          report=report_markdown(result, settings, title, table))
