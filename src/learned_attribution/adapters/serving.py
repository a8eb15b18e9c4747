"""A trained fold as an MLflow pyfunc model: load it with `mlflow.pyfunc.load_model`, serve it with
`mlflow models serve -m models:/<experiment>-<fold>/<version> --env-manager local`.

The model is saved from code (`serving_model.py`, MLflow's models-from-code: no `python_model.pkl`, so loading a
model from a shared artifact store runs only this package's reviewed source). Its one artifact, `fold`, is a
self-contained fold folder: `fold.json`, `expnet_paper/`, `expnet_plus/` (safetensors + JSON, see
models/artifacts.py) and `classifier/` (the held-out task's classifier, saved with `save_pretrained`), read by
`learned_attribution.services.explain.FoldExplainer`. Its requirements pin the versions installed when it was saved
(this package included: serve it with `--env-manager local` from an environment where the project is installed,
since the package is not on a public index).

Input: a table with a `text` column (one text per row); optional parameter `methods` (comma-separated
method names; empty: ExpNet+ and the fold's best baseline). Output: one JSON object per text, the CLI's JSONL
record (`id` = row number, text, words, predicted, label, probability, truncated, per-word scores and rationale
per method). The device is `auto` unless LEARNED_ATTRIBUTION_DEVICE says otherwise. Bad input (an unknown
method, an empty text, no `text` column) answers HTTP 400 with one line, the project's own message, and no
stack trace; any other failure answers 500 with one line naming the exception (its trace goes to the server's
log). Requests are answered on parallel threads; `FoldExplainer` makes them take turns on the one classifier.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import mlflow.pyfunc
import pandas as pd
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import INTERNAL_ERROR, INVALID_PARAMETER_VALUE

from learned_attribution.services.explain import BUNDLED_CLASSIFIER, FOLD_CARD, LEARNED, SHAPE_FREE_FOLDER

logger = logging.getLogger(__name__)

MODEL_CODE = Path(__file__).with_name("serving_model.py")
# What a served model imports; each pinned to the version installed when the model is saved.
REQUIREMENTS = ("learned-attribution", "torch", "transformers", "safetensors", "mlflow", "pandas", "numpy")
INPUT_EXAMPLE = pd.DataFrame({"text": ["A gutsy and exhilarating movie .", "The plot is thin and the pacing slow ."]})
MODEL_ARTIFACT_PATH = "explainer"


class ServedError(MlflowException):
    """An error answered in one line. MLflow's scoring server rewrites an error's message to "Failed to predict
    data '<the whole request>'. Error: ..." before answering; this error keeps its own message."""

    def __init__(self, message: str, error_code: int):
        super().__init__(" ".join(str(message).split()), error_code=error_code)

    @property
    def message(self) -> str:
        return self._message

    @message.setter
    def message(self, value: str) -> None:
        if not hasattr(self, "_message"):  # the first assignment (MlflowException.__init__) is the message
            self._message = value


class FoldExplainerModel(mlflow.pyfunc.PythonModel):
    """pyfunc wrapper of `FoldExplainer` (see the module docstring for input, output and errors)."""

    def load_context(self, context) -> None:
        from learned_attribution.services.explain import FoldExplainer

        self.explainer = FoldExplainer.from_fold(context.artifacts["fold"],
                                                 device=os.environ.get("LEARNED_ATTRIBUTION_DEVICE", "auto"))

    def predict(self, context, model_input: pd.DataFrame, params: dict[str, Any] | None = None) -> list[dict]:
        try:
            return self._predict(model_input, params)
        except ValueError as error:  # ExplainInputError included: the caller's input is at fault
            raise ServedError(str(error), INVALID_PARAMETER_VALUE) from None
        except Exception as error:
            logger.exception("explaining a request failed")
            raise ServedError(f"internal error ({type(error).__name__}: {error})", INTERNAL_ERROR) from None

    def _predict(self, model_input: pd.DataFrame, params: dict[str, Any] | None) -> list[dict]:
        if isinstance(model_input, pd.DataFrame):
            if "text" not in model_input.columns:
                raise ValueError(f"input needs a 'text' column; got columns {list(model_input.columns)}")
            texts = model_input["text"].astype(str).tolist()
        else:
            texts = [str(t) for t in model_input]
        methods = [m.strip() for m in str((params or {}).get("methods") or "").split(",") if m.strip()] or None
        explanations = self.explainer.explain(texts, methods=methods, ids=[str(i) for i in range(len(texts))])
        return [e.record() for e in explanations]


