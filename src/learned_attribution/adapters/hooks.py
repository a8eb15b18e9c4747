"""MLflow tracking: one parent run per `kedro run` that fine-tunes classifiers or runs folds, and one child
run per held-out fold (metrics, curves, artifacts, the fold's registered pyfunc model); a resume continues
the runs it resumes and a no-op resume opens none. Store checks, guarded logging, stale-run clean-up and
resume keys live in `tracking.py`.

Folds of the namespaced pipelines run interleaved, so nothing here uses MLflow's fluent "active
run": every call names its run id explicitly through `MlflowClient`.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pandas as pd
from kedro.framework.hooks import hook_impl
from mlflow.entities import Metric, Param
from mlflow.tracking import MlflowClient

from learned_attribution.services import tracking
from learned_attribution.core.tasks import FOLD_PREFIX, TASKS
from learned_attribution.services.tracking import GuardedLogging, check_store, refuse_own_tracking_uri, resolve_tracking_uri

logger = logging.getLogger(__name__)

_MAX_BATCH = 1000  # MLflow's limit on metrics per log_batch call
_METRIC_FIELDS = ("n_examples", "f1", "precision", "recall", "f1_micro", "auroc", "auroc_pooled", "auprc",
                  "f1_low", "f1_high", "auroc_low", "auroc_high", "comprehensiveness", "sufficiency")


def _flatten(prefix: str, value: Any) -> dict[str, str]:
    if isinstance(value, dict):
        out: dict[str, str] = {}
        for key, inner in value.items():
            out.update(_flatten(f"{prefix}.{key}" if prefix else str(key), inner))
        return out
    return {prefix: str(value)[:500]}


def _folds_of(nodes) -> list[str]:
    """The held-out fold namespaces (`heldout_<task>`) of `nodes`."""
    return sorted({node.namespace.split(".")[0] for node in nodes
                   if node.namespace and node.namespace.startswith(FOLD_PREFIX)})


def _trained_of(nodes) -> list[str]:
    """The tasks whose classifier `nodes` fine-tune."""
    return sorted({node.namespace for node in nodes
                   if node.namespace in TASKS and node.name.endswith("train_classifier")})


def fold_metric_entries(metrics: pd.DataFrame) -> dict[str, float]:
    """`method/rule/subset/metric` -> value for every finite number of a fold's metrics table."""
    entries = {}
    for row in metrics.to_dict("records"):
        for field in _METRIC_FIELDS:
            value = row.get(field)
            if value is not None and pd.notna(value):
                entries[f"{row['method']}/{row['rule']}/{row['subset']}/{field}"] = float(value)
    return entries


# Datasets outside a fold's namespace that the parent run logs (besides `<task>.training_history`).
_PARENT_OUTPUTS = {"classifier_metrics", "crosstask_metrics", "crosstask_summary"}


def _reads_mlflow_settings(node) -> bool:
    return any(name == "params:mlflow" or name.startswith("params:mlflow.") for name in node.inputs)


def remaining_nodes(pipeline, catalog, only_missing_outputs: bool) -> list:
    """The nodes the runner will run. Kedro 1.x hands `before_pipeline_run` the pipeline *before* the
    `--only-missing-outputs` filter (the runner applies it), so the hook applies the runner's own rule here;
    without that filter, or with a Kedro that has no such function, every node."""
    nodes = list(pipeline.nodes)
    if not only_missing_outputs or not nodes:
        return nodes
    try:
        from kedro.runner.runner import _build_node_children_map, _determine_nodes_to_run

        # Reverse topological order, as the runner walks it: a node runs if an output is missing or a child needs it.
        keep = _determine_nodes_to_run(list(reversed(nodes)), catalog, _build_node_children_map(pipeline), logger)
    except Exception as error:  # noqa: BLE001 - never stop a run over this: track every node instead
        logger.debug("MLflow: could not apply the missing-outputs filter (%s); tracking every node", error)
        return nodes
    return [node for node in nodes if node in keep]



def check_packaged_encoder(encoder: dict[str, Any]) -> None:
    """The packaged base encoder needs the `base` install extra: without it, stop before any work with one line
    naming the extra and the install command (`models/packaged.py`)."""
    from learned_attribution.core.models.encoder import PACKAGED_BASE_ENCODER

    if encoder.get("name_or_path") == PACKAGED_BASE_ENCODER:
        from learned_attribution.core.models.packaged import ALL_MPNET_BASE_V2, installed_parts

        installed_parts(ALL_MPNET_BASE_V2)

