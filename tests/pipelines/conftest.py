"""Pipeline slices from raw text to a fold's trained explainers and metrics, run by Kedro's SequentialRunner on an
in-memory catalog: the real data_processing, classifiers and fold nodes, the real parameters (conf/base + conf/smoke,
with a few settings shrunk for speed), synthetic sentences and tiny random classifiers instead of fine-tuned ones.

A synthetic task, "synthetic", is added the way docs/extending.md says a task is added: its loader (`read_synthetic`
below, reading one raw TSV) in a `Task` entry, and its configuration (`data_processing.synthetic`,
`classifiers.synthetic`); the other tasks of a slice keep their registered names and start from in-memory examples
(their real readers are tested in tests/data)."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd
import pytest
from kedro.io import AbstractDataset, DataCatalog, MemoryDataset
from kedro.pipeline import Pipeline
from kedro.runner import SequentialRunner

from learned_attribution.core.data.schema import BadRecords, RawText, check_rationale_length, make_examples_frame
from learned_attribution.core.models.loading import TrainedClassifier
from learned_attribution.pipelines import ablation, classifiers, crosstask, data_processing
from learned_attribution.core.tasks import Task

ENCODER = "packaged:all-MiniLM-L6-v2"  # the default encoder's tokenizer; the classifiers are tiny and random
SYNTHETIC = "synthetic"
# Words the MiniLM tokenizer keeps whole; the rationale is each sentence's cue words.
FILLER = ("the", "film", "was", "and", "it", "a", "story", "of", "this", "plot", "with", "very", "actors", "end")
CUES = {1: ("good", "great", "fun", "lovely"), 0: ("bad", "dull", "boring", "awful")}
ROLE_SIZES = {"classifier_train": 8, "classifier_val": 4, "classifier_test": 8, "rationale_train": 24,
              "rationale_val": 16, "rationale_test": 16}
FAST = {  # on top of conf/base + conf/smoke: a tiny slice runs in seconds, every node still runs
    "max_length": 32,
    "crosstask": {
        "expensive_sample_size": 6, "n_heatmaps": 2,
        "bootstrap": {"n_boot": 20},
        "expnet": {"training": {"max_epochs": 3}},
        "expnet_plus": {"training": {"max_epochs": 2}},
    },
    "ablation": {"candidates": ["paper_inputs", "signals_pairwise", "signals_self_training", "stack_agreement",
                                "shape_free_stack_self_training"],
                 "training": {"max_epochs": 2, "seeds": 2}, "cost_examples": 6},
}
# The synthetic task's configuration (docs/extending.md: parameters_data_processing.yml, parameters_classifiers.yml).
SYNTHETIC_PARAMETERS = {"data_processing": {SYNTHETIC: {"min_words": 3}},
                        "classifiers": {SYNTHETIC: {"epochs": 1, "learning_rate": 1.0e-4, "batch_size": 16,
                                                    "weight_decay": 0.01, "warmup_fraction": 0.06, "decay_epochs": None,
                                                    "class_weighting": False, "freeze_word_embeddings": False,
                                                    "selection_metric": "accuracy",
                                                    "max_train_examples": None, "max_val_examples": None,
                                                    "eval_batch_size": 16}}}


def read_synthetic(sentences: RawText, *, strict: bool, min_words: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The synthetic task's loader: one TSV line per example (role, label, words, 0/1 word rationale or "-")."""
    bad = BadRecords(SYNTHETIC, strict)
    rows = []
    for number, line in enumerate(sentences.lines()[1:], start=2):
        role, label, text, mask = line.split("\t")
        words = text.split()
        rationale = None if mask == "-" else [int(m) for m in mask.split()]
        reason = check_rationale_length(words, rationale) or (
            f"fewer than {min_words} words" if len(words) < min_words else None)
        if reason:
            bad.report(role.split("_")[-1], sentences.path, f"line {number}", reason, role)
            continue
        rows.append({"example_id": f"{SYNTHETIC}-{number}", "task": SYNTHETIC, "split": role.split("_")[-1],
                     "role": role, "text": text, "words": words, "word_rationale": rationale, "label": int(label)})
    return make_examples_frame(rows), bad.frame()


