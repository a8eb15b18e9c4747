"""A pipeline run's reports in the record: the small tables a run wrote under its reports folder (data/08_reporting),
copied into the record's reports folder (docs/record/reports, the same layout) with the run's identity.

    learned-attribution record add --pipeline crosstask     # data/08_reporting -> docs/record/reports

- A run is known by the identity its pipeline wrote when it finished (`runs/<pipeline>.json`: adapters/hooks/timing.py):
  commit, kernels, start and end. The record keeps it, with the SHA-256 of every file it copied, in the same place;
  `results` names every table by it (`RecordedRun.label`).
- Adding a run replaces every file of that pipeline's previous run in the record: one run per pipeline, never a mix.
- Reading is strict (`recorded_runs`): a listed file that is missing or whose bytes changed fails in one line naming
  it (`RecordError`).
"""
from __future__ import annotations

import fnmatch
import json
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, Sequence

from learned_attribution.core.atomic import file_sha256, write_text_atomically

from ..checkout import git_commit, tracked_files_changed
from .parts import RecordError

# Per pipeline, the report files (paths under the reports folder, glob patterns) the record keeps: tables, the
# pages made of them and the run's own charts; never outputs, weights or stores.
RECORDED_REPORTS: dict[str, tuple[str, ...]] = {
    "crosstask": ("crosstask_metrics.csv", "classifier_metrics.csv", "crosstask_summary.md", "data_report.csv",
                  "training_history_*.csv", "crosstask/explain_cost_*.csv", "crosstask/baseline_cost_*.csv",
                  "crosstask/cost_*.png", "node_timings/crosstask.csv"),
    "ablation": ("expnet_plus_ablation.csv", "expnet_plus_ablation.md", "ablation/*.csv",
                 "expnet_plus_training_grid.csv", "expnet_plus_training_grid.md", "node_timings/ablation.csv"),
    "fewshot": ("fewshot.md", "fewshot.png", "fewshot_summary.csv", "fewshot_priors.csv", "fewshot_curves.csv",
                "fewshot/*.csv", "node_timings/fewshot.csv"),
    "afn": ("afn_report.md", "afn/headline.json", "afn/skipped.csv", "afn/*.png", "node_timings/afn.csv"),
    "amortize": ("amortize.md", "amortize/*.csv", "amortize/*.md", "amortize/*.png", "node_timings/amortize.csv"),
    "transfer": ("transfer.md", "transfer_metrics.csv", "node_timings/transfer.csv"),
}
IDENTITY_FOLDER = "runs"  # runs/<pipeline>.json, in a reports folder and in the record alike
RUN_SOURCES = ("src", "conf", "pyproject.toml")  # what a run's numbers depend on in the checkout (docs do not count)


def run_identity(pipeline: str, started_at: datetime, kernels: str, project: Path, env: str = "local",
                 partial: Mapping[str, Any] | None = None, params: Mapping[str, Any] | None = None) -> dict:
    """Which run writes a set of reports, taken when it starts (the code it loads): its pipeline, Kedro env, git
    commit and whether the code or configuration (src/, conf/, pyproject.toml) differed from it, the parameters
    given on its command line (`--params`), start (UTC), kernels, and what makes it partial (`--nodes`,
    `--only-missing-outputs`, ...). `finished` is set when it ends."""
    return {"pipeline": pipeline, "env": env, "commit": git_commit(project),
            "tracked_files_changed": tracked_files_changed(project, RUN_SOURCES), "params": dict(params or {}),
            "started": _utc(started_at), "finished": None, "kernels": kernels,
            "partial": dict(partial or {})}


UTC_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def _utc(moment: datetime) -> str:
    return moment.strftime(UTC_FORMAT)


def finished_now() -> str:
    return _utc(datetime.now(timezone.utc))


def pipeline_of(path: str) -> str | None:
    """The pipeline whose run writes the report at `path` (relative to a reports folder), or None."""
    for pipeline, patterns in RECORDED_REPORTS.items():
        if any(fnmatch.fnmatchcase(path, pattern) for pattern in patterns):
            return pipeline
    return None


@dataclass(frozen=True)
class RecordedRun:
    """A pipeline run as its identity file says: which pipeline, commit, kernels, when; `files` (path -> SHA-256)
    only in the record."""

    pipeline: str
    commit: str | None
    started: str
    finished: str
    kernels: str
    env: str = "local"
    tracked_files_changed: bool | None = None
    partial: Mapping[str, Any] | None = None
    params: Mapping[str, Any] | None = None  # given on the command line (`--params`)
    files: Mapping[str, str] | None = None

    @classmethod
    def from_json(cls, path: Path) -> "RecordedRun":
        try:
            data = json.loads(path.read_text())
            return cls(**{key: data.get(key) for key in cls.__dataclass_fields__ if key in data})
        except (OSError, ValueError, TypeError) as error:
            raise RecordError(f"{path}: not a run identity ({error})") from error

    @property
    def label(self) -> str:
        """How a document names the run: `crosstask run of 2026-01-02 03:04 UTC at commit 0123456789ab (kernels)`,
        the same text however often the documents are regenerated."""
        when = self.finished.replace("T", " ")[:16] + " UTC" if self.finished else "an unknown date"
        commit = f"commit {self.commit[:12]}" if self.commit else "an unknown commit"
        changed = " with uncommitted changes" if self.tracked_files_changed else ""
        partial = f", resumed or partial ({', '.join(sorted(self.partial))})" if self.partial else ""
        kernels = f"; {self.kernels}" if self.kernels else ""
        params = (f"; --params {','.join(f'{key}={value}' for key, value in sorted(_dotted(self.params).items()))}"
                  if self.params else "")
        return f"`{self.pipeline}` run of {when} at {commit}{changed}{partial}{params}{kernels}"

    @property
    def minutes(self) -> float | None:
        """The run's wall time, from its start to its end (None where either is unknown)."""
        try:
            spans = [datetime.strptime(value, UTC_FORMAT) for value in (self.started, self.finished)]
        except (TypeError, ValueError):
            return None
        return (spans[1] - spans[0]).total_seconds() / 60

    def to_json(self) -> str:
        return json.dumps(self.__dict__, indent=1, sort_keys=True) + "\n"


