"""Complete or absent: outputs are written under a temporary name and renamed into place (one rename is
atomic on one filesystem), so a crash leaves the previous output or none, never half of one, and
`kedro run --only-missing-outputs` can trust what it finds. Used by the catalog datasets, the explainer
artifacts and the CLI."""
from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def partial_name(path: Path) -> Path:
    """`x.parquet` -> `x.partial.parquet` (the suffix stays last: matplotlib and pandas read the format from it)."""
    return path.with_name(f"{path.stem}.partial{path.suffix}")


@contextmanager
def atomic_folder(folder: str | Path) -> Iterator[Path]:
    """Yield a fresh temporary sibling folder to write into; on success it replaces `folder` in one rename, on
    failure it is removed, so `folder` is either the complete new output or what was there before."""
    folder = Path(folder)
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        yield partial
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    if folder.exists():
        shutil.rmtree(folder)
    partial.rename(folder)


def write_text_atomically(path: str | Path, text: str) -> None:
    """Write `text` (UTF-8) to `partial_name(path)`, then replace `path` with it."""
    path = Path(path)
    partial = partial_name(path)
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)
