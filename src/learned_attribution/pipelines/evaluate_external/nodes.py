"""Nodes of `evaluate_external`: score a trained fold's ExpNet and every configured baseline against a
user's JSONL rationale file, explaining a chosen task's classifier (format: docs/external_rationales.md).

The file path, the classifier's task and the fold are run-time parameters
(`kedro run --pipeline evaluate_external --params "evaluate_external.file=...,..."`), so the file is
read inside a node (errors name the file and line) rather than through a static catalog entry.
"""
from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from learned_attribution.core.atomic import probe_writable
from learned_attribution.core.data.projection import project_to_subwords
from learned_attribution.core.data.schema import EXAMPLE_COLUMNS
from learned_attribution.adapters.kedro_datasets import TrainedClassifier
from learned_attribution.services.evaluation import METRIC_COLUMNS, gold_labels, rationale_test_examples
from learned_attribution.core.models.runner import Compute, predict_proba
from learned_attribution.core.models.learned import LearnedExplainer
from learned_attribution.core.tasks import FOLD_PREFIX, TASKS

logger = logging.getLogger(__name__)

EXTERNAL_ROLE = "rationale_test"  # the role the crosstask scoring functions read
EXTRA_COLUMNS = ["classifier_task", "file"]  # provenance appended to the crosstask metrics table
REQUIRED_KEYS = ("words", "rationale", "label")


# Optional settings and their defaults (also in parameters_evaluate_external.yml). Kept here too because
# Kedro merges `--params` into a non-base environment's config and then replaces base's top-level keys
# (its destructive base/env merge): `kedro run --env smoke --params evaluate_external.file=...` would
# otherwise leave only the keys given on the command line.
OPTIONAL_SETTINGS = {"max_examples": None, "batch_size": 64, "mlflow_experiment": "external"}
REQUIRED_SETTINGS = ("file", "classifier_task", "expnet_fold")


def external_settings(settings: dict[str, Any] | None) -> dict[str, Any]:
    """`params:evaluate_external` with the optional settings' defaults filled in; a missing required
    setting raises naming it."""
    settings = dict(settings or {})
    missing = [key for key in REQUIRED_SETTINGS if settings.get(key) in (None, "")]
    if missing:
        raise ValueError(f"parameter(s) {', '.join('evaluate_external.' + k for k in missing)} not set; pass them "
                         f'with kedro run --pipeline evaluate_external --params "evaluate_external.file=...,'
                         f'evaluate_external.classifier_task=...,evaluate_external.expnet_fold=..."')
    return {**OPTIONAL_SETTINGS, **settings}


