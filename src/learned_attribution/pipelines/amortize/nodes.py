"""Nodes of the amortize pipeline (issue 14): thin calls into `amortize.py`, one classifier per namespace."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pandas as pd

from learned_attribution.services import amortize
from learned_attribution.adapters.kedro_datasets import TrainedClassifier
from learned_attribution.core.models.runner import Compute

logger = logging.getLogger(__name__)


def _settings(params: dict[str, Any]) -> amortize.AmortizeSettings:
    return amortize.AmortizeSettings.from_params(params)


def _scores_table(run: amortize.TeacherRun) -> pd.DataFrame:
    return run.scores.assign(scores=run.scores["scores"].map(lambda s: [float(v) for v in s]))


def student_texts(classifier: TrainedClassifier, tokenized: pd.DataFrame, params: dict[str, Any],
                  compute: dict[str, Any] | None = None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The task's unlabeled training texts (never a rationale set) for its classifier's student: (training texts,
    held-out texts, skipped texts), each text with its predicted class."""
    Compute.from_params(compute).place(classifier.model)
    train, held_out, skipped = amortize.task_examples(classifier, tokenized, _settings(params))
    logger.info("%s: %d training and %d held-out texts for the student, %d skipped", tokenized["task"].iloc[0],
                len(train), len(held_out), len(skipped))
    return train, held_out, skipped


