"""A task's classifier (SPEC §2, §4-5): fine-tuned from the encoder on the task's classifier_train rows (the epoch
chosen on classifier_val), its predictions on the test and rationale rows with the metrics, and the per-token inputs
of the explainers (every signal of `core/models/signals.py`; the paper's attention features), in parts of bounded
size."""
from __future__ import annotations

import logging
import time
from typing import Any, Callable, Iterator

import numpy as np
import pandas as pd

from learned_attribution.core.data.modes import GOLD, in_mode, recomputed
from learned_attribution.core.models.classifier import CLASSIFICATION_METRICS, classification_intervals
from learned_attribution.core.models.classifier import classification_metrics, fine_tune, seed_everything
from learned_attribution.core.models.features import extract_attention_features, frame_token_ids
from learned_attribution.core.models.loading import TrainedClassifier, load_encoder, load_tokenizer, new_classifier
from learned_attribution.core.models.runner import predict_proba
from learned_attribution.core.models.signals import FEATURE_SETS, columns_for, signal_rows
from learned_attribution.core.tasks import class_names

from .config import ClassifierSettings, ComputeSettings, FeatureSettings

logger = logging.getLogger(__name__)

# Each metric with its bootstrap 95% interval over examples (`<metric>_low`, `<metric>_high`).
CLASSIFIER_METRIC_COLUMNS = ["task", "eval_set", "n", *CLASSIFICATION_METRICS,
                             *(f"{metric}_{end}" for metric in CLASSIFICATION_METRICS for end in ("low", "high"))]
EVALUATED_ROLES = ["classifier_test", "rationale_train", "rationale_val", "rationale_test"]


def role_rows(tokenized: pd.DataFrame, role: str, cap: int | None = None, seed: int = 0) -> pd.DataFrame:
    """The `role` rows of a tokenized table, a seeded sample of `cap` of them when there are more."""
    rows = tokenized[tokenized["role"] == role]
    if cap and len(rows) > cap:
        rows = rows.sample(n=cap, random_state=seed)
    return rows.reset_index(drop=True)


def train_task_classifier(tokenized: pd.DataFrame, encoder: str, settings: ClassifierSettings,
                          compute: ComputeSettings, prepare_model: Callable[[Any], Any] | None = None
                          ) -> tuple[TrainedClassifier, pd.DataFrame]:
    """Fine-tune `encoder` on the task's classifier_train rows on the `compute` device; the epoch is chosen on
    classifier_val. `prepare_model` (benchmarks/tune_classifier.py) changes the loaded classifier before
    fine-tuning. Returns the classifier and its training history (one row per epoch)."""
    seed = settings.training.seed
    train = role_rows(tokenized, "classifier_train", settings.max_train_examples, seed)
    val = role_rows(tokenized, "classifier_val", settings.max_val_examples, seed)
    task = tokenized["task"].iloc[0]
    labels = sorted(tokenized.loc[tokenized["role"] == "classifier_train", "label"].unique())
    if labels != list(range(len(labels))):
        raise ValueError(f"{task}: classifier labels must be 0..C-1, found {labels}")
    seed_everything(seed)
    tokenizer = load_tokenizer(encoder)
    model = new_classifier(encoder, class_names(task, len(labels)))
    if prepare_model is not None:
        model = prepare_model(model)
    model = compute.place(model)
    logger.info("%s: fine-tuning on %d examples (validation %d) on %s, bf16=%s", task, len(train), len(val),
                compute.device, settings.training.bf16)
    started = time.perf_counter()
    result = fine_tune(model, list(train["input_ids"]), train["label"].to_numpy(), list(val["input_ids"]),
                       val["label"].to_numpy(), settings.training, tokenizer.pad_token_id)
    seconds = time.perf_counter() - started
    logger.info("%s: fine-tuned in %.0f s, best epoch %d", task, seconds, result.best_epoch)
    history = pd.DataFrame(result.history)
    history.insert(0, "task", task)
    history["best_epoch"] = result.best_epoch
    history["train_seconds"] = seconds
    history["n_train"] = len(train)
    return TrainedClassifier(model, tokenizer), history


