"""Small custom Kedro datasets: read-only raw text, and saved Hugging Face models."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from kedro.io import AbstractDataset, DatasetError

from learned_attribution.data.schema import RawText


class RawTextDataset(AbstractDataset[None, RawText]):
    """A raw file loaded with its path, so parsers can name the file and line at fault.

    Raw data is never written: saving raises.
    """

    def __init__(self, filepath: str, metadata: dict[str, Any] | None = None):
        self._filepath = Path(filepath)
        self.metadata = metadata

    def load(self) -> RawText:
        if not self._filepath.exists():
            raise DatasetError(f"Raw file {self._filepath} is missing (see data/01_raw/README.md)")
        return RawText(path=str(self._filepath), text=self._filepath.read_text(encoding="utf-8"))

    def save(self, data: None) -> None:
        raise DatasetError(f"{self._filepath} is raw data and read-only")

    def _exists(self) -> bool:
        return self._filepath.exists()

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath)}


class TrainedClassifier:
    """A fine-tuned sequence classifier and its tokenizer, saved together as a Hugging Face folder."""

    def __init__(self, model, tokenizer):
        self.model = model
        self.tokenizer = tokenizer


class HFClassifierDataset(AbstractDataset[TrainedClassifier, TrainedClassifier]):
    """Saves/loads a `TrainedClassifier` with `save_pretrained` / `from_pretrained` (eager attention).

    Its existence check lets `kedro run --only-missing-outputs` skip tasks already trained.
    """

    def __init__(self, filepath: str, metadata: dict[str, Any] | None = None):
        self._filepath = Path(filepath)
        self.metadata = metadata

    def load(self) -> TrainedClassifier:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        if not self._exists():
            raise DatasetError(f"No trained classifier at {self._filepath}; run the classifier pipeline first")
        model = AutoModelForSequenceClassification.from_pretrained(self._filepath, attn_implementation="eager")
        model.eval()
        return TrainedClassifier(model, AutoTokenizer.from_pretrained(self._filepath))

    def save(self, data: TrainedClassifier) -> None:
        # Write to a sibling folder, then swap, so a crash never leaves a half-written model behind.
        partial = self._filepath.with_name(self._filepath.name + ".partial")
        data.model.save_pretrained(partial)
        data.tokenizer.save_pretrained(partial)
        if self._filepath.exists():
            import shutil

            shutil.rmtree(self._filepath)
        partial.rename(self._filepath)

    def _exists(self) -> bool:
        return (self._filepath / "config.json").exists()

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath)}
