"""Fixtures for the data loaders: raw fixture files written by the tests themselves."""
from __future__ import annotations

from pathlib import Path

import pytest

from learned_attribution.core.data.schema import RawText


@pytest.fixture
def write_raw(tmp_path: Path):
    """Factory: `write_raw(name, text) -> RawText` writes `text` to tmp_path/name and loads it with its path."""

    def write(name: str, text: str) -> RawText:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return RawText(path=str(path), text=path.read_text(encoding="utf-8"))

    return write


@pytest.fixture(scope="session")
def packaged_tokenizer():
    """The default encoder's WordPiece tokenizer (packaged all-MiniLM-L6-v2), loaded once per session."""
    from learned_attribution.core.models.loading import PACKAGED_ENCODER, load_tokenizer

    return load_tokenizer(PACKAGED_ENCODER)