def predict_roles(classifier: TrainedClassifier, tokenized: pd.DataFrame, settings: ClassifierSettings,
                  compute: ComputeSettings) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every classifier_test and rationale example predicted on the `compute` device: the rationale rows with
    `predicted`, `probability` (of the predicted class) and `correct`, and the metrics table rows."""
    compute.place(classifier.model)
    task = tokenized["task"].iloc[0]
    evaluated = tokenized[tokenized["role"].isin(EVALUATED_ROLES)].reset_index(drop=True)
    # A text in several roles (SST-2's test sentences are also its rationale test set) is classified once.
    first: dict[tuple[int, ...], int] = {}
    index = [first.setdefault(tuple(ids), len(first)) for ids in evaluated["input_ids"]]
    probabilities = predict_proba(classifier.model, [list(ids) for ids in first], settings.eval_batch_size,
                                  classifier.tokenizer.pad_token_id, compute.bf16)[index]
    evaluated["predicted"] = probabilities.argmax(1)
    evaluated["probability"] = probabilities.max(1)
    evaluated["correct"] = evaluated["predicted"] == evaluated["label"]
    rows = []
    for role, group in evaluated.groupby("role", sort=False):
        eval_set = "test" if role == "classifier_test" else role
        rows.append({"task": task, "eval_set": eval_set, "n": len(group),
                     **classification_metrics(group["label"], group["predicted"]),
                     **classification_intervals(group["label"], group["predicted"], seed=settings.training.seed)})
        if role.startswith("rationale"):
            logger.info("%s %s: %d of %d predicted correctly (explainer training keeps only these)",
                        task, role, int(group["correct"].sum()), len(group))
    metrics = pd.DataFrame(rows, columns=CLASSIFIER_METRIC_COLUMNS)
    return evaluated[evaluated["role"] != "classifier_test"].reset_index(drop=True), metrics


def parts(chunks: Iterator[pd.DataFrame], n_rows: int, chunk_size: int) -> dict[str, Callable[[], pd.DataFrame]]:
    """Lazily computed Parquet parts (`part-0000`, ...) of `chunks`, one chunk per part: a partitioned dataset
    calls each loader in turn while saving, so only one chunk is in memory."""
    return {f"part-{i:04d}": (lambda: next(chunks)) for i in range(int(np.ceil(n_rows / chunk_size)))}


def signal_parts(classifier: TrainedClassifier, predictions: pd.DataFrame, features: FeatureSettings, layer: int,
                 compute: ComputeSettings) -> dict[str, Callable[[], pd.DataFrame]]:
    """Every feature set of `models.signals` for every rationale example, from the task's classifier explaining its
    predicted class (on the `compute` device)."""
    model = compute.place(classifier.model)
    chunks = signal_rows(model, classifier.tokenizer, predictions, list(FEATURE_SETS), layer, features.batch_size,
                         features.chunk_size)
    return parts(chunks, len(predictions), features.chunk_size)


def gold_signal_table(classifier: TrainedClassifier, predictions: pd.DataFrame, features: FeatureSettings, layer: int,
                      compute: ComputeSettings) -> pd.DataFrame:
    """Every feature set for the rationale examples the classifier mispredicted, each explained for its gold class
    (`modes.recomputed`: `explained` = its label): with `signal_parts`, the signals of gold mode (a correct example's
    are the same in both modes, so only these are computed twice). Empty, with the same columns, when every
    example is predicted correctly."""
    model = compute.place(classifier.model)
    wrong = recomputed(predictions)
    rows = wrong if len(wrong) else in_mode(predictions.head(1), GOLD)  # one example's rows give the columns
    tables = list(signal_rows(model, classifier.tokenizer, rows, list(FEATURE_SETS), layer, features.batch_size,
                              features.chunk_size, description="gold-class signals"))
    table = pd.concat(tables, ignore_index=True)
    logger.info("%s: gold-class signals of the %d mispredicted rationale examples", predictions["task"].iloc[0],
                len(wrong))
    return table if len(wrong) else table.iloc[:0]


def attention_feature_parts(signals: dict[str, Callable[[], pd.DataFrame]], classifier: TrainedClassifier,
                            predictions: pd.DataFrame, encoder: str, features: FeatureSettings, layer: int,
                            compute: ComputeSettings) -> dict[str, Callable[[], pd.DataFrame]]:
    """Per-token attention features of every rationale example (SPEC §5). `source: classifier` reads the fine-tuned
    task classifier (the model being explained): its 2H features are the `attention` set of the explainer signals,
    computed in the same pass of the same model, so they are read from those parts instead of a second pass over
    every example. `source: pretrained` runs the frozen pretrained encoder."""
    if features.source == "classifier":
        config = classifier.model.config
        others = columns_for([s for s in FEATURE_SETS if s != "attention"], config.num_attention_heads,
                             config.num_hidden_layers)
        return {key: (lambda load=load: load().drop(columns=others)) for key, load in sorted(signals.items())}
    model = compute.place(load_encoder(encoder))
    tokenizer = classifier.tokenizer
    chunks = extract_attention_features(model, predictions, layer, features.batch_size, tokenizer.pad_token_id,
                                        frame_token_ids(tokenizer), tokenizer, features.chunk_size)
    return parts(chunks, len(predictions), features.chunk_size)
