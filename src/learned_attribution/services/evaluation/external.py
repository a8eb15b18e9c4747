"""A user's rationale file scored like a held-out fold (docs/external_rationales.md): a trained fold's learned
explainers and every baseline of the protocol explain a chosen task's classifier on the file's examples
(`core.data.rationales` reads the file), and `protocol` scores them into the fold metrics table, plus the
classifier's task and the file as columns.

`ExternalSettings` is the parsed `evaluate_external` parameter block; `check_fold` checks that the fold and the
classifier fit together and gives the fold's budget; `predict` picks the examples to score (a rationale token left
after truncation, the seeded `max_examples` cap) and predicts only those; `metrics_table` and `run_counts` are the
run's outputs (its chart: `reporting.charts.metrics_bar_chart` with `ExternalSettings.title`)."""
from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from learned_attribution.core.atomic import probe_writable
from learned_attribution.core.data.classes import NO_CLASS
from learned_attribution.core.data.modes import GOLD
from learned_attribution.core.data.rationales import RationaleFileError, no_rationale_words
from learned_attribution.core.explainers.apply import FAILURE_COLUMNS
from learned_attribution.core.models.learned import LearnedModel
from learned_attribution.core.models.loading import TrainedClassifier
from learned_attribution.core.models.projection import has_rationale_token, project_to_subwords
from learned_attribution.core.models.runner import predict_proba
from learned_attribution.core.explainers.learned import PAPER_EXPNET

from ..bundle import FOLD_LEARNED, Bundle
from ..config import ComputeSettings, ExternalSettings, ScoringSettings
from . import protocol

logger = logging.getLogger(__name__)

HELD_OUT_TASK = "external"  # the metrics table's held_out_task
EXTRA_COLUMNS = ["classifier_task", "file"]  # provenance appended to the fold metrics table
def capped(scoring: ScoringSettings, settings: ExternalSettings) -> ScoringSettings:
    """The scoring protocol of a fold with the file's own cap on scored examples (`max_examples`) in place of the
    folds' `max_test_examples`."""
    return replace(scoring, max_test_examples=settings.max_examples)


def check_writable(folders: Sequence[str | Path] | None) -> None:
    """Make each folder of parameter `external_outputs` if missing and probe it with a small file, so that a
    read-only or full data/ stops the run before any work, not at the last save."""
    for folder in folders or []:
        folder = Path(folder)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            probe_writable(folder)
        except OSError as error:
            raise OSError(f"parameter external_outputs: cannot write in {folder} ({error.strerror or error}): "
                          "evaluate_external would fail at its last save; free space or fix the permissions") \
                from error


# ----------------------------------------------------------------------------------------------------
# The fold and the classifier
# ----------------------------------------------------------------------------------------------------

def check_fold(classifier: TrainedClassifier, bundle: Bundle, budget: Mapping[str, Any],
               settings: ExternalSettings) -> tuple[dict[str, LearnedModel], dict[str, Any]]:
    """The fold's learned explainers (ExpNet+, the paper's ExpNet) and its budget once they fit `classifier`: the
    paper's ExpNet reads 2 attention features per head of the classifier. The budget is the fold's saved budget
    (rho, the training tasks' densities and token counts) with the thresholds of its saved paper's ExpNet
    (`Bundle.budget`). The loaded fold and classifier must be the ones `settings` names."""
    card_fold = bundle.card.get("fold")
    if card_fold is not None and card_fold != settings.expnet_fold:
        raise ValueError(f"the fold loaded is {card_fold} but parameter evaluate_external.expnet_fold is "
                         f"{settings.expnet_fold}: set it with --params (the catalog reads the run-time parameter)")
    if classifier.path is not None and Path(classifier.path).name != f"classifier_{settings.classifier_task}":
        raise ValueError(f"the classifier loaded is {classifier.path} but parameter evaluate_external."
                         f"classifier_task is {settings.classifier_task}: set it with --params (the catalog reads "
                         "the run-time parameter)")
    learned = {name: bundle.learned[name] for name in FOLD_LEARNED}
    n_features = len(learned[PAPER_EXPNET].columns)
    n_heads = int(classifier.model.config.num_attention_heads)
    if n_features != 2 * n_heads:
        raise ValueError(f"{settings.expnet_fold}'s ExpNet reads {n_features} attention features but the "
                         f"{settings.classifier_task} classifier has {n_heads} heads ({2 * n_heads} features): they "
                         "come from different encoders")
    fold_budget = bundle.budget
    if not np.isclose(budget.get("calibrated_threshold", fold_budget["calibrated_threshold"]),
                      fold_budget["calibrated_threshold"]):
        logger.warning("%s: budget json says calibrated threshold %s, the saved ExpNet %s; using the ExpNet's",
                       settings.expnet_fold, budget.get("calibrated_threshold"), fold_budget["calibrated_threshold"])
    budget = {**budget, **fold_budget}
    if settings.classifier_task != settings.held_out_task:
        # ExpNet's training read this classifier's attention on its own task's rationale_train data.
        logger.warning("The %s classifier is not %s's held-out classifier (%s): ExpNet was trained on its attention",
                       settings.classifier_task, settings.expnet_fold, settings.held_out_task)
    logger.info("Explaining the %s classifier with %s's ExpNet (rho %.3f, thresholds %s / %.3f)",
                settings.classifier_task, settings.expnet_fold, budget["rho"], budget.get("threshold"),
                budget["calibrated_threshold"])
    return learned, budget


