"""Amortized explainers (issue 14): a one-pass *student* trained to reproduce an expensive attribution method (its
*teacher*: KernelSHAP by default; LIME, occlusion, Integrated Gradients too) on a classifier's own unlabeled texts.
No rationales are read and any supported classifier can be explained: the student's inputs are that classifier's
single-pass signals (`models/signals.py`), its network the one learned-explainer core (`models/learned`, objective
`distill`, early stopping on the validation teacher labels' per-example Spearman).

The steps, each a plain function that the Kedro pipeline `amortize`, the `learned-attribution fit` command and the
tests call alike:
1. `unlabeled_examples`: texts -> subword ids and the classifier's predicted class (the class every method explains);
   texts with fewer than `MIN_TOKENS` real tokens have nothing to rank and are skipped, counted and listed.
2. `teacher_attributions`: the teacher on every text, in process or as Dask tasks (`distributed.py`), written as
   Parquet parts of `part_size` texts into a cache folder. Each part is written atomically under a name that
   fingerprints what it holds (the teacher and its settings, the classifier's weights, the texts' ids), so a killed
   run resumes where it stopped and never reuses a part computed for other inputs. A text the teacher fails on is
   listed with its error and left out of the student's training.
3. `student_signals`: the classifier's signals for the same texts.
4. `fit_student`: every student variant trained on the teacher's scores (a seeded validation slice of the texts for
   early stopping); the one with the best validation Spearman is the student.
5. `fidelity_table`, faithfulness (`metrics/faithfulness.py`) and throughput on held-out texts, against a reference
   teacher at `reference_factor` x the training budget (an independent draw for the sampling teachers).

A student is bound to the classifier it was trained on (its weights' fingerprint is in its context); applying it to
another classifier is refused, naming both (`models/artifacts.check_compatible`).

Modules: `teacher` (step 2), `student` (steps 1, 3, 4), `scores` (step 5); this one holds the settings
(`AmortizeSettings`), the end-to-end `amortize` of the `fit` command, and the student's folder and report.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
import torch

from .scores import evaluate_student, faithfulness_table, fidelity_table, learning_curve, scores_of, student_explainer
from .student import (MIN_TOKENS, fit_student, labelled_rows, predicted_examples, split_examples, split_short,
                      student_signals, student_variants, unlabeled_examples)
from .teacher import TEACHER_BUDGETS, Teacher, TeacherRun, teacher_attributions

logger = logging.getLogger(__name__)

__all__ = ["MIN_TOKENS", "TEACHER_BUDGETS", "AmortizeSettings", "Amortized", "Teacher", "TeacherRun", "amortize",
           "evaluate_student", "faithfulness_table", "fidelity_table", "fit_student", "labelled_rows", "learning_curve",
           "predicted_examples", "report_markdown", "save_amortized", "scores_of", "split_examples", "split_short",
           "split_held_out", "student_card", "student_explainer", "student_signals", "student_variants", "task_examples",
           "log_student_run", "teacher_attributions", "unlabeled_examples"]


# The default student variants (conf/base/parameters_amortize.yml states the same; a test keeps them equal): one over
# forward-pass signals only (about a forward pass in cost), one that adds the gradient sets (one backward pass), and
# each of the two with the tokens' last hidden states (`hidden_state`: the token in its context; globally
# standardised, since z-scores within the example would remove the text's shared representation).
_FORWARD_SETS = ["attention", "raw_attention_layers", "afn_norm", "position", "token_kind"]
_GRADIENT_SETS = ["attention", "attention_x_gradient", "layer_gradient", "saliency", "raw_attention_layers",
                  "afn_norm", "position", "token_kind"]
DEFAULT_VARIANTS = {
    "student_forward": {"feature_sets": _FORWARD_SETS, "example_z": True},
    "student_gradient": {"feature_sets": _GRADIENT_SETS, "example_z": True},
    "student_forward_hidden": {"feature_sets": [*_FORWARD_SETS, "hidden_state"]},
    "student_gradient_hidden": {"feature_sets": [*_GRADIENT_SETS, "hidden_state"]},
}
DEFAULT_TRAINING = {"hidden": 32, "learning_rate": 2.0e-3, "batch_size": 32, "max_epochs": 60, "patience": 6,
                    "seeds": 3}


@dataclass
class AmortizeSettings:
    """One amortization's settings (`amortize` in conf/base/parameters_amortize.yml; the `fit` command's options)."""

    teacher: Teacher = field(default_factory=lambda: Teacher("kernel_shap", {"n_samples": 200, "seed": 0}))
    variants: dict = field(default_factory=lambda: dict(DEFAULT_VARIANTS))
    training: dict = field(default_factory=lambda: dict(DEFAULT_TRAINING))
    max_texts: int | None = 4000  # texts the teacher explains for training (a seeded sample of them when more)
    held_out_texts: int = 200  # further texts, never trained on, on which fidelity, faithfulness and cost are measured
    cost_texts: int = 24  # of the held-out texts: those the teacher's own throughput is timed on
    reference_factor: int = 10  # the reference teacher's budget, as a multiple of the training budget
    val_fraction: float = 0.15  # of the training texts: the student's early-stopping slice
    part_size: int = 64
    batch_size: int = 16
    max_length: int = 128
    layer: int = -1
    rho: float = 0.2  # the top-k share of the words a student's (and its teacher's) rationale marks in `explain`
    faithfulness_fractions: tuple = (0.01, 0.05, 0.1, 0.2, 0.5)
    top_k_fractions: tuple = (0.1, 0.2)
    n_boot: int = 1000
    seed: int = 0

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "AmortizeSettings":
        params = dict(params or {})
        params.pop("mlflow", None)  # where the pipeline logs (pipelines/amortize), not how a student is made
        teacher = params.pop("teacher", None)
        student = params.pop("student", None) or {}
        unknown = set(params) - set(cls.__dataclass_fields__) - {"teacher", "student"}
        if unknown:
            raise ValueError(f"unknown parameters amortize.{sorted(unknown)}; expected "
                             f"{sorted(set(cls.__dataclass_fields__) - {'variants', 'training'})} and student")
        settings = cls(**params)
        if teacher is not None:
            settings.teacher = Teacher(teacher.get("method", "kernel_shap"), dict(teacher.get("settings") or {}))
        if student.get("variants") is not None:
            settings.variants = dict(student["variants"])
        if student.get("training") is not None:
            settings.training = dict(student["training"])
        settings.check()
        return settings

    def check(self) -> None:
        for key in ("held_out_texts", "cost_texts", "reference_factor", "part_size", "batch_size", "max_length"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if key == "reference_factor" else 1):
                raise ValueError(f"parameter amortize.{key}={value!r}: must be a positive integer")
        if self.max_texts is not None and (not isinstance(self.max_texts, int) or self.max_texts < 2):
            raise ValueError(f"parameter amortize.max_texts={self.max_texts!r}: must be null or an integer of 2 or more")
        if not 0 < self.rho <= 1:
            raise ValueError(f"parameter amortize.rho={self.rho!r}: must be in (0, 1]")
        self.student_variants()
        self.training_settings()

    def student_variants(self) -> list:
        return student_variants(self.variants)

    def training_settings(self):
        from learned_attribution.core.models.learned import TrainingSettings

        return TrainingSettings(**{**self.training, "seed": self.seed})

    @property
    def feature_sets(self) -> list[str]:
        """Every feature set a student variant reads (one signal pass computes them all)."""
        return list(dict.fromkeys(s for v in self.student_variants() for s in v.feature_sets))


def split_held_out(examples: pd.DataFrame, settings: AmortizeSettings) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(training texts: at most `max_texts`, held-out texts: at most `held_out_texts`), a seeded split; when there
    are fewer texts than both ask for, a fifth of them (one at least) is held out."""
    order = np.random.default_rng(settings.seed).permutation(len(examples))
    n_held = min(settings.held_out_texts, max(1, len(examples) // 5))
    if len(examples) - n_held < 2:
        raise ValueError(f"{len(examples)} usable texts: a student needs at least 3 (2 to train and stop on, 1 held "
                         "out)")
    held = examples.iloc[np.sort(order[:n_held])]
    train = examples.iloc[np.sort(order[n_held:])]
    if settings.max_texts is not None and len(train) > settings.max_texts:
        train = train.iloc[np.sort(np.random.default_rng(settings.seed + 1).permutation(len(train))[:settings.max_texts])]
    return train.reset_index(drop=True), held.reset_index(drop=True)


def task_examples(classifier, tokenized: pd.DataFrame, settings: AmortizeSettings, role: str = "classifier_train",
                  batch_size: int = 64) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """A task's unlabeled texts for its classifier's student: the `role` rows of its tokenized table (its training
    texts: never a rationale set), those with fewer than `MIN_TOKENS` real tokens skipped (listed), a seeded sample
    of `max_texts` + `held_out_texts`, predicted by the classifier, split as `split_held_out`. Returns (training
    texts, held-out texts, skipped)."""
    rows = tokenized[tokenized["role"] == role].reset_index(drop=True)
    if not len(rows):
        raise ValueError(f"the tokenized table has no {role!r} rows to train a student on")
    usable, skipped = split_short(rows)
    if len(skipped):
        logger.warning("%d of %d %s texts skipped (fewer than %d real tokens: nothing to rank)", len(skipped),
                       len(rows), role, MIN_TOKENS)
    wanted = settings.held_out_texts + (settings.max_texts or len(usable))
    if len(usable) > wanted:
        usable = usable.sample(n=wanted, random_state=settings.seed).sort_index()
    examples = predicted_examples(classifier, usable[["example_id", "input_ids"]].reset_index(drop=True), batch_size)
    train, held_out = split_held_out(examples, settings)
    return train, held_out, skipped


def classifier_max_length(classifier, settings: AmortizeSettings) -> int:
    """`max_length`, capped at the classifier's own position limit."""
    from learned_attribution.services.explain import max_positions

    return min(settings.max_length, max_positions(classifier.model, classifier.tokenizer) or settings.max_length)


def text_examples(classifier, texts: Sequence[str | Sequence[str]], ids: Sequence[str] | None,
                  settings: AmortizeSettings) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """A user's unlabeled texts (strings or word lists) for a student of `classifier`: tokenized, predicted, too
    short ones skipped (listed), split as `split_held_out`. Returns (training texts, held-out texts, skipped)."""
    examples, skipped = unlabeled_examples(classifier, texts, ids, max_length=classifier_max_length(classifier, settings),
                                           batch_size=2 * settings.batch_size)
    train, held_out = split_held_out(examples, settings)
    return train, held_out, skipped


@dataclass
class Amortized:
    """What one amortization produced: the student and its report tables."""

    student: Any  # models.learned.LearnedExplainer
    variants: pd.DataFrame  # every student variant's validation Spearman (the selected one first)
    fidelity: pd.DataFrame  # student and teacher against the reference teacher, on the held-out texts
    faithfulness: pd.DataFrame  # student, teacher and saliency: comprehensiveness and sufficiency (AOPC)
    cost: pd.DataFrame  # examples per second and the ratio to a plain forward pass
    skipped: pd.DataFrame  # texts not used (too short, empty), with the reason
    failures: pd.DataFrame  # texts the teacher failed on (training and held-out), with the error
    n_train: int = 0
    n_held_out: int = 0


def amortize(classifier, texts: Sequence[str | Sequence[str]], ids: Sequence[str] | None, settings: AmortizeSettings,
             cache: str | Path, dask=None, device: str | torch.device = "cpu", progress: bool = True,
             context: dict | None = None) -> Amortized:
    """Every step for one classifier and its unlabeled texts: split off the held-out texts, the teacher on the
    training texts (cached parts, resumable; on Dask with `dask`), the signals, the student, and its evaluation on
    the held-out texts against the reference teacher (`reference_factor` x the budget; with 0, the fidelity table
    is skipped)."""
    from learned_attribution.core.models.architectures import architecture

    architecture(classifier.model)  # an unsupported family stops here, before any work, naming the supported ones
    cache = Path(cache)
    train, held_out, skipped = text_examples(classifier, texts, ids, settings)
    max_length = classifier_max_length(classifier, settings)
    logger.info("amortize: %d training texts, %d held-out texts, %d skipped; teacher %s", len(train), len(held_out),
                len(skipped), settings.teacher.describe())
    run = teacher_attributions(classifier, train, settings.teacher, cache / "train", part_size=settings.part_size,
                               batch_size=settings.batch_size, dask=dask, progress=progress)
    held_teacher = teacher_attributions(classifier, held_out, settings.teacher, cache / "held_out",
                                        part_size=settings.part_size, batch_size=settings.batch_size, progress=progress)
    reference = (teacher_attributions(classifier, held_out, settings.teacher.at_budget(settings.reference_factor),
                                      cache / "reference", part_size=settings.part_size, batch_size=settings.batch_size,
                                      dask=dask, progress=progress)
                 if settings.reference_factor else None)
    signals = student_signals(classifier, train, settings.feature_sets, settings.layer, 2 * settings.batch_size)
    student, variants = fit_student(classifier, signals, run.scores, settings.student_variants(),
                                    settings.training_settings(), settings.val_fraction, settings.seed, device,
                                    context={**(context or {}), "teacher": settings.teacher.identity(),
                                             "layer": settings.layer, "rho": settings.rho,
                                             "max_length": max_length})
    fidelity, faithful, cost = evaluate_student(classifier, student, held_out, held_teacher.scores,
                                                None if reference is None else reference.scores, settings)
    failures = pd.concat([run.failures.assign(texts="train"), held_teacher.failures.assign(texts="held_out")],
                         ignore_index=True)
    return Amortized(student, variants, fidelity, faithful, cost, skipped, failures, len(train), len(held_out))


def student_card(settings: AmortizeSettings, classifier, task: str | None = None) -> dict:
    """The folder card (`fold.json`) `explain.FoldExplainer` reads: its learned explainer is the student, the best
    baseline shown beside it is the teacher (with its settings), rationales take the top-k share `rho`."""
    return {"kind": "student", "learned": ["student"], "held_out_task": task,
            "classifier": None if classifier.path is None else str(Path(classifier.path).resolve()),
            "best_baseline": settings.teacher.method, "baselines": {settings.teacher.method: settings.teacher.settings},
            "teacher": {"method": settings.teacher.method, "settings": settings.teacher.settings},
            "rho": settings.rho, "layer": settings.layer}


def report_markdown(result: Amortized, settings: AmortizeSettings, title: str) -> str:
    """The amortization's report: the student variants, fidelity, faithfulness and cost tables, with intervals."""
    from learned_attribution.services.reporting import interval_text, markdown_table

    def with_intervals(table: pd.DataFrame, metrics: Sequence[str]) -> pd.DataFrame:
        if not len(table):
            return table
        shown = table[["method", "n_examples"]].copy()
        for metric in metrics:
            shown[metric] = table.apply(interval_text, axis=1, metric=metric)
        return shown

    top = [f"top{round(100 * f)}" for f in settings.top_k_fractions]
    reference = settings.teacher.at_budget(settings.reference_factor).describe()
    lines = [f"# {title}", "",
             f"Teacher {settings.teacher.describe()} on {result.n_train} unlabeled training texts; {result.n_held_out} "
             f"held-out texts for everything below ({len(result.skipped)} texts skipped as too short, "
             f"{len(result.failures)} teacher failures). Intervals: bootstrap 95% over texts.", "",
             "## Student variants (validation Spearman with the teacher's labels)", "",
             markdown_table(result.variants.round(4)), "",
             f"## Fidelity against the reference teacher, {reference}", "",
             "Per-text Spearman correlation and top-k overlap (k = 10% and 20% of the tokens). The teacher's row is "
             "its own agreement, at the training budget, with the reference: the student beats its labels where its "
             "row is higher.", "",
             markdown_table(with_intervals(result.fidelity, ["spearman", *top])) if len(result.fidelity) else
             "(no reference: reference_factor 0)", "",
             "## Faithfulness (ERASER AOPC, predicted class)", "",
             markdown_table(with_intervals(result.faithfulness, ["comprehensiveness", "sufficiency"])), "",
             "## Cost (examples per second; ratio to a plain forward pass over the same texts, one run)", "",
             markdown_table(result.cost.round(4)), ""]
    return "\n".join(lines)


def save_amortized(folder: str | Path, result: Amortized, settings: AmortizeSettings, classifier,
                   task: str | None = None, title: str | None = None) -> Path:
    """The student's folder, written atomically: `student/` (safetensors + JSON), `fold.json`, `report.md` and the
    tables as CSV (variants, fidelity, faithfulness, cost, skipped, failures)."""
    from learned_attribution.core.atomic import atomic_folder
    from learned_attribution.core.models.artifacts import write_explainer

    folder = Path(folder)
    with atomic_folder(folder) as partial:
        write_explainer(result.student, partial / "student")
        (partial / "fold.json").write_text(json.dumps(student_card(settings, classifier, task), indent=1))
        for name in ("variants", "fidelity", "faithfulness", "cost", "skipped", "failures"):
            getattr(result, name).to_csv(partial / f"{name}.csv", index=False)
        (partial / "report.md").write_text(report_markdown(result, settings, title or f"Student of {folder.name}"))
    return folder


def log_student_run(tracking_uri: str, experiment: str, name: str, report: str, tables: dict[str, pd.DataFrame],
                    student, card: dict, classifier_folder: str | Path, params: dict[str, Any]) -> dict[str, str]:
    """One MLflow run `name` in `experiment`: the settings, the headline numbers (fidelity, faithfulness, cost and,
    where there is one, plausibility), the report and its tables, and the student with its classifier as a pyfunc
    model registered as `<experiment>-<name>`, served like the folds' (serving.py). Returns where the run and the
    model are."""
    import tempfile

    from mlflow.tracking import MlflowClient

    from learned_attribution.services import tracking
    from learned_attribution.core.models.artifacts import save_explainer
    from learned_attribution.adapters.serving import log_and_register

    metrics = {}
    for key, columns in (("fidelity", ("spearman", "top10", "top20")),
                         ("faithfulness", ("comprehensiveness", "sufficiency")),
                         ("cost", ("examples_per_second", "ratio_to_forward"))):
        for record in tables.get(key, pd.DataFrame()).to_dict("records"):
            method = "teacher" if str(record["method"]).startswith("teacher") else record["method"]
            metrics.update({f"{key}.{method}.{c}": record[c] for c in columns if c in record})
    plausibility = tables.get("plausibility")
    if plausibility is not None:
        for record in plausibility[(plausibility["subset"] == "all")
                                   & (plausibility["rule"] == "matched")].to_dict("records"):
            metrics.update({f"plausibility.{record['method']}.auroc": record["auroc"],
                            f"plausibility.{record['method']}.f1_matched": record["f1"]})
    texts = {"report.md": report, **{f"{key}.csv": table.to_csv(index=False) for key, table in tables.items()}}
    run_id = tracking.log_run(tracking_uri, experiment, params, metrics, pd.DataFrame(columns=["layer"]), texts, {},
                              run_name=name)
    client = MlflowClient(tracking_uri=tracking_uri)
    registered = f"{experiment}-{name}"
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / name
        save_explainer(student, folder / "student")
        (folder / "fold.json").write_text(json.dumps(card))
        version = log_and_register(client, run_id, folder, classifier_folder, registered)
    client.set_tag(run_id, "registered_model", f"models:/{registered}/{version}")
    logger.info("%s logged to MLflow run %s and registered as models:/%s/%s", name, run_id, registered, version)
    return {"run_id": run_id, "experiment": experiment, "tracking_uri": tracking_uri,
            "registered_model": f"models:/{registered}/{version}"}
