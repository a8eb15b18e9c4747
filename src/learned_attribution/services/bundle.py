"""The folder of a trained explainer, a *bundle*: a fold (`data/06_models/heldout_<task>/`, written by the crosstask
pipeline) or an amortized student (`data/06_models/student_<task>/`, the amortize pipeline or `learned-attribution
fit --output`). This module alone knows the layout; it reads, writes and validates bundles, and the Kedro dataset
`adapters.kedro_datasets.BundleDataset` saves and loads them through it.

    fold.json                 the card: kind (fold | student), the learned explainers it holds, the best baseline
                              (a student's: its teacher) with every baseline's settings, the matched budget rho,
                              the layer read, the held-out task (a student's: its task, or none) and its classifier
    expnet_paper/, expnet_plus/, expnet_plus_shape_free/   a fold's learned explainers (core/models/artifacts.py)
    student/                  a student's network (core/models/artifacts.py), with its tables and report beside it
    classifier/               a bundle copied for serving carries its classifier (save_pretrained)
    fewshot/                  a fold's few-shot choice, written by the fewshot pipeline (`FewShotChoice`,
                              core/models/learned/fewshot.py): choice.json (per k the prior, its variant and the
                              schedule) and priors/<variant>/, each prior it names other than the fold's own ExpNet+;
                              what `fit_rationales` refits with. Not part of the bundle: a crosstask rerun removes it.

A bundle is written whole into a partial folder that is renamed into place, so a folder that exists is complete.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from learned_attribution.core.atomic import atomic_folder
from learned_attribution.core.errors import InputError
from learned_attribution.core.models import artifacts
from learned_attribution.core.models.learned import LearnedModel
from learned_attribution.core.models.learned.fewshot import FOLD_PRIOR, FewShotChoice
from learned_attribution.core.models.loading import TrainedClassifier, load_classifier, looks_like_path
from learned_attribution.core.tasks import FOLD_PREFIX, FOLDS, TASKS, held_out_task
from learned_attribution.core.explainers.learned import FOLD_LEARNED, PAPER_EXPNET, STUDENT

DEFAULT_MODELS_DIR = Path("data/06_models")
CARD = "fold.json"
SHAPE_FREE = "expnet_plus_shape_free"  # the fold's best shape-free variant, for classifiers of other shapes
CLASSIFIER = "classifier"
CLASSIFIER_PREFIX = "classifier_"  # a task's classifier in the models folder: classifier_<task>
FEWSHOT = "fewshot"  # a fold's few-shot choice (the fewshot pipeline's): FEWSHOT_CHOICE and FEWSHOT_PRIORS/<name>/
FEWSHOT_CHOICE = "choice.json"
FEWSHOT_PRIORS = "priors"


@dataclass
class Bundle:
    """A trained explainer's folder in memory: its card and learned models (a fold's two and its shape-free
    variant, or a student), and the tables a student carries (variants, fidelity, ...)."""

    card: dict[str, Any]
    learned: dict[str, LearnedModel]
    shape_free: LearnedModel | None = None
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    report: str | None = None

    @property
    def budget(self) -> dict[str, float]:
        """A fold's matched budget and the paper's ExpNet's own-rule thresholds (what scoring a new rationale set
        with the fold needs)."""
        expnet = self.learned[PAPER_EXPNET]
        return {"rho": float(self.card["rho"]), "threshold": float(expnet.threshold),
                "calibrated_threshold": float(expnet.calibrated_threshold)}


def fold_card(*, fold: str, best_baseline: str, best_baseline_auroc: float | None, baselines: Mapping[str, Any],
              rho: float, layer: int) -> dict[str, Any]:
    """A fold's card."""
    return {"fold": fold, "held_out_task": held_out_task(fold), "best_baseline": best_baseline,
            "best_baseline_auroc": best_baseline_auroc,
            "baselines": {name: dict(settings or {}) for name, settings in baselines.items()},
            "rho": float(rho), "layer": int(layer)}


def student_card(*, teacher: str, teacher_settings: Mapping[str, Any], classifier: TrainedClassifier, rho: float,
                 layer: int, task: str | None = None) -> dict[str, Any]:
    """A student's card: its learned explainer is the student, the best baseline shown beside it is its teacher
    (with its settings), rationales take the top-k share `rho`; `classifier` is the one it is bound to."""
    return {"kind": STUDENT, "learned": [STUDENT], "held_out_task": task,
            "classifier": None if classifier.path is None else str(Path(classifier.path).resolve()),
            "best_baseline": teacher, "baselines": {teacher: dict(teacher_settings)},
            "teacher": {"method": teacher, "settings": dict(teacher_settings)}, "rho": rho, "layer": layer}


