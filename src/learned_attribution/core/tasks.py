"""The tasks of the cross-task protocol (SPEC §1): every pipeline, the folds and the API read this registry.

A task is its loader and its configuration (docs/extending.md): one `Task` entry below naming its loader (a function
of `core.data`: the raw files in the order of `raw_inputs`, its options by keyword, `strict`), plus its catalog and
parameters entries (`data_processing.<name>`: the loader's options). Every per-task dataset beyond the raw files
(`examples_<task>`, `<task>.classifier`, `heldout_<task>.*`, ...) is a catalog pattern.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from learned_attribution.core.data.cola import load_cola
from learned_attribution.core.data.hatexplain import load_hatexplain
from learned_attribution.core.data.sst import load_sst2


@dataclass(frozen=True)
class Task:
    """One task. `loader(*raw_files, strict=..., **options)` returns (examples, skipped) in `data.schema`'s
    EXAMPLE_COLUMNS (`task` = `name`) and SKIP_COLUMNS; `raw_inputs` are its raw catalog entries in the loader's
    order. `class_names`: class names in label-id order, by number of classes, written into the fine-tuned
    classifier's config (`id2label`) so that explanations, reports and served answers name the class instead of
    LABEL_<n>."""

    name: str
    loader: Callable
    raw_inputs: tuple[str, ...]
    class_names: dict[int, tuple[str, ...]] = field(default_factory=dict)


TASK_REGISTRY: tuple[Task, ...] = (
    Task("hatexplain", load_hatexplain, ("raw_hatexplain_dataset", "raw_hatexplain_divisions"),
         {2: ("normal", "toxic"), 3: ("normal", "offensive", "hatespeech")}),
    Task("sst2", load_sst2,
         tuple(f"raw_sst2_{source}_{split}" for source in ("glue", "trees") for split in ("train", "dev", "test")),
         {2: ("negative", "positive")}),
    Task("cola", load_cola, ("raw_cola_in_domain_train", "raw_cola_in_domain_dev", "raw_cola_out_of_domain_dev"),
         {2: ("unacceptable", "acceptable")}),
)

TASKS = tuple(task.name for task in TASK_REGISTRY)
FOLD_PREFIX = "heldout_"
FOLDS = tuple(f"{FOLD_PREFIX}{task}" for task in TASKS)
# The other per-task namespaces: a fold's ablation (`ablation_<task>`) and a task classifier's student
# (`student_<task>`).
ABLATION_PREFIX = "ablation_"
STUDENT_PREFIX = "student_"
# The protocol holds one task out and selects ExpNet+ by leaving one of the others out: two training tasks at least.
MIN_TASKS = 3
CLASS_NAMES = {task.name: task.class_names for task in TASK_REGISTRY}


def held_out_task(fold: str) -> str:
    """The task a fold holds out: `heldout_<task>` -> `<task>` (the catalog's `${held_out_task:...}` resolver too)."""
    return str(fold).removeprefix(FOLD_PREFIX)


def class_names(task: str, n_classes: int) -> tuple[str, ...]:
    """The names of `task`'s classes 0..n_classes-1 (LABEL_<n>, transformers' default, for an unknown set)."""
    return CLASS_NAMES.get(task, {}).get(n_classes) or tuple(f"LABEL_{i}" for i in range(n_classes))
