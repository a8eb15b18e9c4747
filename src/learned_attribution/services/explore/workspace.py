"""The explorer's writable side, all under `<data>/09_explorer/<fold>/`: a user's texts (`texts/`), annotation
sessions (`sessions/<id>/`: the texts `suggest` picked, the annotations as span JSONL, the refits) and one refit at a
time per fold (`RefitJobs`).

Every path is built from checked names (a fold of the project, a session id this module made, a file name reduced
to its last part) and checked to lie under the data folder (`inside`). A refit writes its fold folder whole
(`services/bundle.write_bundle`: a temporary sibling renamed at the end), then points the session at it: a refit that
fails or is stopped leaves the session's explainer as it was."""
from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from learned_attribution.core.atomic import write_text_atomically
from learned_attribution.core.data.classes import resolve_class
from learned_attribution.core.data.rationales import Span, SpanRecord, build_format
from learned_attribution.core.data.texts import FORMATS as TEXT_FORMATS, read_inputs
from learned_attribution.core.data.words import tokenizer_words
from learned_attribution.core.errors import InputError

from .fold_view import check_fold

logger = logging.getLogger(__name__)

EXPLORER_FOLDER = "09_explorer"
SESSION_ID = re.compile(r"^[0-9a-f]{12}$")
SUGGESTED, ANNOTATIONS, CURRENT = "suggested.json", "annotations.jsonl", "current.json"
MAX_UPLOAD_BYTES = 20 * 1024 * 1024


def inside(root: Path, *parts: str) -> Path:
    """`root` joined with `parts`, refused (`InputError`) unless it lies under `root`: no `..`, no absolute part."""
    root = root.resolve()
    path = root.joinpath(*parts).resolve()
    if path != root and root not in path.parents:
        raise InputError(f"{'/'.join(parts)}: outside the data folder {root}")
    return path


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass
class Workspace:
    """The explorer's folder of a data folder."""

    data_root: Path

    def fold_folder(self, fold: str) -> Path:
        return inside(self.data_root, EXPLORER_FOLDER, check_fold(fold))

    def session_folder(self, fold: str, session: str) -> Path:
        if not SESSION_ID.match(str(session)):
            raise InputError(f"session {session!r}: not a session id of the explorer")
        folder = inside(self.fold_folder(fold), "sessions", session)
        if not (folder / SUGGESTED).is_file():  # a session is its suggested texts, written last
            raise InputError(f"session {session} of {fold} does not exist")
        return folder

    def save_texts(self, fold: str, filename: str, content: str) -> Path:
        """A user's text file saved under `texts/` by its last name part (a path in `filename` is refused)."""
        name = str(filename)
        if not name or name in (".", "..") or "/" in name or "\\" in name or name.startswith("."):
            raise InputError(f"file name {filename!r}: give a plain file name (no folders, no '..')")
        if Path(name).suffix not in TEXT_FORMATS:
            raise InputError(f"{name}: unknown input format {Path(name).suffix!r}; expected one of "
                             f"{list(TEXT_FORMATS)} (as `learned-attribution suggest --input` reads)")
        if len(content.encode("utf-8")) > MAX_UPLOAD_BYTES:
            raise InputError(f"{name}: larger than {MAX_UPLOAD_BYTES // 2**20} MiB")
        path = inside(self.fold_folder(fold), "texts", name)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomically(path, content)
        return path

    def new_session(self, fold: str, texts_file: Path, explainer, k: int, seed: int = 0) -> str:
        """A session of the `k` texts of `texts_file` that `suggest` picks for `explainer`'s classifier, each with
        its words, their offsets and the text's digest (what an annotation is checked against)."""
        from learned_attribution.services.fewshot.suggest import suggest

        texts, ids = read_inputs(texts_file)
        texts = [t if isinstance(t, str) else " ".join(t) for t in texts]
        picked = suggest(explainer.classifier, texts, ids, k, max_length=explainer.max_length, seed=seed,
                         source=texts_file.name)
        items = []
        for row in picked.itertuples():
            words, offsets = tokenizer_words(explainer.classifier.tokenizer, row.text)
            items.append({"id": str(row.id), "text": row.text, "digest": text_digest(row.text), "words": words,
                          "offsets": [list(o) for o in offsets], "predicted": int(row.predicted),
                          "label": row.label, "probability": float(row.probability)})
        session = uuid.uuid4().hex[:12]
        folder = inside(self.fold_folder(fold), "sessions", session)
        folder.mkdir(parents=True)
        write_text_atomically(folder / SUGGESTED, json.dumps({"fold": fold, "source": texts_file.name, "k": k,
                                                               "classes": picked.attrs.get("class_names", []),
                                                               "items": items}, ensure_ascii=False, indent=1))
        return session

    def suggested(self, fold: str, session: str) -> dict:
        return json.loads((self.session_folder(fold, session) / SUGGESTED).read_text(encoding="utf-8"))

    def save_annotations(self, fold: str, session: str, annotations: Sequence[dict]) -> Path:
        """The session's annotations written as span JSONL (`fit --rationales` reads it): each one an object with
        the text's `id`, the `text` as the page showed it, the marked word indices `words` and the `label` (a class
        name or index) the rationale supports. Refused whole, naming the id, for a text that is not the one
        suggested (changed since), a text with no marked word, or a class the classifier lacks."""
        suggested = self.suggested(fold, session)
        by_id = {item["id"]: item for item in suggested["items"]}
        classes = list(suggested["classes"])
        records = []
        if not annotations:
            raise InputError("no annotation given: mark at least one word of a text")
        for annotation in annotations:
            text_id = str(annotation.get("id"))
            item = by_id.get(text_id)
            if item is None:
                raise InputError(f"text {text_id}: not one of the texts suggested in this session")
            if annotation.get("text") != item["text"]:
                raise InputError(f"text {text_id}: its text has changed since it was suggested; annotate the text "
                                 "as suggested (start a new session to annotate the new text)")
            marked = sorted({int(w) for w in annotation.get("words") or []})
            if not marked:
                raise InputError(f"text {text_id}: no word marked; mark the words that support the class")
            if marked[0] < 0 or marked[-1] >= len(item["words"]):
                raise InputError(f"text {text_id}: word {marked[-1]} out of range (it has {len(item['words'])} words)")
            index = resolve_class(annotation.get("label", item["label"]), classes, f"text {text_id}: class")
            spans = tuple(Span(*item["offsets"][w]) for w in marked)
            records.append(SpanRecord(text_id, item["text"], index, spans))
        path = self.session_folder(fold, session) / ANNOTATIONS
        write_text_atomically(path, build_format("spans").write(records, classes))
        return path

    def annotations(self, fold: str, session: str) -> list[dict]:
        """The session's saved annotations as the page sends them (id, text, words, label)."""
        path = self.session_folder(fold, session) / ANNOTATIONS
        if not path.is_file():
            return []
        items = {item["id"]: item for item in self.suggested(fold, session)["items"]}
        saved = []
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            offsets = [tuple(o) for o in items[str(record["id"])]["offsets"]]
            spans = {tuple(s) for s in record["spans"]}
            saved.append({"id": str(record["id"]), "text": record["text"], "label": record["label"],
                          "words": [i for i, o in enumerate(offsets) if o in spans]})
        return saved

    def current_refit(self, fold: str, session: str) -> tuple[Path | None, Path | None]:
        """The session's explainer in use (its latest refit's fold folder; None: the fold's own) and the one
        before it."""
        path = self.session_folder(fold, session) / CURRENT
        if not path.is_file():
            return None, None
        record = json.loads(path.read_text())
        folder = self.session_folder(fold, session)
        return (inside(folder, record["current"]) if record.get("current") else None,
                inside(folder, record["previous"]) if record.get("previous") else None)

    def next_refit_folder(self, fold: str, session: str) -> Path:
        folder = self.session_folder(fold, session)
        taken = [int(p.name.split("_")[1]) for p in folder.glob("refit_*") if p.name.split("_")[1].isdigit()]
        return folder / f"refit_{max(taken, default=0) + 1}"

    def point_to(self, fold: str, session: str, refit: Path) -> None:
        """Make `refit` (a complete fold folder in the session) the session's explainer, the one before it its
        previous."""
        current, _ = self.current_refit(fold, session)
        folder = self.session_folder(fold, session)
        write_text_atomically(folder / CURRENT, json.dumps({"current": refit.name,
                                                             "previous": current.name if current else None}))