def learned_names(card: Mapping[str, Any]) -> tuple[str, ...]:
    """The learned explainers a card says its folder holds (a card without `learned` is a fold's)."""
    return tuple(card.get("learned", FOLD_LEARNED))


def read_card(folder: str | Path) -> dict[str, Any]:
    return json.loads((Path(folder) / CARD).read_text())


def is_student(folder: str | Path) -> bool:
    """Whether a bundle folder holds a student (else a fold), by its card."""
    return read_card(folder).get("kind") == STUDENT


def missing_parts(folder: str | Path) -> list[str]:
    """What a bundle folder lacks (its card, a learned explainer's complete folder); empty when it is complete."""
    folder = Path(folder)
    if not (folder / CARD).is_file():
        return [CARD, *FOLD_LEARNED]
    return [name for name in learned_names(read_card(folder)) if not artifacts.is_complete(folder / name)]


def is_complete(folder: str | Path) -> bool:
    return Path(folder).is_dir() and not missing_parts(folder)


def read_bundle(folder: str | Path) -> Bundle:
    """The bundle in `folder` (its card, learned models, a fold's shape-free variant where it has one, a student's
    tables and report). An incomplete folder is an `InputError` naming what it lacks."""
    folder = Path(folder)
    missing = missing_parts(folder)
    if missing:
        raise InputError(f"no trained fold or student at {folder} (missing {', '.join(missing)}): run `kedro run "
                         "--pipeline crosstask` (or `--pipeline folds` once the classifiers are trained), or train a "
                         "student with `learned-attribution fit` or `kedro run --pipeline amortize`")
    card = read_card(folder)
    learned = {name: artifacts.load_learned(folder / name) for name in learned_names(card)}
    shape_free = artifacts.load_learned(folder / SHAPE_FREE) if artifacts.is_complete(folder / SHAPE_FREE) else None
    tables = {path.stem: _read_table(path) for path in sorted(folder.glob("*.csv"))}
    report = (folder / "report.md").read_text() if (folder / "report.md").is_file() else None
    return Bundle(card, learned, shape_free, tables, report)


def _read_table(path: Path) -> pd.DataFrame:
    """A bundle's CSV table; an empty table (a student's fidelity without a reference teacher: reference_factor 0) is
    written as an empty file, read back as an empty frame."""
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


def write_bundle(bundle: Bundle, folder: str | Path) -> Path:
    """Write `bundle` into `folder` whole and atomically: its learned models, shape-free variant, tables and
    report, and its card last."""
    with atomic_folder(folder) as partial:
        for name, model in bundle.learned.items():
            artifacts.write_learned(model, partial / name)
        if bundle.shape_free is not None:
            artifacts.write_learned(bundle.shape_free, partial / SHAPE_FREE)
        for name, table in bundle.tables.items():
            table.to_csv(partial / f"{name}.csv", index=False)
        if bundle.report is not None:
            (partial / "report.md").write_text(bundle.report)
        (partial / CARD).write_text(json.dumps(bundle.card, indent=2))
    return Path(folder)


def write_fewshot_choice(choice: FewShotChoice, folder: str | Path) -> Path:
    """Write `choice` into `folder` (a fold folder's `fewshot/`) whole and atomically: each prior it names other
    than the fold's own ExpNet+ in `priors/<name>/` (core/models/artifacts.py), then `choice.json`."""
    with atomic_folder(folder) as partial:
        for name, model in choice.priors.items():
            artifacts.write_learned(model, partial / FEWSHOT_PRIORS / name)
        (partial / FEWSHOT_CHOICE).write_text(json.dumps(choice.record(), indent=2))
    return Path(folder)


def read_fewshot_choice(folder: str | Path) -> FewShotChoice | None:
    """The few-shot choice in `folder` (a fold folder's `fewshot/`) with the priors it names, None where there is
    none (the fewshot pipeline has not run for the fold)."""
    folder = Path(folder)
    if not (folder / FEWSHOT_CHOICE).is_file():
        return None
    record = json.loads((folder / FEWSHOT_CHOICE).read_text())
    names = sorted({refit["prior"] for refit in record["refits"].values()} - {FOLD_PRIOR})
    return FewShotChoice.from_record(record, {name: artifacts.load_learned(folder / FEWSHOT_PRIORS / name)
                                              for name in names})


