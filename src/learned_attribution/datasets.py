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
