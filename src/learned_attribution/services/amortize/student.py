"""The student: the classifier's signals, and the learned-explainer core trained on the teacher's scores (a
per-token network over the signals, or a text student over the texts themselves: an encoder student, or an
attention student over the classifier's hidden states)."""
from __future__ import annotations

import logging
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from learned_attribution.core.explainers.learned import STUDENT
from learned_attribution.core.metrics.fidelity import mean_example_spearman
from learned_attribution.core.models.artifacts import classifier_fingerprint, classifier_signature
from learned_attribution.core.models.learned import (TrainingSettings, Variant, fit_text_variant, fit_variant,
                                                     score_examples, score_texts)
from learned_attribution.core.models.signals import model_columns, signal_rows

logger = logging.getLogger(__name__)


def student_signals(classifier, examples: pd.DataFrame, feature_sets: Sequence[str], layer: int = -1,
                    batch_size: int = 32) -> pd.DataFrame:
    """The classifier's signal rows (`core/models/signals.py`, the `feature_sets` given) for every example, for its
    predicted class: one row per non-special token (example_id, position, token, the signal columns)."""
    rows = examples.assign(token_labels=None)[["example_id", "input_ids", "predicted", "token_labels"]]
    return pd.concat(signal_rows(classifier.model, classifier.tokenizer, rows, feature_sets, layer, batch_size,
                                 max(1, len(rows)), "student signals"), ignore_index=True).drop(columns=["token_label"])


def labelled_rows(signals: pd.DataFrame, teacher_scores: pd.DataFrame) -> pd.DataFrame:
    """Signal rows of the examples the teacher explained, each token's teacher score as its `token_label`, in the
    teacher table's example order. A length mismatch (the two tables tokenised differently) is an error naming
    the example."""
    by_example = {example_id: rows for example_id, rows in signals.groupby("example_id", sort=False)}
    parts = []
    for example_id, scores in zip(teacher_scores["example_id"], teacher_scores["scores"]):
        rows = by_example.get(example_id)
        if rows is None:
            raise ValueError(f"example {example_id!r} has teacher scores but no signal rows")
        if len(rows) != len(scores):
            raise ValueError(f"example {example_id!r}: {len(scores)} teacher scores for {len(rows)} tokens")
        parts.append(rows.sort_values("position").assign(token_label=np.asarray(scores, dtype=np.float32)))
    return pd.concat(parts, ignore_index=True)


def split_examples(example_ids: Sequence[str], fraction: float, seed: int) -> tuple[list[str], list[str]]:
    """A seeded (train, validation) split of example ids; the validation share is `fraction` (one example at least)."""
    if not 0 < fraction < 1:
        raise ValueError(f"parameter val_fraction={fraction!r}: must be in (0, 1)")
    ids = list(dict.fromkeys(example_ids))
    if len(ids) < 2:
        raise ValueError(f"a student needs at least 2 texts with teacher scores (one to train on, one to stop "
                         f"on); got {len(ids)}")
    order = np.random.default_rng(seed).permutation(len(ids))
    n_val = min(len(ids) - 1, max(1, int(round(fraction * len(ids)))))
    val = {ids[i] for i in order[:n_val]}
    return [i for i in ids if i not in val], [i for i in ids if i in val]


def fit_student(classifier, texts: pd.DataFrame, signals: pd.DataFrame, teacher_scores: pd.DataFrame,
                variants: Sequence[Variant], settings: TrainingSettings, val_fraction: float = 0.15, seed: int = 0,
                device: str | torch.device = "cpu", context: dict | None = None, layer: int = -1):
    """Every variant trained to reproduce the teacher (objective `distill`, early stopping on the validation texts'
    mean per-example Spearman) on the teacher's `texts` (example_id, input_ids, predicted): a per-token variant from
    their `signals`, a text student (a network that reads the text: `network: encoder` or `attention`) from their
    token ids (the attention student reads the classifier's hidden states at the explained `layer`). Returns (the student: the variant
    with the best validation Spearman, the table of every variant: name, description, mean per-example Spearman
    with the labels on its own training texts and on the validation texts, best epoch). The student's context
    records the classifier it is bound to."""
    rows = labelled_rows(signals, teacher_scores).assign(task="teacher")
    train_ids, val_ids = split_examples(rows["example_id"], val_fraction, seed)
    train, val = rows[rows["example_id"].isin(train_ids)], rows[rows["example_id"].isin(val_ids)]
    labelled = teacher_scores[["example_id", "scores"]].merge(texts[["example_id", "input_ids", "predicted"]],
                                                              on="example_id", how="left", validate="one_to_one")
    config = classifier.model.config
    trained, table = {}, []
    for variant in variants:
        if variant.reads_text:  # its registered network reads the texts, not signal columns
            train_texts = labelled[labelled["example_id"].isin(train_ids)]
            model = fit_text_variant(variant, classifier.model, classifier.tokenizer, train_texts,
                                     labelled[labelled["example_id"].isin(val_ids)], settings=settings, layer=layer,
                                     device=device)
            own = score_texts(model, train_texts, classifier.tokenizer, classifier=classifier.model)
        else:
            model = fit_variant(variant, train, val, columns=model_columns(variant.feature_sets, config), rho=0.2,
                                settings=settings, device=device)
            own = score_examples(model, train)
        trained[variant.name] = model
        # How well it reproduces the labels it was trained on: a value near val_spearman means the student
        # underfits (its inputs cannot express the teacher), not that it lacks texts.
        table.append({"variant": variant.name, "description": variant.describe(), "n_train": len(train_ids),
                      "n_val": len(val_ids), "train_spearman": mean_example_spearman(own, teacher_scores),
                      "val_spearman": float(np.mean(model.member_val_scores)),
                      "best_epoch": model.best_epoch, "epochs": len(model.history)})
    table = pd.DataFrame(table).sort_values("val_spearman", ascending=False, kind="mergesort")
    table["selected"] = np.arange(len(table)) == 0
    student = trained[table["variant"].iloc[0]]
    student.context = {**(context or {}), "kind": STUDENT, "variant": student.variant.name,
                       "classifier": classifier_signature(classifier.model, classifier.tokenizer),
                       "classifier_fingerprint": classifier_fingerprint(classifier.model),
                       "classifier_path": None if classifier.path is None else str(classifier.path)}
    logger.info("student variants (validation Spearman with the teacher):\n%s",
                table[["variant", "train_spearman", "val_spearman", "best_epoch"]].round(4).to_string(index=False))
    return student, table.reset_index(drop=True)