# ----------------------------------------------------------------------------------------------------
# The examples scored, predicted
# ----------------------------------------------------------------------------------------------------

def marks_every_token(examples: pd.DataFrame) -> pd.Series:
    """Per example: whether its rationale marks every (non-special) token, where per-example AUROC is undefined."""
    return examples["token_labels"].map(lambda labels: bool((protocol.gold_labels(labels) == 1).all()))


def file_examples_to_score(examples: pd.DataFrame, classifier: TrainedClassifier, max_length: int,
                           settings: ExternalSettings, scoring: ScoringSettings) -> pd.DataFrame:
    """The file's examples projected to subwords (the classifier's tokenizer, `max_length`) that will be scored: a
    rationale token left after truncation, within the seeded cap (`scoring.max_test_examples`, the file's
    `max_examples`: the very sample the protocol draws later with the same seed). Adds input_ids, word_ids,
    token_labels, truncated."""
    file = settings.file
    read = examples.attrs.get("file")  # the file the catalog read (core.data.rationales.read_rationale_file)
    if read is not None and Path(read).resolve() != Path(file).resolve():
        raise ValueError(f"the rationale file read is {read} but parameter evaluate_external.file is {file} "
                         f"({Path(file).resolve()}): set it with --params (the catalog reads the run-time parameter, "
                         "relative to the project root: run kedro there)")
    n_classes = int(classifier.model.config.num_labels)
    too_high = examples[examples["label"] >= n_classes]
    if len(too_high):
        raise RationaleFileError(f"{file}: example {too_high['example_id'].iloc[0]!r} has label "
                                 f"{too_high['label'].iloc[0]} but the {settings.classifier_task} classifier has "
                                 f"{n_classes} classes")
    projected = project_to_subwords(examples, classifier.tokenizer, max_length)
    # Counted after truncation: a rationale whose marked words were all cut off is empty for the metrics too.
    no_rationale = ~has_rationale_token(projected)
    n_truncated = int(projected["truncated"].sum())
    if no_rationale.all():
        raise RationaleFileError(f"{file}: none of the {len(projected)} examples keeps a rationale token within "
                                 f"max_length={max_length} subwords ({n_truncated} truncated): nothing to score")
    logger.info("%s: %d of %d examples have no rationale token after projection to max_length=%d subwords "
                "(%d truncated): skipped, left out of the metrics (SPEC §1)", file, int(no_rationale.sum()),
                len(projected), max_length, n_truncated)
    # The cap before prediction, so that max_examples bounds the work.
    scored = protocol.scored_examples(projected, scoring)
    if len(scored) < int((~no_rationale).sum()):
        logger.info("%s: max_examples=%s: a seeded sample of %d of the %d examples with a rationale is scored", file,
                    settings.max_examples, len(scored), int((~no_rationale).sum()))
    all_tokens = marks_every_token(scored)
    if all_tokens.any():
        logger.warning("%s: %d of %d scored examples mark every token as rationale: their per-example AUROC and "
                       "AUPRC are undefined (no token outside the rationale to rank below it), left out of auroc and "
                       "auprc and counted in n_auroc_undefined%s", file, int(all_tokens.sum()), len(scored),
                       "; with every example so, auroc and auprc are NaN and only F1, precision and recall are "
                       "defined" if all_tokens.all() else "")
    return scored


