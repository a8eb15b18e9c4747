"""Nodes of the data_processing pipeline: raw files in, one token-level rationale schema out."""
from __future__ import annotations

import inspect
import logging
from typing import Any, Callable

import datasets

import pandas as pd

from learned_attribution.core.models.projection import project_dataset
from learned_attribution.core.data.schema import RawText, cap_examples, data_report
from learned_attribution.core.models.loading import load_tokenizer
from learned_attribution.services.config import block, encoder_name

logger = logging.getLogger(__name__)


def read_task(*inputs: RawText | dict[str, Any] | bool, loader: Callable, task: str):
    """A task's raw files (in its loader's order), its options `data_processing.<task>` and
    `data_processing.strict` -> (examples, skipped records) through its loader (`core.tasks.Task.loader`); the
    options are every keyword option of the loader, none other."""
    *raw_files, options, strict = inputs
    accepted = [name for name, parameter in inspect.signature(loader).parameters.items()
                if parameter.kind is parameter.KEYWORD_ONLY or parameter.default is not parameter.empty]
    block(options, f"data_processing.{task}", [name for name in accepted if name != "strict"])
    return loader(*raw_files, strict=strict, **options)


def tokenize_examples(examples: pd.DataFrame, encoder: dict[str, Any], max_length: int,
                      max_per_role: int | None, seed: int) -> pd.DataFrame:
    """Project word rationales onto the configured encoder's subword tokens (SPEC §3), as a Hugging Face
    `datasets.Dataset` mapped in batches (`core.models.projection.project_dataset`)."""
    tokenizer = load_tokenizer(encoder_name(encoder))
    table = datasets.Dataset.from_pandas(cap_examples(examples, max_per_role, seed), preserve_index=False)
    return project_dataset(table, tokenizer, max_length).to_pandas()


def build_data_report(*tables: pd.DataFrame) -> pd.DataFrame:
    """One row per task, split and role (`core.data.schema.data_report`): every task's tokenized table, then every task's
    skipped records, in the same task order."""
    report = data_report(*tables)
    logger.info("Data report:\n%s", report.to_string(index=False))
    return report
