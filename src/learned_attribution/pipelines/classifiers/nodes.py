"""Nodes of the classifiers pipeline: fine-tune one classifier per task, predict, filter, extract attention features."""
from __future__ import annotations

import logging
import time
from typing import Any, Callable

import numpy as np
import pandas as pd

from learned_attribution.adapters.kedro_datasets import TrainedClassifier
from learned_attribution.core.models.classifier import TrainingConfig, classification_metrics, fine_tune, seed_everything
from learned_attribution.core.models.runner import Compute, predict_proba
from learned_attribution.core.models.encoder import load_encoder, load_sequence_classifier, load_tokenizer
from learned_attribution.core.models.features import extract_attention_features, frame_token_ids
from learned_attribution.core.tasks import class_names

logger = logging.getLogger(__name__)

METRIC_COLUMNS = ["task", "eval_set", "n", "accuracy", "macro_f1", "mcc"]
_TRAINING_KEYS = set(TrainingConfig.__dataclass_fields__)


def _rows(tokenized: pd.DataFrame, role: str, cap: int | None = None, seed: int = 0) -> pd.DataFrame:
    rows = tokenized[tokenized["role"] == role]
    if cap and len(rows) > cap:
        rows = rows.sample(n=cap, random_state=seed)
    return rows.reset_index(drop=True)


def train_classifier(tokenized: pd.DataFrame, encoder: dict[str, Any], params: dict[str, Any], seed: int,
                     compute: dict[str, Any] | None = None,
                     prepare_model: Callable[[Any], Any] | None = None) -> tuple[TrainedClassifier, pd.DataFrame]:
    """Fine-tune the encoder on the task's classifier_train rows on the `compute` device; the epoch is chosen
    on classifier_val. `prepare_model` (benchmarks/tune_classifier.py) changes the loaded classifier before
    fine-tuning."""
    unknown = set(params) - (_TRAINING_KEYS - {"seed", "bf16"}) - {"max_train_examples", "max_val_examples",
                                                                   "eval_batch_size"}
    if unknown:
        raise ValueError(f"unknown classifier parameters {sorted(unknown)}; expected "
                         f"{sorted(_TRAINING_KEYS - {'seed', 'bf16'})}, max_train_examples, max_val_examples, "
                         "eval_batch_size (the device and bf16 are set under `compute`)")
    place = Compute.from_params(compute)
    config = TrainingConfig(**{k: v for k, v in params.items() if k in _TRAINING_KEYS}, seed=seed, bf16=place.bf16)
    train = _rows(tokenized, "classifier_train", params.get("max_train_examples"), seed)
    val = _rows(tokenized, "classifier_val", params.get("max_val_examples"), seed)
    task = tokenized["task"].iloc[0]
    labels = sorted(tokenized.loc[tokenized["role"] == "classifier_train", "label"].unique())
    if labels != list(range(len(labels))):
        raise ValueError(f"{task}: classifier labels must be 0..C-1, found {labels}")
    seed_everything(seed)
    tokenizer = load_tokenizer(encoder["name_or_path"])
    model = load_sequence_classifier(encoder["name_or_path"], class_names(task, len(labels)))
    if prepare_model is not None:
        model = prepare_model(model)
    model = place.place(model)
    logger.info("%s: fine-tuning on %d examples (validation %d) on %s, bf16=%s", task, len(train), len(val),
                place.device, config.bf16)
    started = time.perf_counter()
    result = fine_tune(model, list(train["input_ids"]), train["label"].to_numpy(), list(val["input_ids"]),
                       val["label"].to_numpy(), config, tokenizer.pad_token_id)
    seconds = time.perf_counter() - started
    logger.info("%s: fine-tuned in %.0f s, best epoch %d", task, seconds, result.best_epoch)
    history = pd.DataFrame(result.history)
    history.insert(0, "task", task)
    history["best_epoch"] = result.best_epoch
    history["train_seconds"] = seconds
    history["n_train"] = len(train)
    return TrainedClassifier(model, tokenizer), history


