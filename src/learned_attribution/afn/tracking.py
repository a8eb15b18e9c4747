"""One MLflow run per AFN pipeline run, through an explicit `MlflowClient` (no fluent active run, so
nothing leaks between runs or tests)."""
from __future__ import annotations

import math
import numbers
import time
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

# MLflow limits a param value to 6000 characters; longer values are cut.
_MAX_PARAM_LENGTH = 6000


def default_artifact_location(tracking_uri: str, experiment: str) -> str | None:
    """For a `sqlite:///path.db` store: `mlartifacts/<experiment>` beside the database file, so artifacts
    land next to their runs rather than in the working directory. None (MLflow's default) otherwise."""
    parsed = urlparse(tracking_uri)
    if parsed.scheme != "sqlite":
        return None
    database = tracking_uri[len("sqlite:///"):]
    return (Path(database).resolve().parent / "mlartifacts" / experiment).as_uri()


def refuse_own_tracking_uri(afn: Mapping | None) -> None:
    """`afn.mlflow.tracking_uri` was the afn pipeline's own store; every pipeline now logs to `mlflow.tracking_uri`.
    A value left in a conf file is refused in one line rather than silently ignored."""
    leftover = (((afn or {}).get("mlflow")) or {}).get("tracking_uri")
    if leftover is not None:
        raise ValueError(f"parameter afn.mlflow.tracking_uri={leftover} is not read: every pipeline logs to "
                         "mlflow.tracking_uri (conf/base/parameters.yml); move the value there and delete this key")


def flatten(mapping: Mapping, prefix: str = "") -> dict[str, object]:
    """{"a": {"b": 1}} -> {"a.b": 1}."""
    flat: dict[str, object] = {}
    for key, value in mapping.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def numeric_metrics(values: Mapping) -> dict[str, float]:
    """The finite numbers of a (nested) mapping, booleans as 0/1, ready for `log_batch`."""
    metrics = {}
    for key, value in flatten(values).items():
        if isinstance(value, bool | np.bool_):
            metrics[key] = float(value)
        elif isinstance(value, numbers.Real) and not math.isnan(float(value)):
            metrics[key] = float(value)
    return metrics


def log_afn_run(tracking_uri: str, experiment: str, params: Mapping, metrics: Mapping,
                layer_metrics: pd.DataFrame, texts: Mapping[str, str], figures: Mapping[str, Figure],
                artifact_location: str | None = None, run_name: str = "afn") -> str:
    """Create one run in `experiment` (created when missing) holding `params` (flattened), `metrics`
    (the finite numbers), `layer_metrics` (every numeric column logged per layer as the metric's step),
    `texts` and `figures` as artifacts (name -> artifact path). Returns the run id; a failure marks the
    run FAILED and re-raises."""
    from mlflow.entities import Metric, Param
    from mlflow.tracking import MlflowClient

    from learned_attribution import tracking

    tracking_uri = tracking.resolve_tracking_uri(tracking_uri)
    tracking.check_store(tracking_uri)
    client = MlflowClient(tracking_uri=tracking_uri)
    experiment_id = tracking.experiment_id(
        client, experiment, artifact_location or default_artifact_location(tracking_uri, experiment))
    tracking.end_stale_runs(client, experiment_id)
    commit = tracking.git_commit(Path.cwd())
    tags = {**tracking.process_tags(), **({"mlflow.source.git.commit": commit} if commit else {})}
    run_id = client.create_run(experiment_id, run_name=run_name, tags=tags).info.run_id
    try:
        now = int(time.time() * 1000)
        param_list = [Param(key, str(value)[:_MAX_PARAM_LENGTH]) for key, value in flatten(params).items()]
        metric_list = [Metric(key, value, now, 0) for key, value in numeric_metrics(metrics).items()]
        for row in layer_metrics.to_dict(orient="records"):
            step = int(row["layer"])
            metric_list += [Metric(f"by_layer.{key}", value, now, step)
                            for key, value in numeric_metrics(row).items() if key != "layer"]
        for start in range(0, len(param_list), 100):  # MLflow takes at most 100 params per batch
            client.log_batch(run_id, params=param_list[start:start + 100])
        for start in range(0, len(metric_list), 1000):
            client.log_batch(run_id, metrics=metric_list[start:start + 1000])
        for artifact, text in texts.items():
            client.log_text(run_id, text, artifact)
        for artifact, figure in figures.items():
            client.log_figure(run_id, figure, artifact)
    except Exception:
        client.set_terminated(run_id, status="FAILED")
        raise
    client.set_terminated(run_id, status="FINISHED")
    return run_id
