"""The student: texts, the classifier's signals, and the learned-explainer core trained on the teacher (issue 14)."""
from __future__ import annotations

import logging
from typing import Sequence

import numpy as np
import pandas as pd
import torch

logger = logging.getLogger(__name__)


MIN_TOKENS = 2  # real (non-special) tokens a text needs for a ranking of its tokens to mean anything


def split_short(tokenized: pd.DataFrame, min_tokens: int = MIN_TOKENS) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(rows with at least `min_tokens` real subword tokens, the others as skipped: example_id, reason)."""
    n_real = tokenized["input_ids"].map(len) - 2 if len(tokenized) else pd.Series(dtype=int)
    short = n_real < min_tokens
    skipped = pd.DataFrame({"example_id": tokenized.loc[short, "example_id"],
                            "reason": [f"{n} real token(s), fewer than {min_tokens}" for n in n_real[short]]})
    return tokenized[~short].reset_index(drop=True), skipped.reset_index(drop=True)


def unlabeled_examples(classifier, texts: Sequence[str | Sequence[str]], ids: Sequence[str] | None = None, *,
                       max_length: int = 128, batch_size: int = 32,
                       min_tokens: int = MIN_TOKENS) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Texts (strings, split into words by the classifier tokenizer's pre-tokenizer as `explain` does, or lists of
    words) -> (examples: example_id, words, input_ids, predicted, probability; skipped: example_id, reason). A text
    with fewer than `min_tokens` real subword tokens is skipped (logged with the count)."""
    from learned_attribution.core.data.projection import project_to_subwords
    from learned_attribution.services.explain import tokenizer_words

    tokenizer = classifier.tokenizer
    ids = [str(i) for i in (range(len(texts)) if ids is None else ids)]
    if len(ids) != len(texts):
        raise ValueError(f"{len(ids)} ids for {len(texts)} texts")
    if len(set(ids)) != len(ids):
        raise ValueError("text ids must be unique")
    words = [tokenizer_words(tokenizer, t)[0] if isinstance(t, str) else [str(w) for w in t] for t in texts]
    frame = pd.DataFrame({"example_id": ids, "words": words})
    empty = frame["words"].map(lambda w: not any(x.strip() for x in w))
    tokenized = project_to_subwords(frame[~empty].assign(word_rationale=None).reset_index(drop=True), tokenizer,
                                    max_length) if (~empty).any() else frame.iloc[:0].assign(input_ids=[])
    usable, short = split_short(tokenized, min_tokens)
    skipped = pd.concat([pd.DataFrame({"example_id": frame.loc[empty, "example_id"], "reason": "empty"}), short],
                        ignore_index=True)
    if len(skipped):
        logger.warning("%d of %d texts skipped (empty, or fewer than %d real tokens: nothing to rank)",
                       len(skipped), len(texts), min_tokens)
    examples = usable[["example_id", "words", "input_ids"]]
    if not len(examples):
        raise ValueError(f"none of the {len(texts)} texts has {min_tokens} or more real tokens to attribute")
    return predicted_examples(classifier, examples, batch_size), skipped


def predicted_examples(classifier, examples: pd.DataFrame, batch_size: int = 32) -> pd.DataFrame:
    """`examples` (with `input_ids`) with the classifier's `predicted` class and its `probability`."""
    from learned_attribution.core.models.runner import predict_proba

    probabilities = predict_proba(classifier.model, list(examples["input_ids"]), batch_size,
                                  classifier.tokenizer.pad_token_id)
    return examples.assign(predicted=probabilities.argmax(1), probability=probabilities.max(1))


def student_signals(classifier, examples: pd.DataFrame, feature_sets: Sequence[str], layer: int = -1,
                    batch_size: int = 32) -> pd.DataFrame:
    """The classifier's signal rows (`models/signals.py`, the `feature_sets` given) for every example, for its
    predicted class: one row per non-special token (example_id, position, token, the signal columns)."""
    from learned_attribution.core.models.signals import signal_rows

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


def student_variants(variants: dict[str, dict]) -> list:
    """The `Variant`s of a `student.variants` block (each must use the distill objective)."""
    from learned_attribution.core.models.learned import Variant

    built = [Variant.from_params(name, {"objective": "distill", "stopping": "example_spearman", **(settings or {})})
             for name, settings in variants.items()]
    if not built:
        raise ValueError("parameter student.variants is empty: name at least one student variant")
    return built


def fit_student(classifier, signals: pd.DataFrame, teacher_scores: pd.DataFrame, variants: Sequence,
                settings, val_fraction: float = 0.15, seed: int = 0, device: str | torch.device = "cpu",
                context: dict | None = None):
    """Every variant trained to reproduce the teacher (objective `distill`, early stopping on the validation texts'
    mean per-example Spearman); returns (the student: the variant with the best validation Spearman, the table of
    every variant: name, description, mean per-example Spearman with the labels on its own training texts and on
    the validation texts, best epoch). The student's context records the classifier it is bound to."""
    from learned_attribution.core.models.artifacts import classifier_fingerprint, classifier_signature
    from learned_attribution.core.models.learned import fit_variant
    from learned_attribution.core.models.learned.training import score_examples
    from learned_attribution.core.models.signals import model_columns

    from .scores import mean_example_spearman

    rows = labelled_rows(signals, teacher_scores).assign(task="teacher")
    train_ids, val_ids = split_examples(rows["example_id"], val_fraction, seed)
    train, val = rows[rows["example_id"].isin(train_ids)], rows[rows["example_id"].isin(val_ids)]
    config = classifier.model.config
    trained, table = {}, []
    for variant in variants:
        columns = model_columns(variant.feature_sets, config)
        model = fit_variant(variant, train, val, None, {}, columns, 0.2, settings, device)
        trained[variant.name] = model
        # How well it reproduces the labels it was trained on: a value near val_spearman means the student
        # underfits (its inputs cannot express the teacher), not that it lacks texts.
        on_train = mean_example_spearman(score_examples(model, train), teacher_scores)
        table.append({"variant": variant.name, "description": variant.describe(), "n_train": len(train_ids),
                      "n_val": len(val_ids), "train_spearman": on_train,
                      "val_spearman": float(np.mean(model.member_val_auroc)),
                      "best_epoch": model.best_epoch, "epochs": len(model.history)})
    table = pd.DataFrame(table).sort_values("val_spearman", ascending=False, kind="mergesort")
    table["selected"] = np.arange(len(table)) == 0
    student = trained[table["variant"].iloc[0]]
    student.context = {**(context or {}), "kind": "student", "variant": student.variant.name,
                       "classifier": classifier_signature(classifier.model, classifier.tokenizer),
                       "classifier_fingerprint": classifier_fingerprint(classifier.model),
                       "classifier_path": None if classifier.path is None else str(classifier.path)}
    logger.info("student variants (validation Spearman with the teacher):\n%s",
                table[["variant", "train_spearman", "val_spearman", "best_epoch"]].round(4).to_string(index=False))
    return student, table.reset_index(drop=True)