def copy_for_serving(folder: str | Path, classifier_folder: str | Path, destination: str | Path) -> Path:
    """A self-contained copy of a bundle (its card and learned explainers, a fold's shape-free variant; not a
    fold's ablation variants) with its classifier in `classifier/`."""
    folder, destination = Path(folder), Path(destination)
    destination.mkdir(parents=True, exist_ok=True)
    shutil.copy2(folder / CARD, destination / CARD)
    for name in (*learned_names(read_card(folder)), SHAPE_FREE):
        if (folder / name).is_dir():
            shutil.copytree(folder / name, destination / name)
    shutil.copytree(classifier_folder, destination / CLASSIFIER, ignore=shutil.ignore_patterns("*.partial"))
    return destination


# ----------------------------------------------------------------------------------------------------
# Finding bundles and classifiers by name
# ----------------------------------------------------------------------------------------------------

def trained_folds(models_dir: str | Path) -> list[str]:
    models_dir = Path(models_dir)
    return sorted(p.name for p in models_dir.glob(f"{FOLD_PREFIX}*") if (p / CARD).is_file()) \
        if models_dir.is_dir() else []


def missing_models_dir(models_dir: str | Path) -> str | None:
    """The problem when `models_dir` does not exist (typically: run outside the project root), else None."""
    if Path(models_dir).is_dir():
        return None
    return (f"models folder {models_dir} does not exist (working directory {Path.cwd()}): run from the project root "
            "or give the folder of the trained folds and classifiers with --models-dir (API: models_dir=...)")


def fold_folder(fold: str | Path, models_dir: str | Path = DEFAULT_MODELS_DIR) -> Path:
    """The complete folder of a trained fold: a fold name under `models_dir`, or a folder path (a served bundle,
    a student's folder). Every fault is an `InputError` naming the fold and what to do."""
    path = Path(fold).expanduser()
    if path.is_dir():
        folder = path
    elif str(fold) in FOLDS:
        folder = Path(models_dir) / str(fold)
        problem = missing_models_dir(models_dir)
        if problem:  # not "retrain": the folds are most likely elsewhere
            raise InputError(f"fold {fold}: {problem}")
    elif isinstance(fold, Path) or looks_like_path(str(fold)):
        raise InputError(f"fold folder {fold} does not exist (working directory {Path.cwd()}); or give a "
                         f"fold name: {list(FOLDS)}")
    else:
        trained = missing_models_dir(models_dir) or f"trained in {models_dir}: {trained_folds(models_dir) or 'none'}"
        raise InputError(f"unknown fold {str(fold)!r}; the folds are {list(FOLDS)} ({trained})")
    missing = missing_parts(folder)
    if missing:
        raise InputError(f"no trained fold at {folder} (missing {', '.join(missing)}): run `kedro run --pipeline "
                         "crosstask` in the project (or `kedro run --pipeline folds` once the classifiers are trained)")
    return folder


def run_predictions(models_dir: str | Path, task: str) -> Path:
    """Where the run whose models are in `models_dir` keeps `task`'s rationale examples with their roles:
    `07_model_output/rationale_predictions_<task>.parquet` beside the models folder."""
    return Path(models_dir).parent / "07_model_output" / f"rationale_predictions_{task}.parquet"


def run_test_ids(models_dir: str | Path, task: str) -> list[str] | None:
    """The rationale test examples of `task` in the run whose models are in `models_dir` (`run_predictions`), None
    where that run left none."""
    path = run_predictions(models_dir, task)
    if not path.is_file():
        return None
    predictions = pd.read_parquet(path, columns=["example_id", "role"])
    return predictions.loc[predictions["role"] == "rationale_test", "example_id"].astype(str).tolist()


def task_classifier(spec: str | Path | None, models_dir: str | Path = DEFAULT_MODELS_DIR,
                    default_task: str | None = None) -> TrainedClassifier:
    """A classifier by task name (the project's fine-tuned `classifier_<task>` under `models_dir`), folder saved
    with `save_pretrained`, or hub name; `default_task` when `spec` is None."""
    spec = default_task if spec is None else spec
    if spec is None:
        raise InputError("no classifier given and the fold names no held-out task")
    if str(spec) in TASKS:
        path = Path(models_dir) / f"{CLASSIFIER_PREFIX}{spec}"
        if not (path / "config.json").is_file():
            problem = missing_models_dir(models_dir)
            raise InputError(f"classifier {spec}: {problem}" if problem else
                             f"no trained {spec} classifier at {path}: run `kedro run --pipeline classifiers`")
        spec = path
    return load_classifier(spec, hint=f"a task ({', '.join(TASKS)}), a folder saved with save_pretrained, or a hub "
                                      "name")
