"""What each pipeline logs to MLflow: one `RunKind` per kind of run, keyed by the namespace its nodes run in, and
how each of its saved outputs is logged. The tracking hook (`tracking.py`) opens the runs and routes every saved
dataset here; no node calls MLflow.

- a fold (`heldout_<task>`, experiment `mlflow.experiment`): a child of the `kedro run`'s parent run, which also
  holds the classifiers' training curves and the cross-fold reports; the fold's bundle is registered as
  `<experiment>-heldout_<task>`.
- a fold's ablation (`ablation_<task>`, experiment `<mlflow.experiment>-ablation`): every ExpNet+ candidate, the
  selection table and the candidates' costs.
- a student (`student_<task>`, experiment `amortize.mlflow.experiment`), registered as `<experiment>-student_<task>`.
- an evaluation of a rationale file (`evaluate_external`, experiment `evaluate_external.mlflow_experiment`).
- the AFN analysis (`afn`, experiment `afn.mlflow.experiment`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import pandas as pd

from learned_attribution.core.tasks import ABLATION_PREFIX, FOLD_PREFIX, FOLDS, STUDENT_PREFIX, TASKS, held_out_task
from learned_attribution.core.explainers.learned import EXPNET_PLUS, STUDENT
from learned_attribution.services.config import RunParameters
from learned_attribution.services.config.runs import FOLD_BLOCKS
from learned_attribution.services.tracking.run import TrackedRun

from .. import serving

METRIC_FIELDS = ("n_examples", "f1", "precision", "recall", "f1_micro", "auroc", "auroc_pooled", "auprc",
                 "f1_low", "f1_high", "auroc_low", "auroc_high", "comprehensiveness", "sufficiency")


@dataclass
class Logged:
    """What an output's logging action may read besides the data: the run's namespace, the catalog (a saved
    folder's path), the run's experiment and the other open runs (the parent, the folds)."""

    namespace: str
    catalog: Any
    experiment: str
    runs: Mapping[str, TrackedRun] = field(default_factory=dict)
    parent: TrackedRun | None = None


Action = Callable[[TrackedRun, Any, Logged], None]


@dataclass(frozen=True)
class RunKind:
    """One kind of MLflow run: the namespaces it covers, its experiment, name, tags and parameters, whether it is a
    child of the `kedro run`'s parent run, and the logging action of each of its outputs (by dataset name without
    the namespace). Each reads the run's parameters as parsed (`RunParameters`)."""

    name: str
    matches: Callable[[str], bool]
    experiment: Callable[[RunParameters], str]
    run_name: Callable[[str, RunParameters], str]
    tags: Callable[[str, RunParameters], dict[str, str]]
    params: Callable[[str, RunParameters], dict]
    outputs: Mapping[str, Action]
    child: bool = False
    artifact_location: Callable[[RunParameters], str | None] = lambda params: None


def metric_entries(metrics: pd.DataFrame) -> dict[str, float]:
    """`mode/method/rule/subset/metric` -> value for every finite number of a metric table (`mode`: predicted or
    gold, `core/data/modes.py`; a table without modes gives `method/rule/subset/metric`)."""
    entries = {}
    for row in metrics.to_dict("records"):
        mode = f"{row['mode']}/" if isinstance(row.get("mode"), str) else ""
        for name in METRIC_FIELDS:
            value = row.get(name)
            if value is not None and pd.notna(value):
                entries[f"{mode}{row['method']}/{row['rule']}/{row['subset']}/{name}"] = float(value)
    return entries


def table(artifact: str) -> Action:
    return lambda run, data, logged: run.table(artifact, data)


def text(artifact: str) -> Action:
    return lambda run, data, logged: run.text(artifact, data)


def figure(artifact: str) -> Action:
    return lambda run, data, logged: run.figure(artifact, data)


def both(*actions: Action) -> Action:
    def log(run: TrackedRun, data, logged: Logged) -> None:
        for action in actions:
            action(run, data, logged)
    return log


def metric_table(artifact: str) -> Action:
    """A metric table (the scoring protocol's schema): every number as `mode/method/rule/subset/metric`, and the
    CSV."""
    return both(lambda run, data, logged: run.metrics(metric_entries(data)), table(artifact))


# ----------------------------------------------------------------------------------------------------
# Folds and their parent run
# ----------------------------------------------------------------------------------------------------

def shared_parameters(params: RunParameters) -> dict:
    """What a fold run (and its parent) computes from: the encoder, the classifiers, the features, the explained
    layer, the folds' settings and variant catalogue, max_length and the seed."""
    return params.blocks(*FOLD_BLOCKS)


