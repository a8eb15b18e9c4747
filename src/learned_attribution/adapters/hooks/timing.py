"""Where the time of a `kedro run` went: every node's wall time, by stage, in a file of the pipeline's own; and
which run it was (commit, kernels, start and end), the identity the record names its tables by."""
from __future__ import annotations

import logging
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd
from kedro.framework.hooks import hook_impl

from learned_attribution.services.record.runs import finished_now, run_identity

logger = logging.getLogger(__name__)

STAGES = ("data_processing", "classifiers", "folds", "ablation", "afn", "evaluate_external", "transfer", "amortize",
          "fewshot")


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
    the stage table of docs/results.md. Each row also holds the node's start and end in seconds from the pipeline's
    start (a stage's wall time is its span: nodes of a stage may interleave with others) and the kernels the torch
    work ran with."""

    def __init__(self) -> None:
        self._spans: dict[str, list[float]] = {}  # node name -> [start, end]
        self._namespaces: dict[str, str] = {}
        self._stage_of: dict[str, str] = {}
        self._started = time.perf_counter()
        self._kernels = ""
        self._identity: dict | None = None

    @hook_impl
    def before_pipeline_run(self, run_params: dict[str, Any], pipeline, catalog) -> None:
        from kedro.framework.project import pipelines  # the registry is read once the project is configured

        self._spans, self._namespaces, self._stage_of = {}, {}, {}
        self._started, self._kernels = time.perf_counter(), _kernels(catalog)
        partial = {name: run_params[name] for name in PARTIAL_RUN_PARAMETERS if run_params.get(name)}
        # taken at the start: the commit whose code the run loads, whatever is committed while it runs
        self._identity = run_identity(pipeline_label(run_params), datetime.now(timezone.utc), self._kernels,
                                      Path(run_params.get("project_path") or Path.cwd()),
                                      env=run_params.get("env") or "local", partial=partial,
                                      params=run_params.get("runtime_params"))
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
                                 "node": name, "seconds": round(end - start, 2),
                                 "start_s": round(start - self._started, 2), "end_s": round(end - self._started, 2),
                                 "kernels": self._kernels}
                                for name, (start, end) in self._spans.items()])
        stages = timings.groupby("stage", sort=False)["seconds"].sum()
        logger.info("Node wall time per stage (s), outputs saved included: %s; total %.0f s, wall %.0f s (%s)",
                    ", ".join(f"{stage} {seconds:.0f}" for stage, seconds in stages.items()), stages.sum(),
                    timings["end_s"].max() - timings["start_s"].min(), self._kernels)
        entry = f"node_timings_{pipeline_label(run_params)}"
        if entry in catalog:
            catalog.save(entry, timings)
        entry = f"run_identity_{pipeline_label(run_params)}"
        if entry in catalog and self._identity is not None:
            catalog.save(entry, {**self._identity, "finished": finished_now()})


# The run parameters that make a run partial: it recomputed only some of the pipeline's outputs.
PARTIAL_RUN_PARAMETERS = ("node_names", "from_nodes", "to_nodes", "from_inputs", "to_outputs", "tags", "namespaces",
                          "only_missing_outputs")


def _kernels(catalog) -> str:
    """The kernels the run's torch work uses (`params:compute`'s device and bf16, resolved as the nodes resolve them)."""
    from learned_attribution.core.models.runner import kernels_description
    from learned_attribution.services.config import compute_settings

    try:
        compute = compute_settings(catalog.load("params:compute"))
        return kernels_description(compute.device, compute.bf16)
    except Exception as error:  # noqa: BLE001 (a pipeline without the compute block still gets its timings)
        logger.debug("kernels not resolved: %s", error)
        return ""
