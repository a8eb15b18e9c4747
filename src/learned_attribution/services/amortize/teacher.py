"""The teacher: an expensive method on many texts, in resumable parts, in process or on Dask."""
from __future__ import annotations

import hashlib
import logging
import math
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from learned_attribution.core.atomic import atomic_file
from learned_attribution.core.explainers.teacher import Teacher
from learned_attribution.core.explainers.apply import explain_examples
from learned_attribution.core.models.artifacts import classifier_fingerprint

from ..deadline import starts_part
from ..distributed import dask_client, explain_on_dask

logger = logging.getLogger(__name__)


PART_COLUMNS = ["example_id", "scores", "error"]


class TeacherUnfinished(RuntimeError):
    """The teacher's time in this invocation (`teacher_minutes`) ran out before every part was computed. Not a
    failure of the work: every part computed is kept, complete, and the same command run again continues from them."""


@dataclass
class TeacherRun:
    scores: pd.DataFrame  # example_id, scores (one per non-special token), in the order of the examples
    failures: pd.DataFrame  # example_id, error
    seconds: float  # wall time of the parts computed in this call
    n_computed: int  # examples in the parts computed in this call (the others were read back from the cache)
    reused_parts: int


def _part_name(index: int, identity: str, fingerprint: str, rows: pd.DataFrame) -> str:
    digest = hashlib.sha256(f"{identity}|{fingerprint}".encode())
    for example_id, ids, target in zip(rows["example_id"], rows["input_ids"], rows["predicted"]):
        digest.update(f"{example_id}:{list(map(int, ids))}:{int(target)};".encode())
    return f"part-{index:05d}-{digest.hexdigest()[:12]}.parquet"


def teacher_attributions(classifier, examples: pd.DataFrame, teacher: Teacher, cache: str | Path, *,
                         part_size: int = 64, batch_size: int = 16, dask=None, progress: bool = True,
                         deadline: float = math.inf) -> TeacherRun:
    """`teacher` on every example (`example_id`, `input_ids`, `predicted`) for its predicted class, `part_size`
    examples a part, each part written atomically into `cache` under a name keyed by the teacher's settings, the
    classifier's weights and the part's texts, and reused by a later call with the same inputs (a killed run
    resumes; a part of other settings has another name and is never read). A file under a part's name that does
    not read back as that part (cut short, or of other texts) is recomputed. With `dask`
    (`distributed.DaskSettings`), each part's batches run as Dask tasks. With a `deadline` (`invocation_deadline`), no
    part is started that would end after it: the parts computed are kept and `TeacherUnfinished` says how many are
    left."""
    if isinstance(part_size, bool) or not isinstance(part_size, int) or part_size < 1:
        raise ValueError(f"parameter part_size={part_size!r}: must be a positive integer")
    cache = Path(cache)
    cache.mkdir(parents=True, exist_ok=True)
    examples = examples.reset_index(drop=True)
    fingerprint = classifier_fingerprint(classifier.model)
    chunks = [examples.iloc[start:start + part_size] for start in range(0, len(examples), part_size)]
    names = [_part_name(i, teacher.identity(), fingerprint, chunk) for i, chunk in enumerate(chunks)]
    parts = {name: _read_part(cache / name, chunk) for name, chunk in zip(names, chunks)}
    todo = [(name, chunk) for name, chunk in zip(names, chunks) if parts[name] is None]
    if len(todo) < len(chunks):
        logger.info("teacher %s: %d of %d parts already in %s (resumed)", teacher.describe(),
                    len(chunks) - len(todo), len(chunks), cache)
    started, n_done, n_computed = time.perf_counter(), 0, 0
    with (dask_client(dask) if dask is not None and todo else nullcontext()) as client:
        for name, chunk in tqdm(todo, desc=f"teacher {teacher.method}", unit="part", disable=not progress):
            if not starts_part(deadline, time.time(), (time.perf_counter() - started) / n_done if n_done else None):
                break
            if client is None:
                run = explain_examples(classifier.model, classifier.tokenizer, chunk,
                                       {teacher.method: teacher.build()}, batch_size)
            else:
                run = explain_on_dask(client, classifier, chunk, {teacher.method: teacher.settings}, batch_size, dask)
            _write_part(cache / name, chunk, run)
            parts[name] = pd.read_parquet(cache / name)
            n_done, n_computed = n_done + 1, n_computed + len(chunk)
    seconds = time.perf_counter() - started
    if n_done < len(todo):
        raise TeacherUnfinished(
            f"teacher {teacher.describe()}: {len(chunks) - len(todo) + n_done} of {len(chunks)} parts in {cache} "
            f"when this invocation's time for the teacher ran out ({n_done} computed in {seconds / 60:.1f} min); "
            "the parts are kept: run the same command again to continue")
    table = pd.concat([parts[name] for name in names], ignore_index=True) if names else \
        pd.DataFrame(columns=PART_COLUMNS)
    failed = table["error"].notna()
    failures = table.loc[failed, ["example_id", "error"]].reset_index(drop=True)
    if len(failures):
        logger.warning("teacher %s failed on %d of %d texts (left out of the student's training):\n%s",
                       teacher.describe(), len(failures), len(table), failures.head(20).to_string(index=False))
    scores = table.loc[~failed, ["example_id", "scores"]].reset_index(drop=True)
    scores["scores"] = scores["scores"].map(lambda s: np.asarray(s, dtype=np.float32))
    return TeacherRun(scores, failures, seconds, n_computed, len(chunks) - len(todo))


def _read_part(path: Path, chunk: pd.DataFrame) -> pd.DataFrame | None:
    """The part at `path` when it is there and reads back whole as `chunk`'s part (its columns, its examples in
    order); None otherwise. Parts are renamed into place complete (`atomic_file`), but a file cut short by a copy,
    a full disk or a filesystem without atomic renames is never read: it is recomputed, with a warning."""
    if not path.is_file():
        return None
    try:
        part = pd.read_parquet(path)
    except (OSError, ValueError) as error:  # pyarrow's ArrowInvalid is a ValueError, its IO errors OSErrors
        logger.warning("teacher part %s does not read as a Parquet file (%s): recomputed", path,
                       " ".join(str(error).split()))
        return None
    if list(part.columns) != PART_COLUMNS or part["example_id"].tolist() != chunk["example_id"].tolist():
        logger.warning("teacher part %s does not hold this part's %d texts: recomputed", path, len(chunk))
        return None
    return part


def _write_part(path: Path, chunk: pd.DataFrame, run) -> None:
    """One part: every example of `chunk`, with its scores or the error it failed with (complete or absent)."""
    scores = dict(zip(run.scores.get("example_id", []), run.scores.get("scores", [])))
    errors = dict(zip(run.failures["example_id"], run.failures["error"]))
    frame = pd.DataFrame({"example_id": chunk["example_id"].to_numpy(),
                          "scores": [scores.get(i) for i in chunk["example_id"]],
                          "error": [None if i in scores else errors.get(i, "no scores returned")
                                    for i in chunk["example_id"]]})
    with atomic_file(path) as partial:
        frame.to_parquet(partial, index=False)