def _ablation(run: TrackedRun, data: pd.DataFrame, logged: Logged) -> None:
    run.table("expnet_plus_ablation.csv", data)
    variants = data[data["val_auroc"].notna()]
    run.metrics({f"expnet_plus_ablation/{r['variant']}/{metric}": float(r[metric])
                 for r in variants.to_dict("records")
                 for metric in ("val_auroc", "auroc", "auprc", "f1_matched", "f1_own_calibrated", "auroc_seed_mean",
                                "auroc_seed_sd", "auroc_correct", "auroc_incorrect") if pd.notna(r.get(metric))})


def _fold_bundle(run: TrackedRun, data, logged: Logged) -> None:
    """The saved fold folder as artifacts (as the Python API reads it), ExpNet+'s variant and training curve, and
    the fold's explainers with its classifier registered as a served model."""
    folder = logged.catalog.get(f"{logged.namespace}.bundle").path
    for name in (*data.learned, "expnet_plus_shape_free"):
        if (folder / name).is_dir():
            run.folder(folder / name, name)
    plus = data.learned[EXPNET_PLUS]
    run.tag("expnet_plus_variant", plus.variant.name)
    run.steps("expnet_plus_training", plus.history)
    classifier = logged.catalog.get(f"{held_out_task(logged.namespace)}.classifier").path
    serving.register_bundle(run, folder, classifier, f"{logged.experiment}-{logged.namespace}")


FOLD = RunKind(
    name="fold", matches=lambda namespace: namespace in FOLDS,
    experiment=lambda params: params.tracking.experiment,
    run_name=lambda namespace, params: namespace,
    tags=lambda namespace, params: {"fold": namespace, "held_out_task": held_out_task(namespace)},
    params=lambda namespace, params: {**shared_parameters(params), "fold": namespace,
                                      "held_out_task": held_out_task(namespace),
                                      "training_tasks": ",".join(t for t in TASKS if FOLD_PREFIX + t != namespace)},
    child=True,
    outputs={"fold_metrics": metric_table("fold_metrics.csv"), "gold_metrics": metric_table("gold_metrics.csv"),
             "budget": lambda run, data, logged: run.metrics({f"budget/{k}": float(v) for k, v in data.items()}),
             "metrics_plot": figure("metrics.png"), "cost_plot": figure("cost_vs_plausibility.png"),
             "heatmaps": text("heatmaps.html"),
             "expnet_history": both(lambda run, data, logged: run.steps("expnet_training", data.to_dict("records")),
                                    table("expnet_history.csv")),
             "explain_cost": table("explain_cost.csv"), "explain_failures": table("explain_failures.csv"),
             "bundle": _fold_bundle})

ABLATION = RunKind(
    name="ablation", matches=lambda namespace: namespace.removeprefix(ABLATION_PREFIX) in TASKS
    and namespace.startswith(ABLATION_PREFIX),
    experiment=lambda params: f"{params.tracking.experiment}-ablation",
    run_name=lambda namespace, params: namespace,
    tags=lambda namespace, params: {"fold": FOLD_PREFIX + namespace.removeprefix(ABLATION_PREFIX),
                                    "held_out_task": namespace.removeprefix(ABLATION_PREFIX)},
    params=lambda namespace, params: {**shared_parameters(params), **params.blocks("ablation"),
                                      "fold": FOLD_PREFIX + namespace.removeprefix(ABLATION_PREFIX)},
    outputs={"expnet_plus_selection": table("expnet_plus_selection.csv"), "expnet_plus_ablation": _ablation,
             "expnet_plus_cost": table("expnet_plus_cost.csv"), "cost_plot": figure("cost_vs_plausibility.png")})


def _training_history(run: TrackedRun, data: pd.DataFrame, logged: Logged) -> None:
    """A classifier's fine-tuning curve: on the parent run per task, and on the fold whose held-out task it is."""
    history = data.to_dict("records")
    run.steps(f"classifier/{logged.namespace}", history)
    fold = logged.runs.get(f"{FOLD_PREFIX}{logged.namespace}")
    if fold is not None:
        fold.steps("classifier", history)


def _classifier_metrics(run: TrackedRun, data: pd.DataFrame, logged: Logged) -> None:
    for fold, fold_run in logged.runs.items():
        rows = data[data["task"] == held_out_task(fold)]
        fold_run.metrics({f"classifier/{r['eval_set']}/{k}": float(r[k]) for r in rows.to_dict("records")
                          for k in ("accuracy", "macro_f1", "mcc", "n") if pd.notna(r[k])})
    run.table("classifier_metrics.csv", data)