class RefitRunning(InputError):
    """A refit of the fold is running: one per fold at a time."""


@dataclass
class RefitJob:
    """A refit's state as the page polls it."""

    fold: str
    session: str
    state: str = "running"  # running, done, failed
    stage: str = "starting"
    fraction: float = 0.0
    error: str | None = None
    started: float = field(default_factory=time.time)
    finished: float | None = None
    result: dict[str, Any] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        return {"fold": self.fold, "session": self.session, "state": self.state, "stage": self.stage,
                "fraction": round(self.fraction, 3), "error": self.error,
                "seconds": round((self.finished or time.time()) - self.started, 1), **self.result}


class RefitJobs:
    """At most one refit per fold at a time, each on a thread of its own; a second one asked for while one runs is
    refused with a message (`RefitRunning`). `run(job, progress)` does the work; what it returns lands in the job's
    record."""

    def __init__(self):
        self._lock = threading.Lock()
        self._jobs: dict[str, RefitJob] = {}  # fold -> its latest job
        self._by_session: dict[tuple[str, str], RefitJob] = {}

    def start(self, fold: str, session: str, run: Callable[[RefitJob, Callable[[str, float], None]], dict]
              ) -> RefitJob:
        with self._lock:
            running = self._jobs.get(fold)
            if running is not None and running.state == "running":
                raise RefitRunning(f"a refit of {fold} is running (session {running.session}, started "
                                 f"{time.time() - running.started:.0f} s ago): one refit per fold at a time; "
                                 "wait for it to finish, then refit again")
            job = self._jobs[fold] = self._by_session[(fold, session)] = RefitJob(fold, session)

        def progress(stage: str, fraction: float) -> None:
            job.stage, job.fraction = stage, fraction

        def work() -> None:
            try:
                job.result = run(job, progress) or {}
                job.stage, job.fraction, job.state = "done", 1.0, "done"
            except Exception as error:  # the page shows one line; the trace goes to the server's log
                logger.exception("refit of %s (session %s) failed", fold, session)
                job.error = " ".join(f"{type(error).__name__}: {error}".split()) \
                    if not isinstance(error, InputError) else " ".join(str(error).split())
                job.state = "failed"
            finally:
                job.finished = time.time()

        threading.Thread(target=work, name=f"refit-{fold}-{session}", daemon=False).start()
        return job

    def job(self, fold: str, session: str) -> RefitJob | None:
        return self._by_session.get((fold, session))

    def wait(self, timeout: float | None = None) -> None:
        """Wait for every running refit (the server's shutdown: a refit finishes whole)."""
        deadline = None if timeout is None else time.time() + timeout
        for thread in [t for t in threading.enumerate() if t.name.startswith("refit-")]:
            thread.join(None if deadline is None else max(0.0, deadline - time.time()))