def check_external_outputs(settings: dict[str, Any] | None, output_folders: list[str] | None,
                           mlflow_settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """The pipeline's first node: `external_settings(settings)` once every output can be written. Each folder of
    parameter `external_outputs` (the metrics partitions' and the node timings', under the environment's data root)
    is made if missing and probed with a small file, and the MLflow store is checked, so that a read-only or full
    data/ or an unusable store stops the run here, not at the last save after all the work."""
    settings = external_settings(settings)
    for folder in output_folders or []:
        folder = Path(folder)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            probe_writable(folder)
        except OSError as error:
            raise OSError(f"parameter external_outputs: cannot write in {folder} ({error.strerror or error}): "
                          "evaluate_external would fail at its last save; free space or fix the permissions") \
                from error
    from learned_attribution.services import tracking

    tracking.check_store(tracking.resolve_tracking_uri((mlflow_settings or {}).get("tracking_uri")))
    return settings


class ExternalRationaleError(ValueError):
    """A record of an external rationale file that cannot be used; the message names the file and line."""


def _is_int(value: Any) -> bool:
    # JSON true/false load as bool, a subclass of int: not accepted as labels or rationale entries.
    return isinstance(value, int) and not isinstance(value, bool)


def parse_record(record: Any, n_classes: int = 2) -> str | None:
    """The reason a decoded JSON record does not fit the format, or None when it does."""
    if not isinstance(record, dict):
        return f"expected a JSON object, got {type(record).__name__}"
    missing = [key for key in REQUIRED_KEYS if key not in record]
    if missing:
        return f"missing key(s) {missing}; every line needs {list(REQUIRED_KEYS)} (and optionally 'id')"
    words, rationale, label = record["words"], record["rationale"], record["label"]
    if not isinstance(words, list) or not words:
        return "'words' must be a non-empty list of strings"
    bad_words = [i for i, word in enumerate(words) if not isinstance(word, str) or not word.strip()]
    if bad_words:
        return f"'words' entries at positions {bad_words[:5]} are not non-empty strings"
    if not isinstance(rationale, list):
        return "'rationale' must be a list of 0/1, one per word"
    if len(rationale) != len(words):
        return f"'rationale' has {len(rationale)} entries but 'words' has {len(words)}"
    bad_marks = [i for i, mark in enumerate(rationale) if not _is_int(mark) or mark not in (0, 1)]
    if bad_marks:
        return f"'rationale' entries must be 0 or 1 (positions {bad_marks[:5]} are not)"
    if not _is_int(label) or not 0 <= label < n_classes:
        return f"'label' must be an integer class in 0..{n_classes - 1}, got {label!r}"
    if "id" in record and (isinstance(record["id"], bool) or not isinstance(record["id"], str | int)):
        return f"'id' must be a string or an integer, got {record['id']!r}"
    return None


def parse_external_rationales(text: str, source: str, n_classes: int = 2) -> pd.DataFrame:
    """Parse JSONL `text` (one object per line: `words`, `rationale`, `label`, optional `id`) into the
    project's example schema. Blank lines are skipped; any other bad line raises
    `ExternalRationaleError` naming `source` and the 1-based line number. Examples without an `id`
    get `line<N>`; ids must be unique."""
    def records():
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as error:
                raise ExternalRationaleError(f"{source}, line {number}: not valid JSON ({error.msg} at column "
                                             f"{error.colno})") from None

    return _examples(records(), source, "line", n_classes)


def _examples(records, source: str, unit: str, n_classes: int) -> pd.DataFrame:
    """Validated (number, record) pairs -> the example schema; errors name `source` and `<unit> <number>`."""
    rows, first_of = [], {}
    for number, record in records:
        reason = parse_record(record, n_classes)
        if reason:
            raise ExternalRationaleError(f"{source}, {unit} {number}: {reason}")
        example_id = str(record["id"]) if record.get("id") is not None else f"{unit}{number}"
        if example_id in first_of:
            raise ExternalRationaleError(f"{source}, {unit} {number}: id {example_id!r} already used on {unit} "
                                         f"{first_of[example_id]}; ids must be unique")
        first_of[example_id] = number
        rows.append({"example_id": example_id, "task": "external", "split": "external", "role": EXTERNAL_ROLE,
                     "text": " ".join(record["words"]), "words": list(record["words"]),
                     "word_rationale": list(record["rationale"]), "label": record["label"]})
    if not rows:
        raise ExternalRationaleError(f"{source}: no examples (the file is empty or holds only blank lines)")
    return pd.DataFrame(rows, columns=EXAMPLE_COLUMNS)


def load_datasets_rationales(path: Path, n_classes: int = 2) -> pd.DataFrame:
    """A rationale set through Hugging Face `datasets`: a `save_to_disk` folder (`load_from_disk`, one split),
    or a .csv / .parquet / .json file (`load_dataset(<format>, data_files=...)`). Rows need `words`,
    `rationale` and `label` (optional `id`); in CSV, `words` and `rationale` are JSON lists in their cells.
    Errors name the source and the row (1-based)."""
    import datasets

    source = str(path)
    if path.is_dir():
        loaded = datasets.load_from_disk(source)
        if isinstance(loaded, datasets.DatasetDict):
            if len(loaded) != 1:
                raise ExternalRationaleError(f"{source}: a DatasetDict with splits {sorted(loaded)}; save the one "
                                             "split to evaluate (`dataset[split].save_to_disk(...)`)")
            loaded = next(iter(loaded.values()))
    else:
        builder = {".csv": "csv", ".parquet": "parquet", ".json": "json"}.get(path.suffix)
        if builder is None:
            raise ExternalRationaleError(f"{source}: unknown format {path.suffix!r}; use .jsonl, .json, .csv, "
                                         ".parquet or a datasets save_to_disk folder")
        loaded = datasets.load_dataset(builder, data_files=source, split="train")

    def records():
        for number, record in enumerate(loaded, start=1):
            record = dict(record)
            for key in ("words", "rationale"):
                if isinstance(record.get(key), str):
                    try:
                        record[key] = json.loads(record[key])
                    except json.JSONDecodeError:
                        raise ExternalRationaleError(f"{source}, row {number}: '{key}' is text that is not a JSON "
                                                     "list") from None
            yield number, record

    return _examples(records(), source, "row", n_classes)


def read_external_rationales(settings: dict[str, Any]) -> pd.DataFrame:
    """The file named by parameter `evaluate_external.file` (relative to the working directory, normally
    the project root), parsed and validated."""
    settings = external_settings(settings)
    path = Path(settings["file"])
    if not path.exists():
        raise FileNotFoundError(f"parameter evaluate_external.file: no such file {path} "
                                f"(working directory {Path.cwd()})")
    if path.is_file() and path.suffix == ".jsonl":
        examples = parse_external_rationales(path.read_text(encoding="utf-8"), str(path))
    else:
        examples = load_datasets_rationales(path)
    n_empty = int(examples["word_rationale"].map(lambda r: sum(r) == 0).sum())
    logger.info("%s: %d examples, %d of them with no rationale word", path, len(examples), n_empty)
    if n_empty == len(examples):  # checked here: every later node would work on nothing
        raise ExternalRationaleError(f"{path}: none of the {len(examples)} examples marks a rationale word (every "
                                     "'rationale' is all 0): nothing to score, plausibility needs at least one "
                                     "marked word per example (SPEC §1)")
    if n_empty:
        logger.warning("%s: %d of %d examples have no rationale word: skipped (not scored, SPEC §1)", path, n_empty,
                       len(examples))
    return examples


def fold_held_out_task(fold: str) -> str:
    """heldout_sst2 -> sst2, checking that `fold` names one of the folds."""
    task = fold[len(FOLD_PREFIX):] if fold.startswith(FOLD_PREFIX) else None
    if task not in TASKS:
        raise ValueError(f"parameter evaluate_external.expnet_fold must be one of "
                         f"{[FOLD_PREFIX + t for t in TASKS]}, got {fold!r}")
    return task


def select_fold_artifacts(settings: dict[str, Any], **artifacts: Any
                          ) -> tuple[TrainedClassifier, LearnedExplainer, Any, dict[str, float]]:
    """Pick the chosen task's classifier and the chosen fold's ExpNet, ExpNet+ and budget.

    `artifacts` holds `classifier_<task>`, `expnet_<fold>`, `expnet_plus_<fold>` and `budget_<fold>` for every
    task and fold
    (Kedro loads node inputs by name, so all are declared; only the chosen ones are returned). The
    matched-budget rho is the fold's; the calibrated threshold is the saved ExpNet's."""
    settings = external_settings(settings)
    task = settings["classifier_task"]
    if task not in TASKS:
        raise ValueError(f"parameter evaluate_external.classifier_task must be one of {list(TASKS)}, got {task!r}")
    fold = settings["expnet_fold"]
    held_out = fold_held_out_task(fold)
    classifier, expnet = artifacts[f"classifier_{task}"], artifacts[f"expnet_{fold}"]
    budget = dict(artifacts[f"budget_{fold}"])
    n_features = len(expnet.columns)
    n_heads = int(classifier.model.config.num_attention_heads)
    if n_features != 2 * n_heads:
        raise ValueError(f"{fold}'s ExpNet reads {n_features} attention features but the {task} classifier has "
                         f"{n_heads} heads ({2 * n_heads} features): they come from different encoders")
    if not np.isclose(budget.get("calibrated_threshold", expnet.calibrated_threshold), expnet.calibrated_threshold):
        logger.warning("%s: budget json says calibrated threshold %s, the saved ExpNet %s; using the ExpNet's",
                       fold, budget.get("calibrated_threshold"), expnet.calibrated_threshold)
    budget["calibrated_threshold"] = float(expnet.calibrated_threshold)
    if task != held_out:
        # ExpNet's training read this classifier's attention on its own task's rationale_train data.
        logger.warning("The %s classifier is not %s's held-out classifier (%s): ExpNet was trained on its attention",
                       task, fold, held_out)
    logger.info("Explaining the %s classifier with %s's ExpNet (rho %.3f, thresholds %s / %.3f)", task, fold,
                budget["rho"], budget.get("threshold"), budget["calibrated_threshold"])
    return classifier, expnet, artifacts[f"expnet_plus_{fold}"], budget


def marks_every_token(examples: pd.DataFrame) -> pd.Series:
    """Per example: whether its rationale marks every (non-special) token, where per-example AUROC is undefined."""
    return examples["token_labels"].map(lambda labels: bool((gold_labels(labels) == 1).all()))


def predict_external(examples: pd.DataFrame, classifier: TrainedClassifier, max_length: int,
                     settings: dict[str, Any], compute: dict[str, Any] | None = None, seed: int = 0) -> pd.DataFrame:
    """Project word rationales to subwords (classifier's tokenizer, `max_length`), keep the examples that will be
    scored (a rationale token left after truncation; the seeded `max_examples` cap, the very sample the later
    nodes draw with the same `seed`) and predict only those on the `compute` device: adds input_ids, word_ids,
    token_labels, truncated, predicted, probability (of the predicted class), correct."""
    settings = external_settings(settings)
    place = Compute.from_params(compute)
    place.place(classifier.model)
    n_classes = int(classifier.model.config.num_labels)
    too_high = examples[examples["label"] >= n_classes]
    if len(too_high):
        raise ExternalRationaleError(f"{settings['file']}: example {too_high['example_id'].iloc[0]!r} has label "
                                     f"{too_high['label'].iloc[0]} but the {settings['classifier_task']} classifier "
                                     f"has {n_classes} classes")
    file = settings["file"]
    projected = project_to_subwords(examples, classifier.tokenizer, max_length)
    # Counted after truncation: a rationale whose marked words were all cut off is empty for the metrics too.
    no_rationale = projected["token_labels"].map(lambda labels: int((np.asarray(labels) == 1).sum()) == 0)
    n_truncated = int(projected["truncated"].sum())
    if no_rationale.all():
        raise ExternalRationaleError(f"{file}: none of the {len(projected)} examples keeps a rationale token within "
                                     f"max_length={max_length} subwords ({n_truncated} truncated): nothing to score")
    logger.info("%s: %d of %d examples have no rationale token after projection to max_length=%d subwords "
                "(%d truncated): skipped, left out of the metrics (SPEC §1)", file, int(no_rationale.sum()),
                len(projected), max_length, n_truncated)
    # The cap before prediction, so that max_examples bounds the work; rationale_test_examples draws the same
    # seeded sample the explain and score nodes draw (they find no more than max_examples left and keep them all).
    scored = rationale_test_examples(projected, EXTERNAL_ROLE, settings["max_examples"], seed)
    if len(scored) < int((~no_rationale).sum()):
        logger.info("%s: max_examples=%s: a seeded sample of %d of the %d examples with a rationale is scored", file,
                    settings["max_examples"], len(scored), int((~no_rationale).sum()))
    all_tokens = marks_every_token(scored)
    if all_tokens.any():
        logger.warning("%s: %d of %d scored examples mark every token as rationale: their per-example AUROC and "
                       "AUPRC are undefined (no token outside the rationale to rank below it), left out of auroc and "
                       "auprc and counted in n_auroc_undefined%s", file, int(all_tokens.sum()), len(scored),
                       "; with every example so, auroc and auprc are NaN and only F1, precision and recall are "
                       "defined" if all_tokens.all() else "")
    probabilities = predict_proba(classifier.model, list(scored["input_ids"]), settings["batch_size"],
                                  classifier.tokenizer.pad_token_id, place.bf16, desc=f"predict {Path(file).name}")
    scored["predicted"] = probabilities.argmax(1)
    scored["probability"] = probabilities.max(1)
    scored["correct"] = scored["predicted"] == scored["label"]
    logger.info("%s classifier: %d of %d scored external examples predicted correctly", settings["classifier_task"],
                int(scored["correct"].sum()), len(scored))
    return scored


def _crosstask_settings(crosstask: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    # The fold functions cap examples with max_test_examples; an external file has its own cap.
    return {**crosstask, "max_test_examples": settings.get("max_examples")}


def explain_external(classifier: TrainedClassifier, predictions: pd.DataFrame, expnet: LearnedExplainer, expnet_plus,
                     crosstask: dict[str, Any], settings: dict[str, Any], seed: int,
                     compute: dict[str, Any] | None = None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """ExpNet+, the paper's ExpNet and every baseline in `crosstask.baselines` on the file's examples with a
    rationale, exactly as
    a crosstask fold explains its held-out set (expensive methods on the seeded sample)."""
    settings = external_settings(settings)
    from learned_attribution.services.evaluation import explain_rationale_set

    return explain_rationale_set(classifier, predictions, expnet, expnet_plus, _crosstask_settings(crosstask, settings),
                                 seed, compute)


def external_faithfulness(classifier: TrainedClassifier, token_scores: pd.DataFrame, predictions: pd.DataFrame,
                          crosstask: dict[str, Any], compute: dict[str, Any] | None = None) -> pd.DataFrame:
    """ERASER comprehensiveness / sufficiency on the seeded sample, as in a crosstask fold."""
    from learned_attribution.services.evaluation import sample_faithfulness

    return sample_faithfulness(classifier, token_scores, predictions, crosstask["faithfulness"], compute)


def score_external(token_scores: pd.DataFrame, predictions: pd.DataFrame, faithfulness: pd.DataFrame,
                   budget: dict[str, float], expnet_plus, crosstask: dict[str, Any], settings: dict[str, Any],
                   seed: int) -> pd.DataFrame:
    """The crosstask metrics table for the file (fold = the ExpNet's fold, held_out_task = "external"),
    with the classifier's task and the file appended as columns."""
    settings = external_settings(settings)
    from learned_attribution.services.evaluation import score_rationale_set

    metrics = score_rationale_set(token_scores, predictions, faithfulness, budget, expnet_plus.calibrated_threshold,
                                  _crosstask_settings(crosstask, settings), seed, fold=settings["expnet_fold"],
                                  held_out_task="external")
    metrics = metrics.assign(classifier_task=settings["classifier_task"], file=str(settings["file"]))
    return metrics.reindex(columns=[*METRIC_COLUMNS, *EXTRA_COLUMNS])


def metrics_partition_name(settings: dict[str, Any]) -> str:
    """File name (no suffix) of one evaluation's metrics under 08_reporting/external/."""
    settings = external_settings(settings)
    return f"metrics_{Path(settings['file']).stem}_{settings['classifier_task']}_{settings['expnet_fold']}"


def metrics_partition(metrics: pd.DataFrame, settings: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """One CSV per (file, classifier task, fold), so evaluations of other files or folds are kept."""
    return {metrics_partition_name(settings): metrics}


def log_external_run(metrics: pd.DataFrame, predictions: pd.DataFrame, failures: pd.DataFrame,
                     cost: pd.DataFrame, budget: dict[str, float], settings: dict[str, Any], crosstask: dict[str, Any],
                     mlflow_settings: dict[str, Any], max_length: int, examples: pd.DataFrame,
                     saved_metrics: dict[str, Any]) -> None:
    """One MLflow run in experiment `settings['mlflow_experiment']` (explicit client, tracking URI from
    `mlflow.tracking_uri`): parameters, every metric (`method/rule/subset/metric`), example counts, the metrics
    CSV, the bar chart and the explainers' failures and cost as artifacts. A failure while logging marks the run
    FAILED and re-raises.

    The pipeline's last node: `saved_metrics` is the catalog's `evaluate_external.metrics` read back (partition
    name -> loader), so Kedro runs this only after the metrics CSV is saved, and a run marked FINISHED always has
    its output on disk; the partition of this evaluation must be there."""
    settings = external_settings(settings)
    partition = metrics_partition_name(settings)
    if partition not in (saved_metrics or {}):
        raise RuntimeError(f"{partition}.csv was not saved under 08_reporting/external (saved: "
                           f"{sorted(saved_metrics or {})[:5]}): no MLflow run is logged for an evaluation without "
                           "its output")
    from mlflow.entities import Metric, Param
    from mlflow.tracking import MlflowClient

    from learned_attribution.adapters.hooks import fold_metric_entries
    from learned_attribution.services.reporting import metrics_bar_chart

    from learned_attribution.services import tracking

    tracking_uri = tracking.resolve_tracking_uri(mlflow_settings.get("tracking_uri"))
    tracking.check_store(tracking_uri)
    experiment = settings.get("mlflow_experiment", "external")
    client = MlflowClient(tracking_uri=tracking_uri)
    experiment_id = tracking.experiment_id(client, experiment, tracking.default_artifact_location(tracking_uri, experiment))
    file, task, fold = str(settings["file"]), settings["classifier_task"], settings["expnet_fold"]
    run_id = client.create_run(experiment_id, run_name=f"{Path(file).stem}: {task} classifier, {fold} ExpNet",
                               tags={"file": file, "classifier_task": task, "expnet_fold": fold,
                                     **tracking.process_tags()}).info.run_id
    commit = tracking.git_commit(Path.cwd())
    if commit:
        client.set_tag(run_id, "mlflow.source.git.commit", commit)
    if Path(file).is_file():  # the rationale file with its SHA-256 (a datasets folder is named by the param)
        client.log_inputs(run_id, tracking.raw_file_inputs({"external_rationales": file}))
    try:
        all_tokens = marks_every_token(predictions)
        params = {"file": file, "file_resolved": str(Path(file).resolve()), "classifier_task": task,
                  "expnet_fold": fold, "fold_held_out_task": fold_held_out_task(fold),
                  "classifier_is_folds_held_out": task == fold_held_out_task(fold), "max_length": max_length,
                  "max_examples": settings.get("max_examples"),
                  **tracking.flatten({"crosstask": {k: crosstask[k] for k in ("baselines", "expensive", "expensive_sample_size",
                                                                    "layer", "bootstrap") if k in crosstask}})}
        numbers = {**fold_metric_entries(metrics),
                   **{f"budget/{k}": float(v) for k, v in budget.items() if isinstance(v, int | float)},
                   "examples/in_file": float(len(examples)),
                   "examples/with_rationale_words": float(examples["word_rationale"].map(sum).gt(0).sum()),
                   # predicted, explained and scored: a rationale token after truncation, within max_examples
                   "examples/scored": float(len(predictions)),
                   "examples/truncated": float(predictions["truncated"].sum()),
                   "examples/all_tokens_rationale": float(all_tokens.sum()),  # AUROC undefined on them
                   "examples/explain_failures": float(len(failures)),
                   "classifier/accuracy_scored": float(predictions["correct"].mean())}
        stamp = int(time.time() * 1000)
        param_list = [Param(k, str(v)[:6000]) for k, v in params.items()]
        metric_list = [Metric(k, v, stamp, 0) for k, v in numbers.items()]
        for start in range(0, len(param_list), 100):  # MLflow's per-batch limits
            client.log_batch(run_id, params=param_list[start:start + 100])
        for start in range(0, len(metric_list), 1000):
            client.log_batch(run_id, metrics=metric_list[start:start + 1000])
        client.log_text(run_id, metrics.to_csv(index=False), "external_metrics.csv")
        client.log_text(run_id, failures.to_csv(index=False), "explain_failures.csv")
        client.log_text(run_id, cost.to_csv(index=False), "explain_cost.csv")
        figure = metrics_bar_chart(metrics, f"{Path(file).name}: {task} classifier, {fold} ExpNet")
        client.log_figure(run_id, figure, "metrics.png")
        import matplotlib.pyplot as plt

        plt.close(figure)
    except Exception:
        client.set_terminated(run_id, status="FAILED")
        raise
    client.set_terminated(run_id, status="FINISHED")
    logger.info("MLflow: run %s in experiment %r at %s", run_id, experiment, tracking_uri)
