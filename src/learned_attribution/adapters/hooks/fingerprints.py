"""Settings fingerprints, so that `kedro run --only-missing-outputs` reruns what a settings change made stale and
nothing else.

Every node's fingerprint hashes its name, the values of its `params:` inputs and the fingerprints of its dataset
inputs (a raw file's size and modification time; an output of a node outside this run, its recorded fingerprint), so
it changes when a setting or a raw file it depends on changes, upstream included. A persisted output's fingerprint is
recorded once it is saved (`data/08_reporting/output_fingerprints.json`, written whole each time). Before
an `--only-missing-outputs` run, an output whose recorded fingerprint differs from the one the run's settings give is
set aside (renamed `<name>.stale`, replacing an earlier one), so Kedro sees it missing and reruns its node and,
since their fingerprints changed too, everything downstream. A changed ExpNet+ setting reruns the folds' learned
explainers and what reads them; the classifiers and their signals stay. An output without a recorded fingerprint
(written before fingerprints were recorded) is trusted as Kedro trusts it and recorded under the run's settings. Code
changes are not fingerprinted: after one, rerun the pipelines it touches.
"""
from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path
from typing import Any

from kedro.framework.hooks import hook_impl

logger = logging.getLogger(__name__)

ENTRY = "output_fingerprints"


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def dataset_path(dataset) -> Path | None:
    """Where a file or folder dataset keeps its data (None for one in memory)."""
    path = getattr(dataset, "_filepath", None) or getattr(dataset, "_path", None)
    return Path(str(path)) if path else None


def persisted(catalog, name: str) -> bool:
    return dataset_path(catalog.get(name)) is not None


def raw_fingerprint(catalog, name: str) -> str:
    """A dataset no node of the run writes: its file's size and modification time, or its name when it has none."""
    path = dataset_path(catalog.get(name)) if name in catalog else None
    if path is not None and path.exists():
        stat = path.stat()
        return _digest([name, stat.st_size, stat.st_mtime_ns])
    return _digest(name)


def expected_fingerprints(pipeline, catalog, recorded: dict[str, str]) -> dict[str, str]:
    """{output dataset: fingerprint} of every node output of `pipeline` under the run's settings (`recorded`: the
    fingerprints of outputs written by earlier runs, for the inputs this run does not write)."""
    expected: dict[str, str] = {}
    for node in pipeline.nodes:  # topologically sorted
        params, inputs = {}, {}
        for name in node.inputs:
            if name.startswith("params:") or name == "parameters":
                params[name] = catalog.load(name)
            else:
                inputs[name] = expected.get(name) or recorded.get(name) or raw_fingerprint(catalog, name)
        fingerprint = _digest({"node": node.name, "params": params, "inputs": inputs})
        for output in node.outputs:
            expected[output] = fingerprint
    return expected


def set_aside(catalog, name: str) -> Path | None:
    """Rename a stale output to `<name>.stale` (an earlier one is replaced), so it reads as missing."""
    path = dataset_path(catalog.get(name))
    if path is None or not path.exists():
        return None
    target = path.with_name(path.name + ".stale")
    if target.is_dir():
        shutil.rmtree(target)
    elif target.exists():
        target.unlink()
    path.rename(target)
    return target


class StaleOutputsHook:
    """Records each persisted output's settings fingerprint; sets aside stale ones before `--only-missing-outputs`."""

    def __init__(self) -> None:
        self._expected: dict[str, str] = {}
        self._recorded: dict[str, str] = {}
        self._catalog = None

    @hook_impl
    def before_pipeline_run(self, run_params: dict[str, Any], pipeline, catalog) -> None:
        self._catalog = catalog if ENTRY in catalog else None
        if self._catalog is None:
            return
        self._recorded = dict(catalog.load(ENTRY)) if catalog.exists(ENTRY) else {}
        self._expected = expected_fingerprints(pipeline, catalog, self._recorded)
        if not run_params.get("only_missing_outputs"):
            return
        present = [name for name in self._expected if persisted(catalog, name) and catalog.exists(name)]
        stale = sorted(name for name in present if self._recorded.get(name, self._expected[name])
                       != self._expected[name])
        for name in stale:
            set_aside(catalog, name)
            self._recorded.pop(name, None)
        # Outputs written before fingerprints were recorded are trusted, as Kedro trusts them, and from now on
        # recorded under the settings of this run, so that the next change is seen.
        unknown = [name for name in present if name not in self._recorded and name not in stale]
        if unknown:
            self._recorded.update({name: self._expected[name] for name in unknown})
            catalog.save(ENTRY, self._recorded)
        if stale:
            logger.info("%d output(s) set aside as stale (their settings or inputs changed since they were written; "
                        "renamed *.stale): %s", len(stale), ", ".join(stale))

    @hook_impl
    def after_dataset_saved(self, dataset_name: str) -> None:
        """Once an output is saved (not before: a crash between the node and its save leaves it missing, not
        recorded), its fingerprint is recorded and the file rewritten whole."""
        if self._catalog is None or dataset_name not in self._expected or not persisted(self._catalog, dataset_name):
            return
        self._recorded[dataset_name] = self._expected[dataset_name]
        self._catalog.save(ENTRY, self._recorded)