# The parent run's outputs: by full dataset name, and a task classifier's (namespace `<task>`) by name.
PARENT_OUTPUTS: Mapping[str, Action] = {"classifier_metrics": _classifier_metrics,
                                        "crosstask_metrics": table("crosstask_metrics.csv"),
                                        "crosstask_summary": text("crosstask_summary.md")}
TASK_OUTPUTS: Mapping[str, Action] = {"training_history": _training_history}


# ----------------------------------------------------------------------------------------------------
# Students
# ----------------------------------------------------------------------------------------------------

def _headline(key: str, columns: tuple[str, ...]) -> Action:
    """A student table's headline numbers as `<key>.<method>.<column>` (the teacher's row as `teacher`), and the
    table as `<key>.csv`."""
    def log(run: TrackedRun, data: pd.DataFrame, logged: Logged) -> None:
        metrics = {}
        for record in data.to_dict("records"):
            method = "teacher" if str(record["method"]).startswith("teacher") else record["method"]
            metrics.update({f"{key}.{method}.{c}": record[c] for c in columns if c in record})
        run.metrics(metrics)
        run.table(f"{key}.csv", data)
    return log


def _plausibility(run: TrackedRun, data: pd.DataFrame, logged: Logged) -> None:
    rows = data[(data["subset"] == "all") & (data["rule"] == "matched")]
    run.metrics({f"plausibility.{r['method']}.{name}": r[column] for r in rows.to_dict("records")
                 for name, column in (("auroc", "auroc"), ("f1_matched", "f1"))})
    run.table("plausibility.csv", data)


def _student_bundle(run: TrackedRun, data, logged: Logged) -> None:
    folder = logged.catalog.get(f"{logged.namespace}.bundle").path
    serving.register_bundle(run, folder, data.card["classifier"], f"{logged.experiment}-{logged.namespace}")


STUDENT = RunKind(
    name=STUDENT, matches=lambda namespace: namespace.startswith(STUDENT_PREFIX),
    experiment=lambda params: params.amortize_experiment,
    run_name=lambda namespace, params: namespace,
    tags=lambda namespace, params: {"task": namespace.removeprefix(STUDENT_PREFIX)},
    params=lambda namespace, params: {"task": namespace.removeprefix(STUDENT_PREFIX),
                                      **params.blocks("explained_layer"), "amortize": params.amortize.as_params()},
    outputs={"student_variants": table("variants.csv"), "table": table("table.csv"),
             "fidelity": _headline("fidelity", ("spearman", "top10", "top20", "top5_tokens")),
             "faithfulness": _headline("faithfulness", ("comprehensiveness", "sufficiency")),
             "cost": _headline("cost", ("examples_per_second", "ratio_to_forward")),
             "plausibility": _plausibility, "report": text("report.md"), "bundle": _student_bundle})


# ----------------------------------------------------------------------------------------------------
# A rationale file, and AFN
# ----------------------------------------------------------------------------------------------------

EXTERNAL = RunKind(
    name="evaluate_external", matches=lambda namespace: namespace == "evaluate_external",
    experiment=lambda params: params.external.mlflow_experiment,
    run_name=lambda namespace, params: params.external.title,
    tags=lambda namespace, params: {key: str(getattr(params.external, key))
                                    for key in ("file", "classifier_task", "expnet_fold")},
    params=lambda namespace, params: params.external_parameters(),
    outputs={"metrics_table": metric_table("external_metrics.csv"), "explain_failures": table("explain_failures.csv"),
             "explain_cost": table("explain_cost.csv"), "counts": lambda run, data, logged: run.metrics(data),
             "metrics_plot": figure("metrics.png")})

AFN = RunKind(
    name="afn", matches=lambda namespace: namespace == "afn",
    experiment=lambda params: params.afn_tracking[0],
    artifact_location=lambda params: params.afn_tracking[1],
    run_name=lambda namespace, params: "afn", tags=lambda namespace, params: {},
    params=lambda namespace, params: params.afn_parameters(),
    outputs={"headline": lambda run, data, logged: run.metrics({k: v for k, v in data.items() if k != "encoder"}),
             "layer_comparison": both(lambda run, data, logged: run.layer_metrics(data),
                                      table("layer_comparison.csv")),
             "report": text("afn_report.md"), "strength_by_layer_plot": figure("plots/strength_by_layer.png"),
             "rh_by_layer_plot": figure("plots/rh_by_layer.png"),
             "shift_heatmaps_plot": figure("plots/shift_heatmaps.png")})

RUN_KINDS = (FOLD, ABLATION, STUDENT, EXTERNAL, AFN)


def kind_of(namespace: str) -> RunKind | None:
    """The kind of run a namespace's outputs are logged to (None: no run of its own)."""
    return next((kind for kind in RUN_KINDS if kind.matches(namespace)), None)