class MlflowFoldRunsHook:
    """Opens the runs before the pipeline, logs each fold's outputs as they are saved, closes the runs
    FINISHED after the pipeline or FAILED when it raises.

    A resume (`--only-missing-outputs`) continues a fold's latest KILLED or FAILED run with the same
    `resume_key` (env, git commit, parameters, raw file hashes), so that run holds everything the fold
    logged before and after; a fold none of whose nodes are left to run gets no run, and a resume with
    nothing tracked left to run creates none at all. Any pipeline that tracks (folds, classifiers, or a
    node reading `params:mlflow`: afn, evaluate_external) checks `mlflow.tracking_uri` before its first node.
    """

    def __init__(self) -> None:
        self._client: MlflowClient | None = None
        self._params: dict[str, Any] = {}
        self._parent: str | None = None
        self._folds: dict[str, str] = {}  # namespace -> run id
        self._catalog = None
        self._experiment = ""
        self._guard = GuardedLogging()

    @hook_impl
    def after_context_created(self, context) -> None:
        self._params = context.params

    @hook_impl
    def before_pipeline_run(self, run_params: dict[str, Any], pipeline, catalog) -> None:
        check_packaged_encoder(self._params.get("encoder", {}))  # a missing install extra: one line, before any work
        all_folds, all_trained = _folds_of(pipeline.nodes), _trained_of(pipeline.nodes)
        resume = bool(run_params.get("only_missing_outputs"))
        nodes = remaining_nodes(pipeline, catalog, resume)
        folds, trained = _folds_of(nodes), _trained_of(nodes)
        parent_outputs = any(output in _PARENT_OUTPUTS for node in nodes for output in node.outputs)
        reads_settings = any(_reads_mlflow_settings(node) for node in nodes)
        if any(node.name == "afn_log_to_mlflow" for node in nodes):
            refuse_own_tracking_uri(self._params.get("afn"))  # before the store check: it names the fix
        if not (folds or trained or parent_outputs or reads_settings):
            return  # nothing left that logs to MLflow (a no-op resume among others): no run, no check
        settings = self._params.get("mlflow", {})
        uri = resolve_tracking_uri(settings.get("tracking_uri"))
        check_store(uri)  # an unusable store stops the run here, in one line, before any computation
        if not (folds or trained or parent_outputs):
            return  # afn / evaluate_external log their own runs (they read params:mlflow)
        self._guard = GuardedLogging(bool(settings.get("strict", False)))
        self._catalog = catalog
        self._experiment = settings.get("experiment", "crosstask")
        if self._guard("the runs", self._open_runs, uri, run_params, folds, all_folds, all_trained,
                       resume) is None:
            self._client = None  # warned: the pipeline runs without tracking

    def _open_runs(self, uri: str, run_params: dict[str, Any], folds: list[str], all_folds: list[str],
                   all_trained: list[str], resume: bool) -> bool:
        self._client = client = MlflowClient(tracking_uri=uri)
        experiment_id = tracking.experiment_id(client, self._experiment)
        tracking.end_stale_runs(client, experiment_id)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        env = run_params.get("env") or "local"
        kind = "crosstask" if all_folds else "classifiers"
        pipelines = ",".join(str(n) for n in (run_params.get("pipeline_names") or [run_params.get("pipeline_name")]))
        shared = {**_flatten("encoder", self._params.get("encoder", {})),
                  **_flatten("features", self._params.get("features", {})),
                  **_flatten("crosstask", self._params.get("crosstask", {})),
                  **_flatten("classifiers", self._params.get("classifiers", {})),
                  "max_length": str(self._params.get("max_length")), "seed": str(self._params.get("seed")),
                  "kedro.env": env}
        commit = tracking.git_commit(Path.cwd())
        raw_inputs = tracking.raw_file_inputs(self._raw_files())
        raw = {i.dataset.name: {t.key: t.value for t in i.tags}.get("sha256", "") for i in raw_inputs}

        def key(identity: str) -> str:
            return tracking.resume_key(identity, env, commit, shared, raw)

        # The parent's identity is the whole pipeline's (unfiltered) folds and classifiers, so a resume that
        # leaves only some of them to run still finds it.
        parent_params = {**shared, "folds": ",".join(all_folds)}
        parent_key = key(f"parent:{kind}:{parent_params['folds']}:{','.join(all_trained)}")
        self._parent = self._start(experiment_id, parent_key, resume, f"{kind} {stamp}",
                                   {"kedro.env": env, "kedro.pipeline": pipelines}, parent_params, commit, raw_inputs)
        for fold in folds:
            task = fold[len(FOLD_PREFIX):]
            training = [t for t in TASKS if t != task]
            self._folds[fold] = self._start(
                experiment_id, key(f"fold:{fold}"), resume, fold,
                {"mlflow.parentRunId": self._parent, "fold": fold, "held_out_task": task, "kedro.env": env},
                {**shared, "fold": fold, "held_out_task": task, "training_tasks": ",".join(training)}, commit,
                raw_inputs)
        logger.info("MLflow: parent run %s with fold runs %s at %s", self._parent, self._folds, client.tracking_uri)
        return True

    def _start(self, experiment_id: str, key: str, resume: bool, name: str, tags: dict[str, str],
               params: dict[str, str], commit: str | None, raw_inputs: list) -> str:
        """A resume continues the latest unfinished run with this key (re-pointed at this parent); otherwise,
        or when there is none, a new run. Returns the run id."""
        client = self._client
        found = tracking.resumable_run(client, experiment_id, key) if resume else None
        if found is not None:
            run_id = found.info.run_id
            tracking.reopen_run(client, found)
            for tag, value in tags.items():
                if found.data.tags.get(tag) != value:
                    client.set_tag(run_id, tag, value)  # e.g. a fold continued under a new parent run
            # Same key: the same parameters; only the ones it lacks (MLflow refuses a changed value).
            self._log_params(run_id, {k: v for k, v in params.items() if k not in found.data.params})
            logger.info("MLflow: %s continues %s run %s (%d metrics logged before)", name, found.info.status,
                        run_id, len(found.data.metrics))
            return run_id
        run_id = client.create_run(experiment_id, run_name=name, tags={
            **tags, tracking.RESUME_TAG: key, **tracking.process_tags()}).info.run_id
        self._log_params(run_id, params)
        if commit:
            client.set_tag(run_id, "mlflow.source.git.commit", commit)
        self._guard(f"the raw input hashes of run {run_id}", client.log_inputs, run_id, raw_inputs)
        return run_id

    def _raw_files(self) -> dict[str, Path]:
        """Every raw file the data processing pipeline reads (name -> path), hashed into each run's inputs."""
        from learned_attribution.adapters.kedro_datasets import RawTextDataset
        from learned_attribution.pipelines.data_processing import create_pipeline

        files = {}
        for name in sorted(create_pipeline().inputs()):
            dataset = self._catalog.get(name) if name.startswith("raw_") else None
            if isinstance(dataset, RawTextDataset) and dataset.path.is_file():
                files[name] = dataset.path
        return files

    @hook_impl
    def after_dataset_saved(self, dataset_name: str, data: Any, node) -> None:
        if self._client is None:
            return
        self._guard(f"{dataset_name} (to {self._client.tracking_uri})", self._log_output, dataset_name, data)

    def _log_output(self, dataset_name: str, data: Any) -> None:
        namespace, _, name = dataset_name.partition(".")
        run_id = self._folds.get(namespace)
        if run_id is not None:
            self._log_fold_output(run_id, namespace, name, data)
        elif name == "training_history" and namespace in TASKS:
            # Fine-tuning curve: on the parent run per task, and on the fold whose held-out task it is.
            history = data.to_dict("records")
            self._log_steps(self._parent, tracking.step_metrics(f"classifier/{namespace}", history))
            if f"{FOLD_PREFIX}{namespace}" in self._folds:
                self._log_steps(self._folds[f"{FOLD_PREFIX}{namespace}"], tracking.step_metrics("classifier", history))
        elif dataset_name == "classifier_metrics":
            for fold, fold_run in self._folds.items():
                rows = data[data["task"] == fold[len(FOLD_PREFIX):]]
                self._log_metrics(fold_run, {f"classifier/{r['eval_set']}/{k}": float(r[k])
                                             for r in rows.to_dict("records")
                                             for k in ("accuracy", "macro_f1", "mcc", "n") if pd.notna(r[k])})
            self._client.log_text(self._parent, data.to_csv(index=False), "classifier_metrics.csv")
        elif dataset_name == "crosstask_metrics":
            self._client.log_text(self._parent, data.to_csv(index=False), "crosstask_metrics.csv")
        elif dataset_name == "crosstask_summary":
            self._client.log_text(self._parent, data, "crosstask_summary.md")

    def _log_fold_output(self, run_id: str, namespace: str, name: str, data: Any) -> None:
        client = self._client
        if name == "fold_metrics":
            self._log_metrics(run_id, fold_metric_entries(data))
            client.log_text(run_id, data.to_csv(index=False), "fold_metrics.csv")
        elif name == "budget":
            self._log_metrics(run_id, {f"budget/{k}": float(v) for k, v in data.items()})
        elif name == "metrics_plot":
            client.log_figure(run_id, data, "metrics.png")
        elif name == "cost_plot":
            client.log_figure(run_id, data, "cost_vs_plausibility.png")
        elif name == "heatmaps":
            client.log_text(run_id, data, "heatmaps.html")
        elif name == "expnet_history":
            self._log_steps(run_id, tracking.step_metrics("expnet_training", data.to_dict("records")))
            client.log_text(run_id, data.to_csv(index=False), f"{name}.csv")
        elif name in ("explain_cost", "explain_failures", "expnet_plus_selection"):
            client.log_text(run_id, data.to_csv(index=False), f"{name}.csv")
        elif name == "expnet_plus_ablation":
            client.log_text(run_id, data.to_csv(index=False), "expnet_plus_ablation.csv")
            variants = data[data["description"].ne("best baseline") & data["description"].ne("floor")]
            self._log_metrics(run_id, {f"expnet_plus_ablation/{r['variant']}/{metric}": float(r[metric])
                                       for r in variants.to_dict("records")
                                       for metric in ("val_auroc", "auroc", "auprc", "f1_matched", "f1_own_calibrated",
                                                      "auroc_seed_mean", "auroc_seed_sd")
                                       if pd.notna(r.get(metric))})
        elif name in ("expnet", "expnet_plus", "expnet_plus_shape_free"):
            # The saved folder (safetensors + config.json, models/artifacts.py), as the Python API reads it.
            folder = self._catalog.get(f"{namespace}.{name}").path
            client.log_artifacts(run_id, str(folder), "expnet_paper" if name == "expnet" else name)
            if name == "expnet_plus":
                client.set_tag(run_id, "expnet_plus_variant", data.variant.name)
                self._log_steps(run_id, tracking.step_metrics("expnet_plus_training", data.history))
        elif name == "fold_card":
            self._log_fold_model(namespace, run_id)

    def _log_fold_model(self, fold: str, run_id: str) -> None:
        """The fold's explainers and classifier as a pyfunc model (artifact path `explainer`), registered as
        `<experiment>-<fold>` (serving.py)."""
        from learned_attribution.adapters.serving import log_and_register

        fold_folder = self._catalog.get(f"{fold}.expnet_plus").path.parent
        classifier = self._catalog.get(f"{fold[len(FOLD_PREFIX):]}.classifier").path
        name = f"{self._experiment}-{fold}"
        version = log_and_register(self._client, run_id, fold_folder, classifier, name)
        self._client.set_tag(run_id, "registered_model", f"models:/{name}/{version}")
        logger.info("MLflow: %s registered as models:/%s/%s", fold, name, version)

    def _log_params(self, run_id: str, params: dict[str, str]) -> None:
        items = [Param(k, v) for k, v in params.items()]
        for start in range(0, len(items), 100):
            self._client.log_batch(run_id, params=items[start:start + 100])

    def _log_steps(self, run_id: str, metrics: list[Metric]) -> None:
        for start in range(0, len(metrics), _MAX_BATCH):
            self._client.log_batch(run_id, metrics=metrics[start:start + _MAX_BATCH])

    def _log_metrics(self, run_id: str, values: dict[str, float]) -> None:
        stamp = int(time.time() * 1000)
        metrics = [Metric(k, v, stamp, 0) for k, v in values.items()]
        for start in range(0, len(metrics), _MAX_BATCH):
            self._client.log_batch(run_id, metrics=metrics[start:start + _MAX_BATCH])

    def _close(self, status: str) -> None:
        if self._client is None:
            return
        for run_id in [*self._folds.values(), self._parent]:
            self._guard(f"the end ({status}) of run {run_id}", self._client.set_terminated, run_id, status=status)
        logger.info("MLflow runs closed as %s", status)
        self._client, self._parent, self._folds = None, None, {}

    @hook_impl
    def after_pipeline_run(self, run_params, run_result, pipeline, catalog) -> None:
        self._close("FINISHED")

    @hook_impl
    def on_pipeline_error(self, error, run_params, pipeline, catalog) -> None:
        self._close("FAILED")


class NodeTimingHook:
    """Wall time of every node of a `kedro run`, by stage, from the node's start until its last output is saved
    (lazily computed partitions, such as the explainer signals, do their work while being saved), written
    through the catalog entry `node_timings` (data/08_reporting/node_timings.csv) when the pipeline finishes and
    summed per stage in the log: the source of README's per-stage table."""

    STAGES = ("data_processing", "classifiers", "folds", "afn", "evaluate_external")

    def __init__(self) -> None:
        self._spans: dict[str, list[float]] = {}  # node name -> [start, end]
        self._namespaces: dict[str, str] = {}
        self._stage_of: dict[str, str] = {}

    @hook_impl
    def before_pipeline_run(self, run_params: dict[str, Any], pipeline, catalog) -> None:
        from kedro.framework.project import pipelines

        self._spans, self._namespaces, self._stage_of = {}, {}, {}
        for stage in self.STAGES:
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
        if "node_timings" in catalog:
            catalog.save("node_timings", timings)