SYNTHETIC_TASK = Task(SYNTHETIC, read_synthetic, ("raw_synthetic_sentences",), {2: ("negative", "positive")})


def synthetic_rows(seed: int) -> list[dict]:
    """Examples of every role: filler words around one or two cue words of the label's polarity (the rationale)."""
    rng = np.random.default_rng(seed)
    rows = []
    for role, size in ROLE_SIZES.items():
        for i in range(size):
            label = i % 2
            words = [str(w) for w in rng.choice(FILLER, size=rng.integers(4, 8))]
            for cue in rng.choice(CUES[label], size=rng.integers(1, 3), replace=False):
                words.insert(int(rng.integers(0, len(words) + 1)), str(cue))
            rationale = [int(w in CUES[label]) for w in words] if role.startswith("rationale") else None
            rows.append({"role": role, "label": label, "words": words, "word_rationale": rationale})
    return rows


def examples_frame(task: str, rows: list[dict]) -> pd.DataFrame:
    """`rows` in the examples schema, as a registered task's reader writes them."""
    return make_examples_frame([{"example_id": f"{task}-{i}", "task": task, "split": row["role"].split("_")[-1],
                                 "text": " ".join(row["words"]), **row} for i, row in enumerate(rows)])


def raw_tsv(rows: list[dict], invert_rationales: bool = False) -> RawText:
    """The synthetic task's raw file; `invert_rationales` flips every rationale mark (a poisoned rationale file)."""
    def mask(rationale):
        if rationale is None:
            return "-"
        return " ".join(str(1 - m if invert_rationales else m) for m in rationale)

    lines = ["role\tlabel\twords\trationale"] + [f"{r['role']}\t{r['label']}\t{' '.join(r['words'])}\t"
                                                  f"{mask(r['word_rationale'])}" for r in rows]
    return RawText(path="memory://synthetic/sentences.tsv", text="\n".join(lines) + "\n")


class KeptInMemory(MemoryDataset):
    """A MemoryDataset the runner does not empty after its last reader, so that a test reads every output."""

    def _release(self) -> None:
        pass


class PartitionsInMemory(AbstractDataset):
    """A partitioned dataset held in memory: saving calls every part's loader once (as PartitionedDataset does
    when it writes the parts), loading hands the node fresh loaders, as PartitionedDataset does."""

    def __init__(self):
        self._parts: dict[str, pd.DataFrame] | None = None

    def load(self) -> dict[str, Callable[[], pd.DataFrame]]:
        return {key: (lambda frame=frame: frame.copy()) for key, frame in self._parts.items()}

    def save(self, data: dict[str, Callable[[], pd.DataFrame]]) -> None:
        self._parts = {key: load() for key, load in sorted(data.items())}

    def _describe(self) -> dict[str, Any]:
        return {"parts": None if self._parts is None else sorted(self._parts)}


def _soft_merge(base: dict, override: dict) -> dict:
    merged = dict(base)
    for key, value in override.items():
        merged[key] = _soft_merge(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) \
            else value
    return merged


def _parameter_entries(parameters: dict, prefix: str = "params:") -> dict[str, Any]:
    """`params:a`, `params:a.b`, ... for every key path, as a Kedro session feeds them to the runner."""
    entries = {}
    for key, value in parameters.items():
        entries[f"{prefix}{key}"] = value
        if isinstance(value, dict):
            entries.update(_parameter_entries(value, f"{prefix}{key}."))
    return entries


def _fold_slice(tasks: Sequence[Task], held_out: Sequence[str] | None = None) -> Pipeline:
    names = [task.name for task in tasks]
    everything = (data_processing.create_pipeline(tasks) + classifiers.create_pipeline(names)
                  + crosstask.create_folds(names) + ablation.create_pipeline(names))
    if held_out is not None:
        namespaces = [f"{prefix}{task}" for task in held_out for prefix in ("heldout_", "ablation_")]
        targets = everything.only_nodes_with_namespaces(namespaces).nodes
        everything = everything.to_nodes(*[n.name for n in targets])
    skipped = {f"read_{name}" for name in names if name != SYNTHETIC} | {f"{name}.train_classifier" for name in names}
    return Pipeline([n for n in everything.nodes if n.name not in skipped])


