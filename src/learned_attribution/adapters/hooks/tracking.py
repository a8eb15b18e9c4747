"""MLflow tracking of every pipeline, from one hook: before the first node, the runs of the namespaces left to run
(`runs.RUN_KINDS`: folds under a parent run, students, a rationale file's evaluation, AFN) are opened, or continued
on a resume; each saved output is logged to its run as it is saved; the runs close FINISHED after the pipeline or
FAILED when it raises. A resume (`--only-missing-outputs`) continues a run's latest KILLED or FAILED run with the
same resume key (env, git commit, parameters, raw file hashes); a namespace with nothing left to run gets no run,
and a resume with nothing tracked left to run creates none. An unusable store stops the run before any work."""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from kedro.framework.hooks import hook_impl

from learned_attribution.core.models.loading import PACKAGED_BASE_ENCODER
from learned_attribution.core.tasks import FOLD_PREFIX, TASKS
from learned_attribution.pipelines import data_processing
from learned_attribution.services.checkout import git_commit
from learned_attribution.services.config import RunParameters
from learned_attribution.services.tracking import store
from learned_attribution.services.tracking.run import TrackedRun, experiment, param_values, tracking_client

from .runs import PARENT_OUTPUTS, TASK_OUTPUTS, Logged, RunKind, kind_of, shared_parameters

logger = logging.getLogger(__name__)


def remaining_nodes(pipeline, catalog, only_missing_outputs: bool) -> list:
    """The nodes the runner will run. Kedro 1.x hands `before_pipeline_run` the pipeline *before* the
    `--only-missing-outputs` filter (the runner applies it), so the hook applies the runner's own rule here;
    without that filter, or with a Kedro that has no such function, every node."""
    nodes = list(pipeline.nodes)
    if not only_missing_outputs or not nodes:
        return nodes
    try:
        from kedro.runner.runner import _build_node_children_map, _determine_nodes_to_run  # private: guarded

        # Reverse topological order, as the runner walks it: a node runs if an output is missing or a child needs it.
        keep = _determine_nodes_to_run(list(reversed(nodes)), catalog, _build_node_children_map(pipeline), logger)
    except Exception as error:  # noqa: BLE001 - never stop a run over this: track every node instead
        logger.debug("MLflow: could not apply the missing-outputs filter (%s); tracking every node", error)
        return nodes
    return [node for node in nodes if node in keep]


def check_packaged_encoder(encoder: str | None) -> None:
    """The packaged base encoder needs the `base` install extra: without it, stop before any work with one line
    naming the extra and the install command (`core/models/packaged.py`)."""
    if encoder == PACKAGED_BASE_ENCODER:
        from learned_attribution.core.models.packaged import ALL_MPNET_BASE_V2, installed_parts  # the extra's check

        installed_parts(ALL_MPNET_BASE_V2)


def _root(namespace: str | None) -> str:
    return (namespace or "").split(".")[0]


def _trained(nodes) -> list[str]:
    """The tasks whose classifier `nodes` fine-tune."""
    return sorted({node.namespace for node in nodes if node.namespace in TASKS and node.name.endswith("train_classifier")})


