"""The fold's pyfunc model (adapters/serving.py) on a tiny fold: saved from code (no pickle anywhere in the folder),
requirements pinned to what is installed, the loaded model answers exactly as the Python API, and bad input is
one line with the project's own message. The served HTTP side is in
tests/integration/test_serving.py."""
from __future__ import annotations

import json
from importlib.metadata import version

import mlflow.pyfunc
import pandas as pd
import pytest

from learned_attribution.services.explain import FoldExplainer
from learned_attribution.adapters.serving import ServedError, save_model

TEXTS = ["the movie was great fun .", "a slow , dull plot"]


@pytest.fixture
def saved_model(tiny_models_dir, tmp_path):
    return save_model(tiny_models_dir / "heldout_sst2", tiny_models_dir / "classifier_sst2", tmp_path / "model")


def test_the_model_is_saved_from_code_without_a_pickle(saved_model):
    files = [p for p in saved_model.rglob("*") if p.is_file()]
    assert not [p for p in files if p.suffix in (".pkl", ".pickle", ".bin", ".pt")], files
    assert (saved_model / "serving_model.py").is_file()
    mlmodel = (saved_model / "MLmodel").read_text()
    assert "model_code_path" in mlmodel and "python_model.pkl" not in mlmodel


def test_requirements_pin_the_installed_versions(saved_model):
    requirements = (saved_model / "requirements.txt").read_text().split()
    assert f"learned-attribution=={version('learned-attribution')}" in requirements
    assert f"torch=={version('torch').split('+')[0]}" in requirements
    assert all("==" in line for line in requirements), requirements


def test_the_loaded_model_answers_as_the_api_byte_for_byte(saved_model, tiny_models_dir):
    model = mlflow.pyfunc.load_model(str(saved_model))
    explainer = FoldExplainer.from_fold("heldout_sst2", models_dir=tiny_models_dir, device="cpu")
    for methods in (None, "expnet_paper,saliency"):
        params = None if methods is None else {"methods": methods}
        served = model.predict(pd.DataFrame({"text": TEXTS}), params=params)
        api = explainer.explain(TEXTS, methods=None if methods is None else methods.split(","), ids=["0", "1"])
        assert json.dumps(served) == json.dumps([e.record() for e in api])


def test_each_row_asks_for_its_class_through_declared_columns(saved_model, tiny_models_dir):
    model = mlflow.pyfunc.load_model(str(saved_model))
    declared = declared_fields(model.metadata.signature)
    assert declared == {"text": True, "target": False, "contrast": False}
    explainer = FoldExplainer.from_fold("heldout_sst2", models_dir=tiny_models_dir, device="cpu")
    frame = pd.DataFrame({"text": TEXTS, "target": ["negative", "1"], "contrast": ["positive", "0"]})
    served = model.predict(frame, params={"methods": "saliency,input_x_gradient"})
    api = explainer.explain(TEXTS, methods=["saliency", "input_x_gradient"], ids=["0", "1"],
                            target=["negative", "1"], contrast=["positive", "0"])
    assert json.dumps(served) == json.dumps([e.record() for e in api])
    assert [(r["explained_label"], r["contrast_label"]) for r in served] == [("negative", "positive"),
                                                                             ("positive", "negative")]


def test_a_class_index_may_be_a_json_integer(saved_model):
    model = mlflow.pyfunc.load_model(str(saved_model))
    by_number = model.predict([{"text": TEXTS[0], "target": 0}], params={"methods": "saliency"})
    by_string = model.predict([{"text": TEXTS[0], "target": "0"}], params={"methods": "saliency"})
    assert json.dumps(by_number) == json.dumps(by_string) and by_number[0]["explained_label"] == "negative"


def declared_fields(signature) -> dict[str, bool]:
    """{field: required} of the one object a served model's signature declares per row."""
    (row,) = signature.inputs.inputs
    return {p.name: p.required for p in row.type.properties}


@pytest.mark.parametrize("model_input", [
    pd.DataFrame({"text": TEXTS, "taget": ["negative", "negative"]}),
    [{"text": TEXTS[0]}, {"text": TEXTS[1], "taget": "negative"}],
])
def test_a_field_the_model_does_not_read_is_refused_not_dropped(saved_model, model_input):
    """MLflow's column schema enforcement drops an undeclared column; the loaded model refuses it in one line."""
    model = mlflow.pyfunc.load_model(str(saved_model))
    with pytest.raises(ServedError) as raised:
        model.predict(model_input)
    assert raised.value.message == "unknown input field(s) ['taget']; the model reads ['text', 'target', 'contrast']"


@pytest.mark.parametrize("frame, params, message", [
    (pd.DataFrame({"text": TEXTS}), {"methods": "shap"}, "unknown method 'shap'; available: ["),
    (pd.DataFrame({"text": ["   "]}), None, "text 0 is empty or whitespace only"),
    ([{"target": "negative"}], None, "row 0 has no 'text' field; each row is an object with the fields"),
    ([{"text": 3}], None, "row 0: text must be a string, got int"),
    ([{"text": "fine", "target": [1]}], None, "row 0: target must be a class name or index, got [1]"),
])
def test_bad_input_is_one_line_with_the_projects_message(saved_model, frame, params, message):
    model = mlflow.pyfunc.load_model(str(saved_model))
    with pytest.raises(ServedError) as raised:
        model.predict(frame, params=params)
    assert message in raised.value.message and "\n" not in raised.value.message
    assert raised.value.error_code == "INVALID_PARAMETER_VALUE"
    # The scoring server prefixes the message with the request; the answer keeps the project's line.
    raised.value.message = f"Failed to predict data '{frame}'. \nError: {raised.value.message}"
    answer = json.loads(raised.value.serialize_as_json())
    assert answer["message"].startswith(message.split(";")[0]) and "stack_trace" not in answer
