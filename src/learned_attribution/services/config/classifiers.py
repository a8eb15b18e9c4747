"""`classifiers.<task>` (each task classifier's fine-tuning) and `features` (the attention features)."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping

from learned_attribution.core.models.classifier import TrainingConfig

from .blocks import block, dataclass_from, positive_int
from .compute import ComputeSettings


def encoder_name(encoder: Mapping[str, Any]) -> str:
    """`params:encoder`: the encoder every task classifier fine-tunes (`name_or_path`: a packaged name, a hub name
    or a local folder)."""
    return str(block(encoder, "encoder", ("name_or_path",))["name_or_path"])


@dataclass(frozen=True)
class ClassifierSettings:
    """`classifiers.<task>`: the fine-tuning recipe and the seeded caps on its slices."""

    training: TrainingConfig
    max_train_examples: int | None
    max_val_examples: int | None
    eval_batch_size: int


CLASSIFIER_CAPS = ("max_train_examples", "max_val_examples", "eval_batch_size")


def classifier_settings(classifier: Mapping[str, Any], seed: int, compute: ComputeSettings,
                        where: str) -> ClassifierSettings:
    values = block(classifier, where, [*CLASSIFIER_CAPS, *(f.name for f in fields(TrainingConfig)
                                                          if f.name not in ("seed", "bf16"))])
    caps = {key: values.pop(key) for key in CLASSIFIER_CAPS}
    training = dataclass_from(TrainingConfig, values, where, seed=seed, bf16=compute.bf16)
    return ClassifierSettings(training, positive_int(caps["max_train_examples"], f"{where}.max_train_examples",
                                                     none=True),
                              positive_int(caps["max_val_examples"], f"{where}.max_val_examples", none=True),
                              positive_int(caps["eval_batch_size"], f"{where}.eval_batch_size"))


@dataclass(frozen=True)
class FeatureSettings:
    """`features`: which model the attention features read (the task classifier or the frozen encoder), their batch
    and Parquet part sizes."""

    source: str
    batch_size: int
    chunk_size: int


def feature_settings(features: Mapping[str, Any]) -> FeatureSettings:
    values = block(features, "features", ("source", "batch_size", "chunk_size"))
    if values["source"] not in ("classifier", "pretrained"):
        raise ValueError(f"parameter features.source must be 'classifier' or 'pretrained', got {values['source']!r}")
    return FeatureSettings(values["source"], positive_int(values["batch_size"], "features.batch_size"),
                           positive_int(values["chunk_size"], "features.chunk_size"))