def own_texts(classifier: TrainedClassifier, texts: pd.DataFrame, params: dict[str, Any],
              compute: dict[str, Any] | None = None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """A user's text file (`student_own.texts`) for the student of a user's classifier (`student_own.classifier`):
    (training texts, held-out texts, skipped texts), as `learned-attribution fit` splits them."""
    Compute.from_params(compute).place(classifier.model)
    train, held_out, skipped = amortize.text_examples(classifier, list(texts["text"]), list(texts["example_id"]),
                                                      _settings(params))
    logger.info("own classifier %s: %d training and %d held-out texts for the student, %d skipped", classifier.path,
                len(train), len(held_out), len(skipped))
    return train, held_out, skipped


def teacher_scores(classifier: TrainedClassifier, texts: pd.DataFrame, cache: Path, params: dict[str, Any],
                   compute: dict[str, Any] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The teacher on the training texts, in resumable parts under `cache` (on Dask with `compute.dask.address`):
    (token scores, failures)."""
    from learned_attribution.services.distributed import DaskSettings

    Compute.from_params(compute).place(classifier.model)
    settings = _settings(params)
    run = amortize.teacher_attributions(classifier, texts, settings.teacher, Path(cache) / "train",
                                        part_size=settings.part_size, batch_size=settings.batch_size,
                                        dask=DaskSettings.from_params(compute))
    return _scores_table(run), run.failures


def held_out_teacher_scores(classifier: TrainedClassifier, texts: pd.DataFrame, cache: Path, params: dict[str, Any],
                            compute: dict[str, Any] | None = None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """On the held-out texts: the teacher at its training budget and the reference teacher (`reference_factor` x
    the budget, an independent draw), both in resumable parts; (teacher scores, reference scores, failures)."""
    from learned_attribution.services.distributed import DaskSettings

    Compute.from_params(compute).place(classifier.model)
    settings = _settings(params)
    dask = DaskSettings.from_params(compute)
    runs = {}
    for name, teacher in (("held_out", settings.teacher),
                          ("reference", settings.teacher.at_budget(max(1, settings.reference_factor)))):
        runs[name] = amortize.teacher_attributions(classifier, texts, teacher, Path(cache) / name,
                                                   part_size=settings.part_size, batch_size=settings.batch_size,
                                                   dask=dask)
    failures = pd.concat([r.failures.assign(teacher=name) for name, r in runs.items()], ignore_index=True)
    return _scores_table(runs["held_out"]), _scores_table(runs["reference"]), failures


def student_signals(classifier: TrainedClassifier, texts: pd.DataFrame, params: dict[str, Any],
                    compute: dict[str, Any] | None = None) -> pd.DataFrame:
    """The classifier's single-pass signals for the training texts (every set a student variant reads)."""
    Compute.from_params(compute).place(classifier.model)
    settings = _settings(params)
    return amortize.student_signals(classifier, texts, settings.feature_sets, settings.layer, 2 * settings.batch_size)


def fit_student(classifier: TrainedClassifier, signals: pd.DataFrame, teacher: pd.DataFrame, params: dict[str, Any],
                max_length: int, compute: dict[str, Any] | None = None, *, task: str):
    """Every student variant trained on the teacher's scores; the best on validation Spearman is the student.
    Returns (student, the variants' table)."""
    settings = _settings(params)
    device = Compute.from_params(compute).device
    return amortize.fit_student(classifier, signals, teacher, settings.student_variants(), settings.training_settings(),
                                settings.val_fraction, settings.seed, device,
                                context={"task": task, "teacher": settings.teacher.identity(), "layer": settings.layer,
                                         "rho": settings.rho, "max_length": int(max_length)})


def evaluate_student(classifier: TrainedClassifier, student, texts: pd.DataFrame, teacher: pd.DataFrame,
                     reference: pd.DataFrame, params: dict[str, Any], compute: dict[str, Any] | None = None
                     ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Fidelity to the reference teacher, faithfulness and cost of the student, its teacher and saliency on the
    held-out texts."""
    Compute.from_params(compute).place(classifier.model)
    settings = _settings(params)
    return amortize.evaluate_student(classifier, student, texts, teacher,
                                     reference if settings.reference_factor else None, settings)


def student_card(classifier: TrainedClassifier, params: dict[str, Any], *, task: str) -> dict:
    """`fold.json` of the student's folder (what `FoldExplainer.from_student` and the served model read)."""
    return amortize.student_card(_settings(params), classifier, task)


def student_report(variants: pd.DataFrame, fidelity: pd.DataFrame, faithfulness: pd.DataFrame, cost: pd.DataFrame,
                   skipped: pd.DataFrame, train_failures: pd.DataFrame, held_out_failures: pd.DataFrame,
                   train: pd.DataFrame, held_out: pd.DataFrame, params: dict[str, Any], *, task: str) -> str:
    """data/08_reporting/amortize/<task>.md."""
    result = amortize.Amortized(None, variants, fidelity, faithfulness, cost, skipped,
                                pd.concat([train_failures, held_out_failures], ignore_index=True), len(train),
                                len(held_out))
    return amortize.report_markdown(result, _settings(params), f"Student of the {task} classifier")


def student_plausibility(classifier: TrainedClassifier, student, predictions: pd.DataFrame,
                         fold_metrics: pd.DataFrame, budget: dict[str, float], crosstask: dict[str, Any],
                         params: dict[str, Any], seed: int, *, task: str) -> pd.DataFrame:
    """The student against the task's rationale test set, scored as the fold's methods are (the same examples, the
    fold's matched budget `budget["rho"]`, the same bootstrap): its rows (subsets all, correct, incorrect) beside
    the fold's rows of the teacher, saliency and ExpNet+. The student reads no rationale, so the protocol allows it
    in the held-out fold's table."""
    from learned_attribution.services.evaluation import explain_examples, expensive_sample, rationale_test_examples, score_all

    settings = _settings(params)
    examples = rationale_test_examples(predictions, max_examples=crosstask["max_test_examples"], seed=seed)
    explainer = amortize.student_explainer(classifier, student, settings.layer)
    run = explain_examples(classifier.model, classifier.tokenizer, examples, {"student": explainer},
                           crosstask["batch_size"])
    fold = f"heldout_{task}"
    sample = expensive_sample(examples, crosstask["expensive_sample_size"], seed)  # the fold's own seeded sample
    rows = score_all(run.scores, examples, budget["rho"], {}, fold, task, crosstask["bootstrap"]["n_boot"],
                     crosstask["bootstrap"]["seed"], sample_ids=sample)
    rows = rows[rows["method"] == "student"].copy()
    # Faithfulness on the fold's sample, as the fold computed it for every method (its rows' `sample` subset).
    sampled = examples[examples["example_id"].isin(sample)]
    faithful = amortize.faithfulness_table(classifier, sampled, {"student": run.scores},
                                           crosstask["faithfulness"]["fractions"],
                                           crosstask["faithfulness"]["batch_size"], n_boot=2, seed=seed)
    on_sample = rows["subset"] == "sample"
    rows.loc[on_sample, "comprehensiveness"] = faithful["comprehensiveness"].iloc[0]
    rows.loc[on_sample, "sufficiency"] = faithful["sufficiency"].iloc[0]
    return pd.concat([rows, fold_metrics[fold_metrics["rule"] == "matched"]], ignore_index=True)


def plot_costs(plausibility: pd.DataFrame, fold_cost: pd.DataFrame, student_cost: pd.DataFrame, *, task: str):
    """The fold's two cost charts with the student in them (PNG): throughput (ratio to a plain forward pass) against
    AUROC (the fold's cost-vs-plausibility chart) and against comprehensiveness AOPC on the fold's seeded sample
    (its cost-vs-faithfulness companion), every method of the fold and the student. The fold's methods are timed in
    the fold, the student on the held-out texts of this pipeline, each against a forward pass over the same texts."""
    from learned_attribution.services.evaluation import cost_plausibility
    from learned_attribution.services.reporting import cost_faithfulness_chart, cost_plausibility_chart

    student = student_cost[student_cost["method"] == "student"][["method", "ratio_to_forward"]]
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


def log_student(report: str, variants: pd.DataFrame, fidelity: pd.DataFrame, faithfulness: pd.DataFrame,
                cost: pd.DataFrame, student, card: dict, classifier: TrainedClassifier, params: dict[str, Any],
                mlflow: dict[str, Any], plausibility: pd.DataFrame | None = None, *, task: str) -> dict[str, str]:
    """One MLflow run per student in the experiment `amortize.mlflow.experiment` of the store `mlflow.tracking_uri`,
    the student registered as `<experiment>-student_<task>` (`amortize.log_student_run`); a task classifier's
    student also logs its plausibility on the rationale test set (a user's classifier has none)."""
    from learned_attribution.services import tracking

    tables = {"variants": variants, "fidelity": fidelity, "faithfulness": faithfulness, "cost": cost}
    if plausibility is not None:
        tables["plausibility"] = plausibility
    return amortize.log_student_run(tracking.resolve_tracking_uri((mlflow or {}).get("tracking_uri")),
                                    ((params.get("mlflow") or {}).get("experiment")) or "amortize", f"student_{task}",
                                    report, tables, student, card, classifier.path,
                                    {"task": task, "amortize": {k: v for k, v in params.items() if k != "mlflow"}})


def amortize_summary(*tables: pd.DataFrame) -> str:
    """data/08_reporting/amortize.md: per task classifier, fidelity, faithfulness, cost and plausibility (the tables
    come in groups of four, task by task)."""
    from learned_attribution.services.reporting import interval_text, markdown_table

    lines = ["# Amortized students", "",
             "Per task classifier: a student trained on the teacher's attributions of the task's unlabeled training "
             "texts, scored on further held-out texts (fidelity to a reference teacher at reference_factor x the "
             "budget, ERASER faithfulness, throughput) and on the rationale test set (plausibility, beside the "
             "fold's rows). Intervals: bootstrap 95%.", ""]
    for start in range(0, len(tables), 4):
        fidelity, faithfulness, cost, plausibility = tables[start:start + 4]
        task = plausibility["held_out_task"].iloc[0]
        lines += [f"## {task}", ""]
        for title, table, metrics in (("Fidelity", fidelity, ("spearman", "top10", "top20")),
                                      ("Faithfulness", faithfulness, ("comprehensiveness", "sufficiency"))):
            if len(table):
                shown = table[["method", "n_examples"]].copy()
                for metric in metrics:
                    shown[metric] = table.apply(interval_text, axis=1, metric=metric)
                lines += [f"### {title}", "", markdown_table(shown), ""]
        lines += ["### Cost", "", markdown_table(cost.round(4)), ""]
        rows = plausibility[(plausibility["subset"] == "all") & (plausibility["rule"] == "matched")]
        shown = rows[["method", "n_examples"]].copy()
        for metric in ("auroc", "f1"):
            shown[metric] = rows.apply(interval_text, axis=1, metric=metric)
        lines += ["### Plausibility (rationale test set, matched budget)", "", markdown_table(shown), ""]
    return "\n".join(lines)