def predict_examples(classifier: TrainedClassifier, tokenized: pd.DataFrame, params: dict[str, Any],
                     compute: dict[str, Any] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Predict every classifier_test and rationale example on the `compute` device; return the rationale rows
    with `predicted`, `probability` (of the predicted class) and `correct`, and the metrics table rows."""
    place = Compute.from_params(compute)
    place.place(classifier.model)
    task = tokenized["task"].iloc[0]
    evaluated = tokenized[tokenized["role"].isin(["classifier_test", "rationale_train", "rationale_val",
                                                  "rationale_test"])].reset_index(drop=True)
    probabilities = predict_proba(classifier.model, list(evaluated["input_ids"]), params["eval_batch_size"],
                                  classifier.tokenizer.pad_token_id, place.bf16)
    evaluated["predicted"] = probabilities.argmax(1)
    evaluated["probability"] = probabilities.max(1)
    evaluated["correct"] = evaluated["predicted"] == evaluated["label"]
    rows = []
    for role, group in evaluated.groupby("role", sort=False):
        eval_set = "test" if role == "classifier_test" else role
        rows.append({"task": task, "eval_set": eval_set, "n": len(group),
                     **classification_metrics(group["label"], group["predicted"])})
        if role.startswith("rationale"):
            logger.info("%s %s: %d of %d predicted correctly (explainer training keeps only these)",
                        task, role, int(group["correct"].sum()), len(group))
    metrics = pd.DataFrame(rows, columns=METRIC_COLUMNS)
    rationale = evaluated[evaluated["role"] != "classifier_test"].reset_index(drop=True)
    return rationale, metrics


def attention_features(signals: dict[str, Callable[[], pd.DataFrame]], classifier: TrainedClassifier,
                       predictions: pd.DataFrame, encoder: dict[str, Any], params: dict[str, Any],
                       compute: dict[str, Any] | None = None) -> dict[str, Callable[[], pd.DataFrame]]:
    """Per-token attention features of every rationale example (SPEC §5), as Parquet parts saved lazily
    one chunk at a time. `source: classifier` reads the fine-tuned task classifier (the model being
    explained): its 2H features are the `attention` set of the explainer signals, computed in the same pass
    of the same model, so they are read from those parts instead of a second pass over every example.
    `source: pretrained` runs the frozen pretrained encoder."""
    from learned_attribution.core.models.signals import FEATURE_SETS, columns_for

    if params["source"] == "classifier":
        config = classifier.model.config
        others = columns_for([s for s in FEATURE_SETS if s != "attention"], config.num_attention_heads,
                             config.num_hidden_layers)
        return {key: (lambda load=load: load().drop(columns=others)) for key, load in sorted(signals.items())}
    if params["source"] != "pretrained":
        raise ValueError(f"parameter features.source must be 'classifier' or 'pretrained', got {params['source']!r}")
    model = Compute.from_params(compute).place(load_encoder(encoder["name_or_path"]))
    tokenizer = classifier.tokenizer
    chunks = extract_attention_features(model, predictions, params["layer"], params["batch_size"],
                                        tokenizer.pad_token_id, frame_token_ids(tokenizer), tokenizer,
                                        params["chunk_size"])
    n_parts = int(np.ceil(len(predictions) / params["chunk_size"]))
    # PartitionedDataset calls each loader in turn while saving, so only one chunk is in memory.
    return {f"part-{i:04d}": (lambda: next(chunks)) for i in range(n_parts)}


def explainer_signals(classifier: TrainedClassifier, predictions: pd.DataFrame, params: dict[str, Any],
                      compute: dict[str, Any] | None = None) -> dict[str, Callable[[], pd.DataFrame]]:
    """ExpNet+ inputs (issue 06): every feature set of `models.signals` for every rationale example, from
    the task's classifier explaining its predicted class (on the `compute` device), as Parquet parts saved
    lazily one chunk at a time."""
    from learned_attribution.core.models.signals import FEATURE_SETS, signal_rows

    model = Compute.from_params(compute).place(classifier.model)
    chunks = signal_rows(model, classifier.tokenizer, predictions, list(FEATURE_SETS), params["layer"],
                         params["batch_size"], params["chunk_size"])
    n_parts = int(np.ceil(len(predictions) / params["chunk_size"]))
    return {f"part-{i:04d}": (lambda: next(chunks)) for i in range(n_parts)}


def combine_classifier_metrics(*tables: pd.DataFrame) -> pd.DataFrame:
    """Stack the per-task metric rows into data/08_reporting/classifier_metrics.csv."""
    metrics = pd.concat(tables, ignore_index=True)
    logger.info("Classifier metrics:\n%s", metrics.round(4).to_string(index=False))
    return metrics