class MlflowRunsHook:
    """Opens the runs before the pipeline, logs each output as it is saved, closes the runs after it."""

    def __init__(self) -> None:
        self._params = RunParameters({})
        self._reset()

    def _reset(self) -> None:
        self._runs: dict[str, TrackedRun] = {}
        self._kinds: dict[str, RunKind] = {}
        self._experiments: dict[str, str] = {}
        self._parent: TrackedRun | None = None
        self._parent_experiment = ""
        self._catalog = None
        self._guard = store.GuardedLogging()

    @hook_impl
    def after_context_created(self, context) -> None:
        self._params = RunParameters(context.params)

    @hook_impl
    def before_pipeline_run(self, run_params: dict[str, Any], pipeline, catalog) -> None:
        self._reset()
        check_packaged_encoder(self._params.encoder)  # a missing install extra: one line, before any work
        resume = bool(run_params.get("only_missing_outputs"))
        nodes = remaining_nodes(pipeline, catalog, resume)
        namespaces = sorted({_root(node.namespace) for node in nodes if kind_of(_root(node.namespace))})
        parent = (any(kind_of(n).child for n in namespaces) or bool(_trained(nodes))
                  or any(output in PARENT_OUTPUTS for node in nodes for output in node.outputs))
        if not namespaces and not parent:
            return  # nothing left that logs to MLflow (a no-op resume among others): no run, no check
        settings = self._params.tracking
        client, uri = tracking_client(settings.tracking_uri)  # an unusable store stops the run here, in one line
        self._guard = store.GuardedLogging(settings.strict)
        self._catalog = catalog
        if self._guard("the runs", self._open, client, run_params, pipeline, namespaces, parent, resume) is None:
            self._runs, self._parent = {}, None  # warned: the pipeline runs without tracking

    def _open(self, client, run_params: dict[str, Any], pipeline, namespaces: list[str], parent: bool,
              resume: bool) -> bool:
        env = run_params.get("env") or "local"
        commit = git_commit(Path.cwd())
        # The raw files a run derives from, hashed into its inputs: a fold's (and the parent's) the data processing
        # pipeline's raw files, whichever stages run; every run the raw and user files this pipeline reads.
        own = self._raw_files(pipeline.inputs())
        derived = self._raw_files(data_processing.create_pipeline().inputs()) | own
        params = self._params
        experiments: dict[str, str] = {}  # name -> id: each experiment looked up (and its stale runs ended) once

        def experiment_of(name: str, artifact_location: str | None = None) -> str:
            if name not in experiments:
                experiments[name] = experiment(client, name, artifact_location)
            return experiments[name]

        def start(experiment_id: str, identity: str, name: str, tags: dict, values: dict,
                  files: dict[str, Path]) -> TrackedRun:
            raw_inputs = store.raw_file_inputs(files)
            raw = {i.dataset.name: {t.key: t.value for t in i.tags}.get("sha256", "") for i in raw_inputs}
            logged = {**values, "kedro.env": env}
            key = store.resume_key(identity, env, commit, param_values(logged), raw)
            return TrackedRun.open(client, experiment_id, name=name, key=key, resume=resume,
                                   tags={**tags, "kedro.env": env}, params=logged, raw_inputs=raw_inputs,
                                   commit=commit, guard=self._guard)

        if parent:
            self._parent_experiment = params.tracking.experiment
            parent_experiment = experiment_of(self._parent_experiment)
            folds = sorted({_root(n.namespace) for n in pipeline.nodes if _root(n.namespace).startswith(FOLD_PREFIX)})
            kind = "crosstask" if folds else "classifiers"
            pipelines = ",".join(str(n) for n in (run_params.get("pipeline_names") or [run_params.get("pipeline_name")]))
            # The parent's identity is the whole pipeline's (unfiltered) folds and classifiers, so a resume that
            # leaves only some of them to run still finds it.
            identity = f"parent:{kind}:{','.join(folds)}:{','.join(_trained(pipeline.nodes))}"
            self._parent = start(parent_experiment, identity, f"{kind} {time.strftime('%Y-%m-%d %H:%M:%S')}",
                                 {"kedro.pipeline": pipelines}, {**shared_parameters(params), "folds": ",".join(folds)},
                                 derived)
        for namespace in namespaces:
            kind = kind_of(namespace)
            name = kind.experiment(params)
            tags = kind.tags(namespace, params)
            if kind.child and self._parent is not None:
                tags["mlflow.parentRunId"] = self._parent.run_id
            self._runs[namespace] = start(experiment_of(name, kind.artifact_location(params)), f"{kind.name}:{namespace}",
                                          kind.run_name(namespace, params), tags, kind.params(namespace, params),
                                          derived if kind.child else own)
            self._kinds[namespace], self._experiments[namespace] = kind, name
        logger.info("MLflow: %s at %s", ", ".join(f"{n} run {r.run_id}" for n, r in
                                                 ([("parent", self._parent)] if self._parent else [])
                                                 + list(self._runs.items())), client.tracking_uri)
        return True

    def _raw_files(self, names) -> dict[str, Path]:
        """The raw and user files among the catalog entries `names` (name -> path)."""
        files = {}
        for name in sorted(names):
            dataset = self._catalog.get(name) if not name.startswith("params:") else None
            if getattr(dataset, "is_raw_input", False) and Path(dataset.path).is_file():
                files[name] = Path(dataset.path)
        return files

    @hook_impl
    def after_dataset_saved(self, dataset_name: str, data: Any, node) -> None:
        if not self._runs and self._parent is None:
            return
        namespace, _, name = dataset_name.partition(".")
        if not name:
            namespace, name = "", dataset_name
        if namespace in self._runs:
            run, action = self._runs[namespace], self._kinds[namespace].outputs.get(name)
            experiment_name = self._experiments[namespace]
        elif self._parent is not None:
            action = PARENT_OUTPUTS.get(dataset_name) or (TASK_OUTPUTS.get(name) if namespace in TASKS else None)
            run, experiment_name = self._parent, self._parent_experiment
        else:
            return
        if action is not None:
            logged = Logged(namespace, self._catalog, experiment_name,
                            {n: r for n, r in self._runs.items() if n.startswith(FOLD_PREFIX)}, self._parent)
            self._guard(f"{dataset_name} (to {run.client.tracking_uri})", action, run, data, logged)

    def _close(self, status: str) -> None:
        runs = [*self._runs.values(), *([self._parent] if self._parent else [])]
        for run in runs:
            run.close(status)
        if runs:
            logger.info("MLflow runs closed as %s", status)
        self._runs, self._parent = {}, None

    @hook_impl
    def after_pipeline_run(self, run_params, run_result, pipeline, catalog) -> None:
        self._close("FINISHED")

    @hook_impl
    def on_pipeline_error(self, error, run_params, pipeline, catalog) -> None:
        self._close("FAILED")
