"""A trained fold or student as an MLflow pyfunc model: load it with `mlflow.pyfunc.load_model`, serve it with
`mlflow models serve -m models:/<experiment>-<fold>/<version> --env-manager local`.

The model is saved from code (`serving_model.py`, MLflow's models-from-code: no `python_model.pkl`, so loading a
model from a shared artifact store runs only this package's reviewed source). Its one artifact, `fold`, is a
self-contained fold folder: `fold.json`, `expnet_paper/`, `expnet_plus/` (safetensors + JSON, see
core/models/artifacts.py) and `classifier/` (the held-out task's classifier, saved with `save_pretrained`), read by
`learned_attribution.services.explain.open_explainer`. Its requirements pin the versions installed when it was saved
(this package included: serve it with `--env-manager local` from an environment where the project is installed,
since the package is not on a public index).

Input: one object per text, `{"inputs": [{"text": ..., "target": ..., "contrast": ...}]}` over HTTP, a list of
such objects or a table with those columns in Python: `text`, and the optional class to explain and foil class (a
class name or index, `explain(target=, contrast=)`; absent or all empty: the predicted class). The signature is
inferred from `predict`'s type hint (`Request`), so MLflow's column schema enforcement, which drops a column its
signature does not declare (a misspelt `target` would explain the predicted class), does not run: `requests` reads
the input and refuses a field the model does not read in one line. MLflow's server takes only the `inputs` form for
such a model. Optional parameter `methods` (comma-separated method names; empty: ExpNet+ and the fold's best
baseline). Output: one JSON object per text, the CLI's JSONL record (`id` = row number, text, words, predicted,
label, probability, truncated, per-word scores and rationale per method). The device is `auto` unless
LEARNED_ATTRIBUTION_DEVICE says otherwise. Bad input (an unknown method or field, an empty text, no `text`) answers
HTTP 400 with one line, the project's own message, and no stack trace; any other failure answers 500 with one line
naming the exception (its trace goes to the server's log). Requests are answered on parallel threads; `FoldExplainer` makes them take turns on
the one classifier.
"""
from __future__ import annotations

import logging
import os
import tempfile
import warnings
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import mlflow.pyfunc
import pandas as pd
import pydantic
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import INTERNAL_ERROR, INVALID_PARAMETER_VALUE

from learned_attribution.services import bundle as bundles
from learned_attribution.services.explain import open_explainer
from learned_attribution.services.tracking.run import TrackedRun

logger = logging.getLogger(__name__)

MODEL_CODE = Path(__file__).with_name("serving_model.py")
# What a served model imports; each pinned to the version installed when the model is saved.
REQUIREMENTS = ("learned-attribution", "torch", "transformers", "safetensors", "mlflow", "pandas", "numpy")
INPUT_EXAMPLE = [{"text": "A gutsy and exhilarating movie ."}, {"text": "The plot is thin and the pacing slow ."}]
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


class Request(pydantic.BaseModel):
    """One row of a request: the text, and optionally the class to explain and a foil class (each a class name or
    index). MLflow infers the served signature from this type (`predict`'s type hint): it declares the three fields
    and skips its column schema enforcement, which would drop a field it does not know and so explain the
    predicted class for a misspelt `target`. `requests` reads a request instead, refusing such a field."""

    text: str
    target: str | None = None
    contrast: str | None = None


INPUT_FIELDS = tuple(Request.model_fields)


def requests(model_input: Any) -> list[Request]:
    """A request (a table, or a list of objects or `Request`s) as one `Request` per row; a field the model does not
    read, a row without `text`, a text that is not a string or a class that is neither a string nor an integer is
    refused in one line naming the row."""
    if isinstance(model_input, pd.DataFrame):
        rows = model_input.astype(object).where(model_input.notna(), None).to_dict(orient="records")
    else:
        rows = [r.model_dump() if isinstance(r, Request) else r for r in model_input]
    fields = list(INPUT_FIELDS)
    unknown = sorted({name for row in rows if isinstance(row, dict) for name in row if name not in fields})
    if unknown:
        raise ValueError(f"unknown input field(s) {unknown}; the model reads {fields}")
    parsed = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or "text" not in row:
            raise ValueError(f"row {i} has no 'text' field; each row is an object with the fields {fields}")
        if not isinstance(row["text"], str):
            raise ValueError(f"row {i}: text must be a string, got {type(row['text']).__name__}")
        classes = {}
        for field in ("target", "contrast"):
            value = row.get(field)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (str, int))):
                raise ValueError(f"row {i}: {field} must be a class name or index, got {value!r}")
            classes[field] = None if value is None else str(value)
        parsed.append(Request(text=row["text"], **classes))
    return parsed


def _classes(rows: list[Request], field: str) -> list | None:
    """A class field as one entry per row (None where every row leaves it empty)."""
    values = [getattr(r, field) for r in rows]
    return None if all(v is None for v in values) else values


class BundleExplainerModel(mlflow.pyfunc.PythonModel):
    """pyfunc wrapper of a bundle's explainer (`FoldExplainer` or `StudentExplainer`; see the module docstring for
    input, output and errors)."""

    _skip_type_hint_validation = True  # `requests` reads the input and answers bad input in the project's words

    def load_context(self, context) -> None:
        self.explainer = open_explainer(context.artifacts["fold"],
                                        device=os.environ.get("LEARNED_ATTRIBUTION_DEVICE", "auto"))

    def predict(self, context, model_input: list[Request], params: dict[str, Any] | None = None) -> list[dict]:
        try:
            return self._predict(model_input, params)
        except ValueError as error:  # InputError included: the caller's input is at fault
            raise ServedError(str(error), INVALID_PARAMETER_VALUE) from None
        except Exception as error:
            logger.exception("explaining a request failed")
            raise ServedError(f"internal error ({type(error).__name__}: {error})", INTERNAL_ERROR) from None

    def _predict(self, model_input: Any, params: dict[str, Any] | None) -> list[dict]:
        rows = requests(model_input)
        texts = [r.text for r in rows]
        target, contrast = _classes(rows, "target"), _classes(rows, "contrast")
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
        # The signature comes from `predict`'s type hints (inputs: `Request`'s fields) and the example's `methods`.
        with warnings.catch_warnings():  # MLflow's advice to let it validate: `requests` validates instead
            warnings.filterwarnings("ignore", message="Decorate your function with")
            mlflow.pyfunc.save_model(str(path), python_model=str(MODEL_CODE), artifacts={"fold": str(bundle)},
                                     input_example=(INPUT_EXAMPLE, {"methods": ""}),
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
