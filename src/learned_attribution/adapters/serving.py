"""A trained fold or student as an MLflow pyfunc model: load it with `mlflow.pyfunc.load_model`, serve it with
`mlflow models serve -m models:/<experiment>-<fold>/<version> --env-manager local`.

The model is saved from code (`serving_model.py`, MLflow's models-from-code: no `python_model.pkl`, so loading a
model from a shared artifact store runs only this package's reviewed source). Its one artifact, `fold`, is a
self-contained fold folder: `fold.json`, `expnet_paper/`, `expnet_plus/` (safetensors + JSON, see
core/models/artifacts.py) and `classifier/` (the held-out task's classifier, saved with `save_pretrained`), read by
`learned_attribution.services.explain.open_explainer`. Its requirements pin the versions installed when it was saved
(this package included: serve it with `--env-manager local` from an environment where the project is installed,
since the package is not on a public index).

Input: a table with a `text` column (one text per row) and optional `target` and `contrast` columns (per row, the
class to explain and a foil class, each a class name or index as a string, `explain(target=, contrast=)`; absent or
all empty: the predicted class), declared in the signature. A column the model does not read is refused in one line
where the model sees it; MLflow's schema enforcement (`mlflow models serve`, `load_model(...).predict`) drops a
column its signature does not declare before the model sees it, saying so only in the server's log, so a misspelt
`target` there explains the predicted class (the answer's `explained_label` and `explains_predicted` say so).
Optional parameter `methods` (comma-separated method names; empty: ExpNet+ and the fold's best baseline). Output:
one JSON object per text, the CLI's JSONL record (`id` = row number, text, words, predicted, label, probability,
truncated, per-word scores and rationale per method). The device is `auto` unless LEARNED_ATTRIBUTION_DEVICE says
otherwise. Bad input (an unknown method, an empty text, no `text` column) answers HTTP 400 with one line, the
project's own message, and no stack trace; any other failure answers 500 with one line naming the exception (its
trace goes to the server's log). Requests are answered on parallel threads; `FoldExplainer` makes them take turns on
the one classifier.
"""
from __future__ import annotations

import logging
import os
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import mlflow.pyfunc
import pandas as pd
from mlflow.exceptions import MlflowException
from mlflow.models import infer_signature
from mlflow.protos.databricks_pb2 import INTERNAL_ERROR, INVALID_PARAMETER_VALUE
from mlflow.types import ColSpec, Schema

from learned_attribution.services import bundle as bundles
from learned_attribution.services.explain import open_explainer
from learned_attribution.services.tracking.run import TrackedRun

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


INPUT_COLUMNS = ("text", "target", "contrast")  # `text` required, the classes optional


def input_schema() -> Schema:
    """The served model's input columns: `text`, and the optional `target` and `contrast`."""
    return Schema([ColSpec("string", "text"), ColSpec("string", "target", required=False),
                   ColSpec("string", "contrast", required=False)])


def _classes(frame: pd.DataFrame, column: str) -> list | None:
    """A class column as one entry per row (None where the column is absent or wholly empty)."""
    if column not in frame.columns:
        return None
    values = [None if pd.isna(v) else v for v in frame[column].tolist()]
    return None if all(v is None for v in values) else values


class BundleExplainerModel(mlflow.pyfunc.PythonModel):
    """pyfunc wrapper of a bundle's explainer (`FoldExplainer` or `StudentExplainer`; see the module docstring for
    input, output and errors)."""

    def load_context(self, context) -> None:
        self.explainer = open_explainer(context.artifacts["fold"],
                                        device=os.environ.get("LEARNED_ATTRIBUTION_DEVICE", "auto"))

    def predict(self, context, model_input: pd.DataFrame, params: dict[str, Any] | None = None) -> list[dict]:
        try:
            return self._predict(model_input, params)
        except ValueError as error:  # InputError included: the caller's input is at fault
            raise ServedError(str(error), INVALID_PARAMETER_VALUE) from None
        except Exception as error:
            logger.exception("explaining a request failed")
            raise ServedError(f"internal error ({type(error).__name__}: {error})", INTERNAL_ERROR) from None

    def _predict(self, model_input: pd.DataFrame, params: dict[str, Any] | None) -> list[dict]:
        target = contrast = None
        if isinstance(model_input, pd.DataFrame):
            if "text" not in model_input.columns:
                raise ValueError(f"input needs a 'text' column; got columns {list(model_input.columns)}")
            unknown = [c for c in model_input.columns if c not in INPUT_COLUMNS]
            if unknown:  # a model loaded without its signature: the same refusal as the schema's
                raise ValueError(f"unknown input column(s) {unknown}; the model reads {list(INPUT_COLUMNS)}")
            texts = model_input["text"].astype(str).tolist()
            target, contrast = _classes(model_input, "target"), _classes(model_input, "contrast")
        else:
            texts = [str(t) for t in model_input]
        methods = [m.strip() for m in str((params or {}).get("methods") or "").split(",") if m.strip()] or None
        explanations = self.explainer.explain(texts, methods=methods, ids=[str(i) for i in range(len(texts))],
                                              target=target, contrast=contrast)
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


def save_model(bundle_folder: str | Path, classifier_folder: str | Path, path: str | Path) -> Path:
    """Write the pyfunc model folder of a fold's or student's bundle with its classifier (MLmodel, signature and
    input example inferred from a real prediction)."""
    path = Path(path)
    with tempfile.TemporaryDirectory() as scratch:
        bundle = bundles.copy_for_serving(bundle_folder, classifier_folder, Path(scratch) / "fold")
        explainer = open_explainer(bundle, device="cpu")
        texts = INPUT_EXAMPLE["text"].tolist()
        output = [e.record() for e in explainer.explain(texts, ids=[str(i) for i in range(len(texts))])]
        signature = infer_signature(INPUT_EXAMPLE, output, params={"methods": ""})
        signature.inputs = input_schema()
        mlflow.pyfunc.save_model(str(path), python_model=str(MODEL_CODE), artifacts={"fold": str(bundle)},
                                 signature=signature, input_example=INPUT_EXAMPLE,
                                 pip_requirements=pinned_requirements())
    return path


def register_bundle(run: TrackedRun, bundle_folder: str | Path, classifier_folder: str | Path, name: str) -> str:
    """Log the bundle's pyfunc model under the run's artifact path `explainer` and register it as a new version of
    `name`; returns the version."""
    student = bundles.is_student(bundle_folder)
    described = ("an amortized student of an expensive method, beside the baselines" if student else
                 "ExpNet+, the paper's ExpNet and baselines")
    with tempfile.TemporaryDirectory() as scratch:
        model = save_model(bundle_folder, classifier_folder, Path(scratch) / MODEL_ARTIFACT_PATH)
        return run.register(model, MODEL_ARTIFACT_PATH, name, f"learned-attribution explainer ({described})")
