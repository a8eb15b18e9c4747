"""A pipeline that reads another pipeline's outputs (the ablation, few-shot, transfer and amortize pipelines read the
main job's) stops before its first node when they are missing, in one line naming them and the command that writes
them, instead of failing hours later in the node that loads one."""
from __future__ import annotations

from typing import Any

from kedro.framework.hooks import hook_impl

# The pipeline a missing input is suggested from first: the main job writes what the others read.
PREFERRED = ("crosstask", "classifiers", "data_processing")


class MissingUpstreamInputsError(ValueError):
    """Inputs that another registered pipeline writes are missing: run that pipeline first."""


def producer(names: set[str], registry: dict[str, Any]) -> str | None:
    """The registered pipeline that writes every one of `names` (the main job first, else the smallest)."""
    candidates = [(name, registered) for name, registered in registry.items()
                  if name != "__default__" and names <= set(registered.all_outputs())]
    candidates.sort(key=lambda item: (item[0] not in PREFERRED, PREFERRED.index(item[0]) if item[0] in PREFERRED
                                      else 0, len(item[1].nodes)))
    return candidates[0][0] if candidates else None


def missing_upstream_inputs(pipeline, catalog, registry: dict[str, Any]) -> list[str]:
    """The free inputs of `pipeline` that some registered pipeline writes and that the catalog does not hold (raw
    files and parameters are not written by any pipeline, so they are not checked here)."""
    written = set().union(*(set(p.all_outputs()) for name, p in registry.items() if name != "__default__"))
    return sorted(name for name in pipeline.inputs()
                  if not name.startswith("params:") and name in written and not catalog.exists(name))


class UpstreamInputsHook:
    """Before a run: the inputs another pipeline writes must exist (`MissingUpstreamInputsError` otherwise)."""

    @hook_impl
    def before_pipeline_run(self, run_params: dict[str, Any], pipeline, catalog) -> None:
        from kedro.framework.project import pipelines  # the registry is read once the project is configured

        registry = dict(pipelines)
        missing = missing_upstream_inputs(pipeline, catalog, registry)
        if not missing:
            return
        names = run_params.get("pipeline_names") or [run_params.get("pipeline_name") or "__default__"]
        source = producer(set(missing), registry)
        command = f"`kedro run --pipeline {source}`" if source else "the pipelines that write them"
        environment = f" --env {run_params['env']}" if run_params.get("env") else ""
        if source and environment:
            command = command[:-1] + environment + "`"
        raise MissingUpstreamInputsError(
            f"pipeline {'+'.join(map(str, names))}: {len(missing)} input(s) another pipeline writes are missing "
            f"({', '.join(missing)}): run {command} first")
