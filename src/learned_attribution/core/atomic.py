"""Complete or absent: outputs are written under a temporary name and renamed into place (one rename is
atomic on one filesystem), so a crash leaves the previous output or none, never half of one, and
`kedro run --only-missing-outputs` can trust what it finds. Used by the catalog datasets, the explainer
artifacts and the CLI."""
from __future__ import annotations

import errno
import hashlib
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def file_sha256(path: str | Path) -> str:
    """SHA-256 (hex) of a file's bytes, read in blocks: what a record, a run's data inputs and a packaged encoder's
    parts are checked by."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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


@contextmanager
def atomic_file(path: str | Path) -> Iterator[Path]:
    """Yield `partial_name(path)` to write one file into; on success it replaces `path` (one rename), on any
    failure (a full disk, a failed rename, an interrupt) it is removed and `path` is left as it was."""
    path = Path(path)
    partial = partial_name(path)
    try:
        yield partial
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def write_text_atomically(path: str | Path, text: str) -> None:
    """Write `text` (UTF-8) to `path`, complete or not at all (`atomic_file`)."""
    with atomic_file(path) as partial:
        partial.write_text(text, encoding="utf-8")


def probe_writable(folder: str | Path) -> None:
    """Raise `OSError` unless a file can be written in the existing `folder`: a small file is created, written,
    flushed to disk and removed, so a read-only or full filesystem (which permission bits do not reveal, and
    which root ignores) fails here rather than at the end of a long run."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(errno.ENOENT, "no such folder", str(folder))
    descriptor, name = tempfile.mkstemp(dir=folder, prefix=".write-probe-")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(b"\0" * 4096)
            handle.flush()
            os.fsync(handle.fileno())
    finally:
        os.unlink(name)
