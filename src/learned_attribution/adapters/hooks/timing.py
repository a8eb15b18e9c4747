"""Where the time of a `kedro run` went: every node's wall time, by stage, in a file of the pipeline's own."""
from __future__ import annotations

import logging
import time
from typing import Any

import pandas as pd
from kedro.framework.hooks import hook_impl

logger = logging.getLogger(__name__)

STAGES = ("data_processing", "classifiers", "folds", "afn", "evaluate_external", "transfer", "amortize")


def pipeline_label(run_params: dict[str, Any]) -> str:
    """The pipeline a run ran, as its timings file names it: `crosstask` for the default pipeline (they are the
    same), several joined by `+`."""
    names = run_params.get("pipeline_names") or [run_params.get("pipeline_name")]
    return "+".join("crosstask" if name in (None, "__default__") else str(name) for name in names)


class NodeTimingHook:
    """Wall time of every node, from the node's start until its last output is saved (lazily computed partitions,
    such as the explainer signals, do their work while being saved), written when the pipeline finishes through the
    catalog entry `node_timings_<pipeline>` (data/08_reporting/node_timings/<pipeline>.csv: each pipeline's own
    file, so a later run of another pipeline keeps the main job's) and summed per stage in the log: the source of
    the stage table of docs/results.md."""

    def __init__(self) -> None:
        self._spans: dict[str, list[float]] = {}  # node name -> [start, end]
        self._namespaces: dict[str, str] = {}
        self._stage_of: dict[str, str] = {}

    @hook_impl
    def before_pipeline_run(self, run_params: dict[str, Any], pipeline, catalog) -> None:
        from kedro.framework.project import pipelines  # the registry is read once the project is configured

        self._spans, self._namespaces, self._stage_of = {}, {}, {}
        for stage in STAGES:
            registered = pipelines.get(stage)
            for node in registered.nodes if registered is not None else []:
                self._stage_of.setdefault(node.name, stage)

    @hook_impl
    def before_node_run(self, node) -> None:
        now = time.perf_counter()
        self._spans[node.name] = [now, now]
        self._namespaces[node.name] = node.namespace or ""

    @hook_impl
    def after_node_run(self, node) -> None:
        self._finished(node)

    @hook_impl
    def after_dataset_saved(self, dataset_name: str, data: Any, node) -> None:
        self._finished(node)

    def _finished(self, node) -> None:
        if node is not None and node.name in self._spans:
            self._spans[node.name][1] = time.perf_counter()

    @hook_impl
    def after_pipeline_run(self, run_params, run_result, pipeline, catalog) -> None:
        if not self._spans:
            return
        timings = pd.DataFrame([{"stage": self._stage_of.get(name, "report"), "namespace": self._namespaces[name],
                                 "node": name, "seconds": round(end - start, 2)}
                                for name, (start, end) in self._spans.items()])
        stages = timings.groupby("stage", sort=False)["seconds"].sum()
        logger.info("Node wall time per stage (s), outputs saved included: %s; total %.0f s",
                    ", ".join(f"{stage} {seconds:.0f}" for stage, seconds in stages.items()), stages.sum())
        entry = f"node_timings_{pipeline_label(run_params)}"
        if entry in catalog:
            catalog.save(entry, timings)