def predict(examples: pd.DataFrame, classifier: TrainedClassifier, max_length: int, settings: ExternalSettings,
            scoring: ScoringSettings, compute: ComputeSettings) -> pd.DataFrame:
    """The examples to score (`file_examples_to_score`), predicted on the `compute` device (with a progress bar): adds
    predicted, probability (of the predicted class), correct."""
    scored = file_examples_to_score(examples, classifier, max_length, settings, scoring)
    compute.place(classifier.model)
    probabilities = predict_proba(classifier.model, list(scored["input_ids"]), settings.batch_size,
                                  classifier.tokenizer.pad_token_id, compute.bf16,
                                  desc=f"predict {Path(settings.file).name}")
    scored["predicted"] = probabilities.argmax(1)
    scored["probability"] = probabilities.max(1)
    scored["correct"] = scored["predicted"] == scored["label"]
    logger.info("%s classifier: %d of %d scored external examples predicted correctly", settings.classifier_task,
                int(scored["correct"].sum()), len(scored))
    return scored


# ----------------------------------------------------------------------------------------------------
# The run's outputs
# ----------------------------------------------------------------------------------------------------

def has_classes(predictions: pd.DataFrame) -> bool:
    """Whether every scored example gives the class its rationale supports (a file may give none: `NO_CLASS`)."""
    return bool((predictions["label"].astype(int) != NO_CLASS).all())


def explain_gold(classifier: TrainedClassifier, predictions: pd.DataFrame, learned: Mapping[str, LearnedModel],
                 token_scores: pd.DataFrame, scoring: ScoringSettings, compute: ComputeSettings
                 ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Gold mode's token scores (`protocol.explain_gold_mode`, the learned explainers in a pass of their own for the
    file's class), or empty tables when the file gives no class to every scored example: then predicted mode is
    all there is, and a line says so."""
    if not has_classes(predictions):
        n = int((predictions["label"].astype(int) == NO_CLASS).sum())
        logger.warning("gold mode absent: %d of %d scored examples give no class (the class their rationale "
                       "supports); the file is scored in predicted mode only", n, len(predictions))
        return token_scores.iloc[:0], pd.DataFrame(columns=FAILURE_COLUMNS)
    return protocol.explain_gold_mode(classifier, predictions, learned, scoring, compute, token_scores)


def metrics_table(token_scores: pd.DataFrame, gold_scores: pd.DataFrame, predictions: pd.DataFrame,
                  faithfulness: pd.DataFrame, budget: Mapping[str, Any], expnet_plus: LearnedModel,
                  scoring: ScoringSettings, settings: ExternalSettings) -> pd.DataFrame:
    """The fold metrics table of the file (fold = the ExpNet's fold, held_out_task = "external") in predicted mode
    and, when the file gives classes, in gold mode, with the classifier's task and the file appended as columns."""
    common = dict(rho=budget["rho"], thresholds=protocol.learned_thresholds(budget, expnet_plus), scoring=scoring,
                  fold=settings.expnet_fold, held_out_task=HELD_OUT_TASK)
    tables = [protocol.score_rationale_set(token_scores, predictions, faithfulness, **common)]
    if len(gold_scores):
        tables.append(protocol.score_rationale_set(gold_scores, predictions, None, mode=GOLD, **common))
    metrics = pd.concat(tables, ignore_index=True)
    metrics = metrics.assign(classifier_task=settings.classifier_task, file=settings.file)
    return metrics.reindex(columns=[*protocol.METRIC_COLUMNS, *EXTRA_COLUMNS])


def file_counts(examples: pd.DataFrame) -> dict[str, float]:
    """How many examples the file holds, and how many mark a rationale word."""
    return {"examples/in_file": float(len(examples)),
            "examples/with_rationale_words": float((~no_rationale_words(examples)).sum())}


def run_counts(counts_of_file: Mapping[str, float], predictions: pd.DataFrame, failures: pd.DataFrame,
               budget: Mapping[str, Any]) -> dict[str, float]:
    """The run's numbers beside its metrics: the fold's budget (`budget/<key>`), the file's counts (`file_counts`),
    the examples scored (a rationale token after truncation, within max_examples), truncated, marking every token
    (their AUROC is undefined), failed explanations, and the classifier's accuracy on the scored examples."""
    return {**{f"budget/{k}": float(v) for k, v in budget.items() if isinstance(v, int | float)},
            **counts_of_file,
            "examples/scored": float(len(predictions)),
            "examples/truncated": float(predictions["truncated"].sum()),
            "examples/all_tokens_rationale": float(marks_every_token(predictions).sum()),
            "examples/explain_failures": float(len(failures)),
            "classifier/accuracy_scored": float(predictions["correct"].mean())}