def pinned_requirements() -> list[str]:
    """`name==version` of each of `REQUIREMENTS` as installed now (a local version label such as +cpu dropped,
    so a CUDA build satisfies the pin too)."""
    pins = []
    for name in REQUIREMENTS:
        try:
            pins.append(f"{name}=={version(name).split('+')[0]}")
        except PackageNotFoundError:
            pins.append(name)
    return pins


def bundle_fold(fold_folder: str | Path, classifier_folder: str | Path, destination: str | Path) -> Path:
    """A self-contained copy of a fold folder (without the ablation's variants), or of a student's folder, with its
    classifier."""
    fold_folder, destination = Path(fold_folder), Path(destination)
    destination.mkdir(parents=True, exist_ok=True)
    shutil.copy2(fold_folder / FOLD_CARD, destination / FOLD_CARD)
    learned = json.loads((fold_folder / FOLD_CARD).read_text()).get("learned", LEARNED)
    for name in (*learned, SHAPE_FREE_FOLDER):
        if (fold_folder / name).is_dir():  # a fold saved before issue 12 has no shape-free variant
            shutil.copytree(fold_folder / name, destination / name)
    shutil.copytree(classifier_folder, destination / BUNDLED_CLASSIFIER,
                    ignore=shutil.ignore_patterns("*.partial"))
    return destination


def save_fold_model(fold_folder: str | Path, classifier_folder: str | Path, path: str | Path) -> Path:
    """Write the pyfunc model folder (MLmodel, signature and input example inferred from a real prediction)."""
    from mlflow.models import infer_signature

    from learned_attribution.services.explain import FoldExplainer

    path = Path(path)
    with tempfile.TemporaryDirectory() as scratch:
        bundle = bundle_fold(fold_folder, classifier_folder, Path(scratch) / "fold")
        explainer = FoldExplainer.from_fold(bundle, device="cpu")
        texts = INPUT_EXAMPLE["text"].tolist()
        output = [e.record() for e in explainer.explain(texts, ids=[str(i) for i in range(len(texts))])]
        signature = infer_signature(INPUT_EXAMPLE, output, params={"methods": ""})
        mlflow.pyfunc.save_model(str(path), python_model=str(MODEL_CODE), artifacts={"fold": str(bundle)},
                                 signature=signature, input_example=INPUT_EXAMPLE,
                                 pip_requirements=pinned_requirements())
    return path


def log_and_register(client, run_id: str, fold_folder: str | Path, classifier_folder: str | Path,
                     registered_name: str) -> str:
    """Log the fold's (or a student's) pyfunc model under the run's artifact path `explainer` and register it as a
    new version of `registered_name`; returns the version."""
    from mlflow.exceptions import MlflowException

    with tempfile.TemporaryDirectory() as scratch:
        model = save_fold_model(fold_folder, classifier_folder, Path(scratch) / MODEL_ARTIFACT_PATH)
        client.log_artifacts(run_id, str(model), MODEL_ARTIFACT_PATH)
    try:
        kind = json.loads((Path(fold_folder) / FOLD_CARD).read_text()).get("kind")
        described = ("an amortized student of an expensive method, beside the baselines" if kind == "student" else
                     "ExpNet+, the paper's ExpNet and baselines")
        client.create_registered_model(registered_name, description=f"learned-attribution explainer ({described})")
    except MlflowException as error:
        if "RESOURCE_ALREADY_EXISTS" not in str(error.error_code):
            raise
    source = f"{client.get_run(run_id).info.artifact_uri}/{MODEL_ARTIFACT_PATH}"
    version = client.create_model_version(registered_name, source=source, run_id=run_id)
    return version.version