@pytest.fixture(scope="session")
def synthetic_task() -> Task:
    """The synthetic task's registry entry (its reader reads `raw_synthetic_sentences`)."""
    return SYNTHETIC_TASK


@pytest.fixture(scope="session")
def synthetic_raw_file():
    """`synthetic_raw_file(invert_rationales=False) -> RawText`: the synthetic task's raw file (seeded), with
    every rationale mark flipped when asked."""
    return lambda invert_rationales=False: raw_tsv(synthetic_rows(seed=7), invert_rationales)


@pytest.fixture(scope="session")
def fold_slice():
    """`fold_slice(tasks, held_out=None) -> Pipeline`: the project's pipelines over `tasks` (registry entries) up to
    the folds of `held_out` and their ablations (default: every fold, every ablation and the cross-fold reports), less what a slice starts from: the
    registered tasks' readers and every task's fine-tuning."""
    return _fold_slice


@pytest.fixture(scope="session")
def slice_parameters(project_root) -> dict:
    """The smoke environment's parameters (conf/base soft-merged with conf/smoke, as settings.py merges them),
    shrunk by FAST, plus the synthetic task's configuration."""
    from kedro.config import OmegaConfigLoader

    loader = OmegaConfigLoader(conf_source=str(project_root / "conf"), base_env="base", default_run_env="smoke",
                               merge_strategy={"parameters": "soft"})
    parameters = _soft_merge(_soft_merge(loader["parameters"], FAST), SYNTHETIC_PARAMETERS)
    # Four baselines instead of thirteen (one of them on the expensive sample): they are tested in tests/explainers.
    parameters["crosstask"] |= {"baselines": {"raw_attention": {}, "saliency": {}, "attention_x_gradient": {},
                                              "occlusion": {"batch_size": 16}}, "expensive": ["occlusion"]}
    return parameters


@pytest.fixture(scope="session")
def tiny_task_classifier(tiny_bert_classifier):
    """`tiny_task_classifier(seed) -> TrainedClassifier`: a tiny random BERT (2 layers, 2 heads) over the default
    encoder's tokenizer, standing in for a fine-tuned classifier (fine-tuning is tested in tests/models)."""
    from learned_attribution.core.models.loading import load_tokenizer

    tokenizer = load_tokenizer(ENCODER)

    def build(seed: int) -> TrainedClassifier:
        model = tiny_bert_classifier(seed=seed, vocab_size=len(tokenizer), max_position_embeddings=64,
                                     pad_token_id=tokenizer.pad_token_id)
        return TrainedClassifier(model, tokenizer)

    return build


@pytest.fixture(scope="session")
def run_slice(slice_parameters, tiny_task_classifier):
    """`run_slice(pipeline, tasks, raw_synthetic) -> DataCatalog`: run `pipeline` (a slice of the project's
    pipelines over `tasks`) with the registered tasks' examples and every classifier in memory and the synthetic
    task read from `raw_synthetic`; every dataset the slice writes stays in the returned catalog."""

    def run(pipeline: Pipeline, tasks: Sequence[str], raw_synthetic: RawText) -> DataCatalog:
        datasets: dict[str, AbstractDataset] = {
            name: PartitionsInMemory() if name.endswith((".explainer_signals", ".attention_features"))
            else KeptInMemory()  # copies a table on every load, as reading its file would
            for name in pipeline.datasets() if not name.startswith("params:")}
        inputs = {f"{task}.classifier": tiny_task_classifier(seed) for seed, task in enumerate(tasks)}
        inputs |= {f"examples_{task}": examples_frame(task, synthetic_rows(100 + seed))
                   for seed, task in enumerate(tasks) if task != SYNTHETIC}
        inputs |= {f"skipped_{task}": BadRecords(task).frame() for task in tasks if task != SYNTHETIC}
        inputs |= {"raw_synthetic_sentences": raw_synthetic, **_parameter_entries(slice_parameters)}
        free = pipeline.inputs()
        missing = free - set(inputs)
        assert not missing, f"the slice reads {sorted(missing)}, which nothing provides"
        catalog = DataCatalog(datasets | {name: KeptInMemory(inputs[name]) for name in free})
        SequentialRunner().run(pipeline, catalog)
        return catalog

    return run
