"""The project's Kedro datasets: read-only raw and user files (each names the file and line at fault), saved
classifiers, learned explainers and bundles, a parts cache, and the kedro-datasets types written atomically (complete
or absent, so `--only-missing-outputs` can trust what it finds). Every format is read and written by the library
(`core`, `services`); these classes only connect it to the catalog."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from kedro.io import AbstractDataset, DatasetError
from kedro_datasets.json import JSONDataset
from kedro_datasets.matplotlib import MatplotlibDataset
from kedro_datasets.pandas import CSVDataset, ParquetDataset
from kedro_datasets.partitions import PartitionedDataset
from kedro_datasets.text import TextDataset

from learned_attribution.core.atomic import atomic_file, atomic_folder
from learned_attribution.core.data.rationales import RationaleFileError, read_rationale_file
from learned_attribution.core.data.schema import RawText
from learned_attribution.core.data.texts import read_inputs
from learned_attribution.core.models import artifacts
from learned_attribution.core.models.loading import TrainedClassifier, load_classifier, load_tokenizer
from learned_attribution.core.tasks import class_names as task_class_names
from learned_attribution.services import bundle as bundles


class InputFileDataset(AbstractDataset):
    """A file the project only reads (raw data, a user's file): saving raises, and `is_raw_input` makes the MLflow
    hook hash it into the runs that read it (adapters/hooks). A configured file that does not exist stops the run
    naming `parameter`, the run-time parameter that sets it, when there is one. Subclasses `read` the file."""

    is_raw_input = True
    kind = "an input file"

    def __init__(self, filepath: str, parameter: str | None = None, metadata: dict[str, Any] | None = None):
        self._filepath = Path(filepath)
        self._parameter = parameter
        self.metadata = metadata

    def load(self):
        if not self._filepath.exists():
            where = f"parameter {self._parameter}={str(self._filepath)!r}: no such file" if self._parameter else \
                f"no such file {self._filepath}"
            raise self.missing(f"{where} (working directory {Path.cwd()})")
        return self.read()

    def read(self):
        raise NotImplementedError

    def missing(self, message: str) -> Exception:
        return DatasetError(message)

    def save(self, data: None) -> None:
        raise DatasetError(f"{self._filepath} is {self.kind} and read-only")

    @property
    def path(self) -> Path:
        return self._filepath

    def _exists(self) -> bool:
        return self._filepath.exists()

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath), "parameter": self._parameter}


def _raw_text(path: Path) -> RawText:
    return RawText(path=str(path), text=path.read_text(encoding="utf-8"))


class RawTextDataset(InputFileDataset):
    """A raw file loaded with its path, so parsers can name the file and line at fault. Raw data is never written."""

    kind = "raw data"

    def missing(self, message: str) -> Exception:
        return DatasetError(f"Raw file {self._filepath} is missing (see data/01_raw/README.md)")

    def read(self) -> RawText:
        return _raw_text(self._filepath)


class OptionalRawTextDataset(InputFileDataset):
    """A user's optional raw file (the AFN sentences and pairs): loaded with its path as `RawText`, so the parser
    names the file and line at fault, or None when no file is configured (`filepath: null`)."""

    def __init__(self, filepath: str | None = None, parameter: str | None = None,
                 metadata: dict[str, Any] | None = None):
        super().__init__(filepath or "", parameter, metadata)
        self._configured = bool(filepath)

    @property
    def is_raw_input(self) -> bool:
        """Hashed into the MLflow run that reads it when a file is configured."""
        return self._configured

    def load(self) -> RawText | None:
        return super().load() if self._configured else None

    def read(self) -> RawText:
        return _raw_text(self._filepath)

    @property
    def path(self) -> Path | None:
        return self._filepath if self._configured else None

    def _exists(self) -> bool:
        return not self._configured or self._filepath.is_file()


class UnlabeledTextsDataset(InputFileDataset):
    """A user's unlabeled texts (`core.data.texts.read_inputs`: .txt, .jsonl or .csv) as a frame of `example_id` and
    `text` (a string, or a list of words for a .jsonl `words` record); every fault names the file and line."""

    def __init__(self, filepath: str, text_column: str = "text", metadata: dict[str, Any] | None = None):
        super().__init__(filepath, None, metadata)
        self._text_column = text_column

    def load(self) -> pd.DataFrame:  # read_inputs names a missing file itself
        return self.read()

    def read(self) -> pd.DataFrame:
        texts, ids = read_inputs(self._filepath, self._text_column)
        return pd.DataFrame({"example_id": ids, "text": pd.Series(texts, dtype=object)})

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath), "text_column": self._text_column}


class RationaleFileDataset(InputFileDataset):
    """A user's rationale file (`core.data.rationales.read_rationale_file`: word-level .jsonl, a datasets folder or
    .csv / .parquet / .json file, or character spans: span JSONL, a doccano JSONL export, a Label Studio JSON export)
    as examples of the project's schema, each fault naming the file and line, task or row.

    A class is a name or an index of the explained classifier's classes: `class_names` (in index order), or the
    names of the task `classifier_task` (`core.tasks.class_names`, e.g.
    `${runtime_params:evaluate_external.classifier_task,sst2}`); with neither, an integer in 0..n_classes-1.

    For span files: `rationale_labels` (the doccano / Label Studio tags counted as rationale), `class_field` (the
    field holding the class) and `tokenizer` (a tokenizer or classifier folder, or an encoder name such as
    `packaged:all-MiniLM-L6-v2`, loaded offline: the text is split into its pre-tokenizer's words; without one, at
    whitespace). Word-level files ignore them."""

    def __init__(self, filepath: str, parameter: str | None = None, n_classes: int | None = None,
                 rationale_labels: list[str] | None = None, class_field: str | None = None,
                 tokenizer: str | None = None, class_names: list[str] | None = None,
                 classifier_task: str | None = None, metadata: dict[str, Any] | None = None):
        super().__init__(filepath, parameter, metadata)
        if class_names is None and classifier_task is not None:
            class_names = list(task_class_names(str(classifier_task), 2 if n_classes is None else int(n_classes)))
        self._n_classes = n_classes
        self._class_names = class_names
        self._classifier_task = classifier_task
        self._rationale_labels = [rationale_labels] if isinstance(rationale_labels, str) else rationale_labels
        self._class_field = class_field
        self._tokenizer = tokenizer

    def missing(self, message: str) -> Exception:
        return RationaleFileError(message)

    def read(self) -> pd.DataFrame:
        tokenizer = load_file_tokenizer(self._tokenizer) if self._tokenizer else None
        return read_rationale_file(self._filepath, self._n_classes, rationale_labels=self._rationale_labels,
                                   class_field=self._class_field, tokenizer=tokenizer, class_names=self._class_names)

    def _describe(self) -> dict[str, Any]:
        return {**super()._describe(), "n_classes": self._n_classes, "rationale_labels": self._rationale_labels,
                "class_field": self._class_field, "tokenizer": self._tokenizer, "class_names": self._class_names,
                "classifier_task": self._classifier_task}


def load_file_tokenizer(name_or_path: str):
    """A tokenizer named in the catalog: a folder holding one (a classifier's or a tokenizer's alone), read offline,
    or an encoder name (`core.models.loading.load_tokenizer`: packaged names, hub names where the hub is reachable)."""
    if Path(name_or_path).is_dir():
        from transformers import AutoTokenizer  # slow to import: only when a span file names a tokenizer

        try:
            return AutoTokenizer.from_pretrained(name_or_path, use_fast=True, local_files_only=True)
        except (OSError, ValueError) as error:
            raise RationaleFileError(f"tokenizer {name_or_path!r}: the folder holds no tokenizer that loads "
                                     f"({type(error).__name__}: {error})") from error
    return load_tokenizer(name_or_path)


class HFClassifierDataset(AbstractDataset[TrainedClassifier, TrainedClassifier]):
    """Saves/loads a `TrainedClassifier` with `save_pretrained` / `from_pretrained` (eager attention).

    Its existence check lets `kedro run --only-missing-outputs` skip tasks already trained.
    """

    def __init__(self, filepath: str, metadata: dict[str, Any] | None = None):
        self._filepath = Path(filepath)
        self.metadata = metadata

    def load(self) -> TrainedClassifier:
        if not self._exists():
            raise DatasetError(f"No trained classifier at {self._filepath}; run the classifier pipeline first")
        return load_classifier(self._filepath)

    def save(self, data: TrainedClassifier) -> None:
        # Written to a sibling folder, then swapped in: a crash never leaves a half-written model behind.
        with atomic_folder(self._filepath) as partial:
            data.model.save_pretrained(partial)
            data.tokenizer.save_pretrained(partial)

    @property
    def path(self) -> Path:
        return self._filepath

    def _exists(self) -> bool:
        return (self._filepath / "config.json").exists()

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath)}


class LearnedModelDataset(AbstractDataset):
    """A trained learned explainer (the paper's ExpNet, an ExpNet+ variant, a student) as a folder of safetensors
    weights and a JSON config (`core/models/artifacts.py`), or with `collection: true` a dict of them as subfolders.
    Written atomically, so a folder that exists is complete and `--only-missing-outputs` can trust it."""

    def __init__(self, path: str, collection: bool = False, metadata: dict[str, Any] | None = None):
        self._path = Path(path)
        self._collection = collection
        self.metadata = metadata

    def load(self):
        if not self._exists():
            raise DatasetError(f"No trained explainer at {self._path}; run `kedro run --pipeline folds`")
        return artifacts.load_learned_collection(self._path) if self._collection else artifacts.load_learned(self._path)

    def save(self, data) -> None:
        if self._collection:
            artifacts.save_learned_collection(data, self._path)
        else:
            artifacts.save_learned(data, self._path)

    @property
    def path(self) -> Path:
        return self._path

    def _exists(self) -> bool:
        if self._collection:
            return self._path.is_dir() and any(artifacts.is_complete(p) for p in self._path.iterdir())
        return artifacts.is_complete(self._path)

    def _describe(self) -> dict[str, Any]:
        return {"path": str(self._path), "collection": self._collection}


class BundleDataset(AbstractDataset[bundles.Bundle, bundles.Bundle]):
    """A trained fold's or student's folder (`services/bundle.py`: its card and learned explainers), written whole
    and atomically; loading validates it and names what an incomplete folder lacks."""

    def __init__(self, path: str, metadata: dict[str, Any] | None = None):
        self._path = Path(path)
        self.metadata = metadata

    def load(self) -> bundles.Bundle:
        return bundles.read_bundle(self._path)

    def save(self, data: bundles.Bundle) -> None:
        bundles.write_bundle(data, self._path)

    @property
    def path(self) -> Path:
        return self._path

    def _exists(self) -> bool:
        return bundles.is_complete(self._path)

    def _describe(self) -> dict[str, Any]:
        return {"path": str(self._path)}


class FewShotChoiceDataset(AbstractDataset):
    """A fold's few-shot choice (`heldout_<task>/fewshot/`: `services/bundle.py`, `FewShotChoice`): per k the prior
    and schedule the fewshot pipeline chose and measured, with the priors it names other than the fold's own, written
    whole and atomically; `fit_rationales` reads it from the fold's folder."""

    def __init__(self, path: str, metadata: dict[str, Any] | None = None):
        self._path = Path(path)
        self.metadata = metadata

    def load(self):
        choice = bundles.read_fewshot_choice(self._path)
        if choice is None:
            raise DatasetError(f"No few-shot choice at {self._path}; run `kedro run --pipeline fewshot`")
        return choice

    def save(self, data) -> None:
        bundles.write_fewshot_choice(data, self._path)

    @property
    def path(self) -> Path:
        return self._path

    def _exists(self) -> bool:
        return (self._path / bundles.FEWSHOT_CHOICE).is_file()

    def _describe(self) -> dict[str, Any]:
        return {"path": str(self._path)}


# ----------------------------------------------------------------------------------------------------
# Complete or absent: every output that `kedro run --only-missing-outputs` may skip is written under a
# temporary name and renamed into place, so a crash leaves the previous output or none, never half of one.
class PartsCacheDataset(AbstractDataset[None, Path]):
    """A folder of resumable work parts (the amortize pipeline's teacher parts, `amortize.teacher_attributions`):
    loading it gives the folder (created when missing), which the node fills part by part, each part written
    atomically. Declared in the catalog so the scratch folder is visible in kedro-viz; never saved by Kedro."""

    def __init__(self, path: str, metadata: dict[str, Any] | None = None):
        self._path = Path(path)
        self.metadata = metadata

    def load(self) -> Path:
        self._path.mkdir(parents=True, exist_ok=True)
        return self._path

    def save(self, data) -> None:
        raise DatasetError(f"{self._path} is a cache folder that its node fills itself; it is not saved")

    def _exists(self) -> bool:
        return True

    def _describe(self) -> dict[str, Any]:
        return {"path": str(self._path)}


# ----------------------------------------------------------------------------------------------------

class _FlatInitArgs:
    """Kedro records a dataset's constructor arguments for `catalog.to_config()`; on a subclass of a kedro-datasets
    class it wraps the parent's already wrapped `__init__` and records `{"args": (), "kwargs": {...}}`. Keep them
    flat, as for the parent, so `to_config()` (the notebook, kedro-viz) sees `filepath` and friends."""

    @property
    def _init_args(self) -> dict:
        return self.__dict__.get("_flat_init_args", {})

    @_init_args.setter
    def _init_args(self, value: dict) -> None:
        if set(value) - {"self"} == {"args", "kwargs"} and not value["args"]:
            value = dict(value["kwargs"])
        self.__dict__["_flat_init_args"] = value


class _AtomicFileMixin(_FlatInitArgs):
    """Saved through `atomic.atomic_file`: written to `partial_name(filepath)`, then renamed onto the file."""

    def save(self, data) -> None:
        final = self._filepath
        with atomic_file(Path(str(final))) as partial:
            self._filepath = type(final)(str(partial))
            try:
                super().save(data)
            finally:
                self._filepath = final
                self._invalidate_cache()


class AtomicCSVDataset(_AtomicFileMixin, CSVDataset):
    """`pandas.CSVDataset`, written atomically (complete or absent)."""


class AtomicParquetDataset(_AtomicFileMixin, ParquetDataset):
    """`pandas.ParquetDataset`, written atomically (complete or absent)."""


class AtomicJSONDataset(_AtomicFileMixin, JSONDataset):
    """`json.JSONDataset`, written atomically (complete or absent)."""


class AtomicTextDataset(_AtomicFileMixin, TextDataset):
    """`text.TextDataset`, written atomically (complete or absent)."""


class AtomicMatplotlibDataset(_AtomicFileMixin, MatplotlibDataset):
    """`matplotlib.MatplotlibDataset` (one figure), written atomically (complete or absent)."""


class AtomicPartitionedDataset(_FlatInitArgs, PartitionedDataset):
    """A PartitionedDataset whose parts are written into `<path>.partial/`, renamed to `<path>` only when every
    part is written: a crash mid-way (e.g. 1 of 4 feature parts) leaves no folder, so the node is rerun instead
    of being skipped with a quarter of its rows."""

    def save(self, data: dict[str, Any]) -> None:
        final = self._path
        with atomic_folder(final) as partial:
            self._path = str(partial)
            try:
                super().save(data)
            finally:
                self._path = final
                self._invalidate_caches()
        self._invalidate_caches()