def _dotted(params: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested run parameters as `--params` spells them: {"compute": {"bf16": False}} -> {"compute.bf16": False}."""
    flat = {}
    for key, value in params.items():
        if isinstance(value, Mapping) and value:
            flat.update(_dotted(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def read_identities(reports: str | Path) -> dict[str, RecordedRun]:
    """Every run identity in a reports folder or the record (`runs/<pipeline>.json`), by pipeline."""
    folder = Path(reports) / IDENTITY_FOLDER
    return {path.stem: RecordedRun.from_json(path) for path in sorted(folder.glob("*.json"))}


def recorded_runs(record_reports: str | Path) -> dict[str, RecordedRun]:
    """The record's runs, each file they list checked: present and with the bytes it was recorded with."""
    root = Path(record_reports)
    runs = read_identities(root)
    for pipeline, run in runs.items():
        if run.files is None:
            raise RecordError(f"{root / IDENTITY_FOLDER / (pipeline + '.json')}: lists no files: not written by "
                              "`learned-attribution record add`")
        check_files(root, run.files, f"the {pipeline} run's identity",
                    f"run `learned-attribution record add --pipeline {pipeline}` again from the run's reports")
    return runs


def check_files(root: Path, files: Mapping[str, str], listed_by: str, remedy: str) -> None:
    """Each file of `files` (path under `root` -> SHA-256) is there with the bytes it was recorded with; else one
    line naming it."""
    for name, sha256 in files.items():
        path = root / name
        if not path.is_file():
            raise RecordError(f"{path}: listed by {listed_by} but missing")
        if file_sha256(path) != sha256:
            raise RecordError(f"{path}: its bytes differ from those recorded (edited by hand?): {remedy}")


def write_benchmark_run(folder: str | Path, name: str, identity: Mapping[str, Any], tables: Sequence[str]) -> None:
    """A benchmark's run in the record, written after its `tables` (files in `folder`): `<name>.json` with the run's
    identity (`run_identity` at its start), its end and each table's SHA-256; complete or absent."""
    folder = Path(folder)
    files = {table: file_sha256(folder / table) for table in tables}
    write_text_atomically(folder / f"{name}.json",
                          RecordedRun(**{**identity, "finished": finished_now(), "files": files}).to_json())


def recorded_benchmark(folder: str | Path, name: str) -> RecordedRun | None:
    """A benchmark's run in the record (`<name>.json`; None where it wrote none), each table it lists checked:
    present and with the bytes it was written with."""
    path = Path(folder) / f"{name}.json"
    if not path.is_file():
        return None
    run = RecordedRun.from_json(path)
    check_files(Path(folder), run.files or {}, str(path), f"rerun benchmarks/{name}.py")
    return run


def add_run(reports: str | Path, record_reports: str | Path, pipeline: str) -> RecordedRun:
    """Copy `pipeline`'s reports from a run's reports folder into the record, replacing that pipeline's previous
    run there, with the run's identity and every file's SHA-256. Refuses a run without an identity (written before
    runs wrote one) or whose tracked files had uncommitted changes (its commit is not what ran)."""
    reports, root = Path(reports), Path(record_reports)
    if pipeline not in RECORDED_REPORTS:
        raise RecordError(f"pipeline {pipeline!r}: the record keeps the reports of {sorted(RECORDED_REPORTS)}")
    identity_path = reports / IDENTITY_FOLDER / f"{pipeline}.json"
    if not identity_path.is_file():
        raise RecordError(f"{identity_path} does not exist: the {pipeline} run that wrote {reports} did not finish, or "
                          f"predates run identities; run `kedro run --pipeline {pipeline}` to the end")
    run = RecordedRun.from_json(identity_path)
    if not run.commit:
        raise RecordError(f"{identity_path}: the run was not in a git checkout, so no commit names it")
    if run.tracked_files_changed:
        raise RecordError(f"{identity_path}: the run had uncommitted changes to tracked files, so commit "
                          f"{run.commit[:12]} is not what ran; commit them and rerun")
    sources = sorted({path.relative_to(reports).as_posix() for pattern in RECORDED_REPORTS[pipeline]
                      for path in reports.glob(pattern) if path.is_file()})
    if not sources:
        raise RecordError(f"{reports}: holds none of the {pipeline} run's reports ({', '.join(RECORDED_REPORTS[pipeline])})")
    previous = read_identities(root).get(pipeline)
    for name in (previous.files or {}) if previous is not None else {}:
        (root / name).unlink(missing_ok=True)
    files = {}
    for name in sources:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(reports / name, root / name)
        files[name] = file_sha256(root / name)
    recorded = RecordedRun(**{**run.__dict__, "files": files})
    (root / IDENTITY_FOLDER).mkdir(parents=True, exist_ok=True)
    write_text_atomically(root / IDENTITY_FOLDER / f"{pipeline}.json", recorded.to_json())
    return recorded
