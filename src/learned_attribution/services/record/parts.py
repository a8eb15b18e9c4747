"""A record's parts: small CSV tables committed to git, each with a sidecar (`<part>.json`) that carries its
checksum and the fingerprint of what it was computed from (settings, classifier, examples, code, kernels).

- A part is complete or absent: the CSV and then its sidecar are renamed into place (`atomic_file`); a CSV without
  its sidecar, or whose checksum or fingerprint differs, is not a finished part of this run and is recomputed.
- Reading a record for a report is strict: a part whose columns, checksum or run differs fails in one line naming
  the file (`RecordError`), never a silent mix of runs.
- One run at a time: `record_lock` holds an exclusive lock on the record folder (released when the process ends,
  however it ends); a second run refuses to start, naming the first.
"""
from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import socket
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import pandas as pd

from learned_attribution.core.atomic import atomic_file, file_sha256

LOCK_NAME = ".record.lock"


class RecordError(ValueError):
    """A record table that cannot be read as part of one run: missing columns, edited by hand, or of another run."""


class RecordBusy(RuntimeError):
    """Another record run holds the record folder."""


@dataclass(frozen=True)
class PartMeta:
    """A part's sidecar: what its table was computed from and how long it took."""

    fingerprint: str  # digest of everything the rows depend on
    sha256: str  # of the CSV's bytes
    rows: int
    seconds: float
    explanations: int  # explanations computed (an example explained in two modes counts twice)
    kernels: str
    run: dict[str, Any]  # the run the part belongs to: its inputs' digests (one per fold), without code or timing

    def to_json(self) -> str:
        return json.dumps(self.__dict__, indent=1, sort_keys=True)


def digest(*values: Any) -> str:
    """SHA-256 (16 hex digits) of values written as sorted JSON."""
    return hashlib.sha256(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()[:16]


def source_digest(paths: Sequence[Path]) -> str:
    """SHA-256 (16 hex digits) of the named source files' bytes (the code a part's numbers come from)."""
    hasher = hashlib.sha256()
    for path in sorted(paths):
        hasher.update(path.name.encode())
        hasher.update(path.read_bytes())
    return hasher.hexdigest()[:16]


def csv_bytes(rows: pd.DataFrame) -> bytes:
    """A part's table as the bytes it is stored as (4 significant decimals: a record is small)."""
    buffer = io.StringIO()
    rows.to_csv(buffer, index=False, float_format="%.4f", lineterminator="\n")
    return buffer.getvalue().encode()


def sidecar(path: Path) -> Path:
    return path.with_suffix(".json")


def finished(path: Path, fingerprint: str) -> bool:
    """Whether `path` holds a finished part computed from `fingerprint` (its sidecar there, the fingerprint and the
    checksum its own)."""
    meta = read_meta(path)
    return meta is not None and meta.fingerprint == fingerprint and path.is_file() and \
        file_sha256(path) == meta.sha256


def read_meta(path: Path) -> PartMeta | None:
    """The sidecar of the part at `path`, or None when absent or unreadable."""
    try:
        return PartMeta(**json.loads(sidecar(path).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def write_part(path: Path, rows: pd.DataFrame, *, fingerprint: str, seconds: float, explanations: int,
               kernels: str, run: dict[str, Any]) -> PartMeta:
    """Write a part: the table, then its sidecar (each renamed into place: a part is finished only once both are)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = csv_bytes(rows)
    meta = PartMeta(fingerprint, hashlib.sha256(data).hexdigest(), len(rows), round(float(seconds), 3),
                    int(explanations), kernels, run)
    sidecar(path).unlink(missing_ok=True)  # a part being replaced is unfinished until its new sidecar lands
    with atomic_file(path) as partial:
        partial.write_bytes(data)
    with atomic_file(sidecar(path)) as partial:
        partial.write_text(meta.to_json())
    return meta


def read_part(path: Path, columns: Sequence[str]) -> tuple[pd.DataFrame, PartMeta]:
    """A committed part's table and sidecar; `RecordError` naming the file when its sidecar is missing, its bytes
    differ from the checksum (edited by hand) or a column is missing."""
    meta = read_meta(path)
    if meta is None:
        raise RecordError(f"{path}: no readable sidecar {sidecar(path).name}: not a finished record part")
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != meta.sha256:
        raise RecordError(f"{path}: its bytes differ from the checksum in {sidecar(path).name} (edited by hand?); "
                          "recompute the part or restore it from git")
    rows = pd.read_csv(io.BytesIO(data))
    missing = [c for c in columns if c not in rows.columns]
    if missing:
        raise RecordError(f"{path}: missing columns {missing}")
    return rows, meta


@contextmanager
def record_lock(folder: Path, what: str) -> Iterator[None]:
    """Hold the record folder's lock for the body (`RecordBusy` naming the holder when another run holds it)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_NAME
    handle = open(path, "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise RecordBusy(f"another record run holds {path} ({holder}); wait for it to end, or stop it") from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()} on {socket.gethostname()}, started {time.strftime('%Y-%m-%d %H:%M:%S')}: "
                 f"{what}")
    handle.flush()
    try:
        yield
    finally:
        handle.close()  # closing releases the lock (so does the process ending, however it ends)


_HELD: dict[Path, Any] = {}  # record folders this process holds the lock of, until it ends


def hold_record_lock(folder: Path, what: str) -> None:
    """Take the record folder's lock for the rest of this process (`RecordBusy` when another process holds it)."""
    folder = Path(folder).resolve()
    if folder in _HELD:
        return
    manager = record_lock(folder, what)
    manager.__enter__()
    _HELD[folder] = manager
