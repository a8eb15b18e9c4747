"""Nodes of the data_processing pipeline: raw files in, one token-level rationale schema out."""
from __future__ import annotations

import inspect
import logging
from typing import Any, Callable

import datasets

import pandas as pd

from learned_attribution.core.models.projection import project_dataset
from learned_attribution.core.data.schema import RawText
from learned_attribution.core.models.loading import load_tokenizer
from learned_attribution.services.config import block

logger = logging.getLogger(__name__)

REPORT_COLUMNS = ["task", "split", "role", "n_examples", "n_with_rationale", "rationale_density", "n_truncated",
                  "n_skipped"]


def read_task(*inputs: RawText | dict[str, Any] | bool, loader: Callable, task: str):
    """A task's raw files (in its loader's order), its options `data_processing.<task>` and
    `data_processing.strict` -> (examples, skipped records) through its loader (`core.tasks.Task.loader`); the
    options are every keyword option of the loader, none other."""
    *raw_files, options, strict = inputs
    accepted = [name for name, parameter in inspect.signature(loader).parameters.items()
                if parameter.kind is parameter.KEYWORD_ONLY or parameter.default is not parameter.empty]
    block(options, f"data_processing.{task}", [name for name in accepted if name != "strict"])
    return loader(*raw_files, strict=strict, **options)


def cap_examples(examples: pd.DataFrame, max_per_role: int | None, seed: int) -> pd.DataFrame:
    """Keep at most `max_per_role` seeded examples per role (the smoke environment's slices)."""
    if not max_per_role:
        return examples
    # Not groupby.apply: pandas 3 drops the grouping column ("role") from apply's result.
    parts = [rows.sample(n=min(len(rows), max_per_role), random_state=seed)
             for _, rows in examples.groupby("role", sort=False)]
    if not parts:
        return examples.iloc[:0]
    return pd.concat(parts).reset_index(drop=True)


def tokenize_examples(examples: pd.DataFrame, encoder: dict[str, Any], max_length: int,
                      max_per_role: int | None, seed: int) -> pd.DataFrame:
    """Project word rationales onto the configured encoder's subword tokens (SPEC §3), as a Hugging Face
    `datasets.Dataset` mapped in batches (`data.projection.project_dataset`)."""
    tokenizer = load_tokenizer(encoder["name_or_path"])
    table = datasets.Dataset.from_pandas(cap_examples(examples, max_per_role, seed), preserve_index=False)
    return project_dataset(table, tokenizer, max_length).to_pandas()


def build_data_report(*tables: pd.DataFrame) -> pd.DataFrame:
    """One row per task, split and role, from every task's tokenized table followed by every task's skipped
    records, in the same task order (`tokenized_<a>, tokenized_<b>, ..., skipped_<a>, skipped_<b>, ...`).
    `n_skipped` counts each skipped input record once, on the row it belongs to: the role the parser says it
    would have fed (e.g. a GLUE line -> classifier, a tree line -> rationale, a toxic post without rationales ->
    rationale); a record skipped before roles exist (a raw CoLA line) counts on its split's classifier row. Skips
    with no such row get a row of their own."""
    if len(tables) % 2:
        raise ValueError(f"build_data_report takes each task's tokenized table, then each task's skipped records: "
                         f"got {len(tables)} tables, an odd number")
    frames, skipped_tables = tables[:len(tables) // 2], tables[len(tables) // 2:]
    skipped = pd.concat(skipped_tables, ignore_index=True)
    present = {key for frame in frames for key in frame.groupby(["task", "split", "role"]).groups}
    skip_counts: dict[tuple, int] = {}
    for record in skipped.to_dict("records"):
        role = record.get("role")
        if role is None or pd.isna(role):
            classifier_roles = sorted(r for t, sp, r in present
                                      if t == record["task"] and sp == record["split"] and r.startswith("classifier"))
            role = classifier_roles[0] if classifier_roles else None
        key = (record["task"], record["split"], role)
        skip_counts[key] = skip_counts.get(key, 0) + 1
    rows = []
    for frame in frames:
        for (task, split, role), group in frame.groupby(["task", "split", "role"], sort=False):
            with_rationale = group["word_rationale"].dropna()
            marked = sum(int(sum(r)) for r in with_rationale)
            words = sum(len(r) for r in with_rationale)
            rows.append({
                "task": task, "split": split, "role": role, "n_examples": len(group),
                "n_with_rationale": int(sum(sum(r) > 0 for r in with_rationale)),
                "rationale_density": round(marked / words, 4) if words else None,
                "n_truncated": int(group["truncated"].sum()),
                "n_skipped": int(skip_counts.get((task, split, role), 0)),
            })
    # Skips whose role has no example rows (e.g. every record of a split skipped) stay visible.
    for (task, split, role), count in skip_counts.items():
        if (task, split, role) not in present:
            rows.append({"task": task, "split": split, "role": role, "n_examples": 0, "n_with_rationale": 0,
                         "rationale_density": None, "n_truncated": 0, "n_skipped": int(count)})
    report = pd.DataFrame(rows, columns=REPORT_COLUMNS)
    logger.info("Data report:\n%s", report.to_string(index=False))
    return report
