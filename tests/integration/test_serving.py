"""Each smoke fold's registered MLflow model: saved from code (no pickle), the loaded pyfunc gives the Python API's
scores, and a real `mlflow models serve` subprocess answers POST /invocations with them, also under concurrent
load (loopback only, bounded, stopped by process group), and answers bad input in one line. A student is served
the same way: a tiny text student's model (the encoder student and the attention student, built as
tests/conftest.py's `text_student_writer` builds one, no smoke run needed) under the same concurrent load, every
answer the Python API's."""
import sys
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from learned_attribution import FoldExplainer, StudentExplainer

pytestmark = pytest.mark.integration

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SMOKE_MODELS = PROJECT_ROOT / "data" / "smoke" / "06_models"
sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))
import serving_load  # noqa: E402  (the load benchmark's server and client)
TEXTS = ["A gutsy and exhilarating movie .", "this is a stupid , boring film"]


def latest_version(client: MlflowClient, name: str) -> str:
    versions = client.search_model_versions(f"name='{name}'")
    assert versions, f"no registered model {name}"
    return str(max(int(v.version) for v in versions))


def api_records(fold: str, methods=None) -> list[dict]:
    explainer = FoldExplainer.from_fold(fold, models_dir=SMOKE_MODELS, device="cpu")
    return [e.record() for e in explainer.explain(TEXTS, methods=methods, ids=["0", "1"])]


def assert_same(served: list[dict], expected: list[dict]) -> None:
    assert len(served) == len(expected)
    for got, want in zip(served, expected):
        assert got["words"] == want["words"] and got["predicted"] == want["predicted"]
        assert got["probability"] == pytest.approx(want["probability"], abs=1e-5)
        assert set(got["scores"]) == set(want["scores"])
        for method, scores in want["scores"].items():
            np.testing.assert_allclose(np.asarray(got["scores"][method], float), np.asarray(scores, float), atol=1e-5)
            assert got["rationale"][method] == want["rationale"][method]


@pytest.mark.parametrize("fold", ["heldout_hatexplain", "heldout_sst2", "heldout_cola"])
def test_the_registered_pyfunc_gives_the_api_scores(smoke_crosstask_run, smoke_tracking_uri, fold, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", smoke_tracking_uri)
    client = MlflowClient(smoke_tracking_uri)
    name = f"crosstask-smoke-{fold}"
    uri = f"models:/{name}/{latest_version(client, name)}"
    files = list(Path(mlflow.artifacts.download_artifacts(uri)).rglob("*"))
    assert (files and not [f for f in files if f.suffix == ".pkl"]), files
    model = mlflow.pyfunc.load_model(uri)
    signature = model.metadata.signature
    (row,) = signature.inputs.inputs
    assert {p.name: p.required for p in row.type.properties} == {"text": True, "target": False, "contrast": False}
    assert [p.name for p in signature.params.params] == ["methods"]
    assert model.metadata.get_input_schema() is not None
    assert_same(model.predict(pd.DataFrame({"text": TEXTS})), api_records(fold))
    chosen = model.predict(pd.DataFrame({"text": TEXTS}), params={"methods": "expnet_paper,raw_attention"})
    assert_same(chosen, api_records(fold, ["expnet_paper", "raw_attention"]))


@pytest.fixture(scope="module")
def served_sst2(smoke_crosstask_run, smoke_tracking_uri, tmp_path_factory):
    """A real `mlflow models serve` of the smoke heldout_sst2 model on a loopback port (stopped by its process
    group after the module's tests)."""
    client = MlflowClient(smoke_tracking_uri)
    name = "crosstask-smoke-heldout_sst2"
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with serving_load.start_server(f"models:/{name}/{latest_version(client, name)}", smoke_tracking_uri, log) as url:
        yield url


def test_mlflow_models_serve_answers_a_real_request(served_sst2):
    answer = serving_load.post(served_sst2, TEXTS)
    assert answer.status == 200, answer.body
    assert_same(answer.body["predictions"], api_records("heldout_sst2"))


def test_the_served_model_holds_under_concurrent_load(served_sst2):
    """4 clients x 8 requests of 4 texts at once (196-199 of 200 answers were HTTP 400 before the
    explainer's lock): every answer 200 and equal to the sequential answer of the same request."""
    methods = "expnet_plus,expnet_paper,saliency,gae,attention_x_gradient"
    requests = serving_load.request_texts(serving_load.sst2_sentences(64), 8, 4)
    expected = serving_load.sequential_answers(served_sst2, requests, methods)
    result = serving_load.run_load(served_sst2, requests, clients=4, expected=expected, methods=methods,
                                   deadline_s=240, timeout_s=60)
    assert result["requests"] == 32 and result["errors"] == 0, result
    assert result["statuses"] == "200"


def test_served_bad_input_is_one_line_with_the_projects_message(served_sst2):
    answer = serving_load.post(served_sst2, TEXTS, methods="shap")
    assert answer.status == 400
    assert answer.body["message"].startswith("unknown method 'shap'; available: ['expnet_plus', 'expnet_paper'")
    assert "\n" not in answer.body["message"] and "stack_trace" not in answer.body
    empty = serving_load.post(served_sst2, ["fine", "  "])
    assert empty.status == 400 and empty.body["message"] == "text 1 is empty or whitespace only"


@pytest.mark.parametrize("rows", [[{"text": "fine", "taget": "negative"}],
                                  [{"text": "fine"}, {"text": "dull", "taget": "negative"}]])
def test_the_server_refuses_a_field_it_does_not_know(served_sst2, rows):
    """A misspelt `target` would be dropped by MLflow's column schema enforcement (the predicted class explained,
    said only in the server's log); the served model answers 400 naming it."""
    answer = serving_load.post_payload(served_sst2, {"inputs": rows})
    assert answer.status == 400, answer.body
    assert answer.body["message"] == "unknown input field(s) ['taget']; the model reads ['text', 'target', 'contrast']"


def test_the_server_says_which_request_form_it_takes(served_sst2):
    answer = serving_load.post_payload(served_sst2, {"dataframe_split": {"columns": ["text"], "data": [["fine"]]}})
    assert answer.status == 400 and "\n" not in answer.body["message"]
    assert answer.body["message"].startswith("Request payload must be a dictionary with 'inputs' key")


def test_the_server_explains_the_class_a_row_asks_for(served_sst2):
    payload = {"inputs": [{"text": TEXTS[0], "target": "negative"}, {"text": TEXTS[1], "target": 1}],
               "params": {"methods": "saliency"}}
    answer = serving_load.post_payload(served_sst2, payload)
    assert answer.status == 200, answer.body
    explainer = FoldExplainer.from_fold("heldout_sst2", models_dir=SMOKE_MODELS, device="cpu")
    api = [e.record() for e in explainer.explain(TEXTS, methods=["saliency"], ids=["0", "1"],
                                                 target=["negative", "1"])]
    assert_same(answer.body["predictions"], api)
    assert [r["explained_label"] for r in answer.body["predictions"]] == ["negative", "positive"]


@pytest.fixture(scope="module", params=["student_encoder", "student_attention"])
def served_text_student(request, text_student_writer, tmp_path_factory):
    """(URL, student folder): a tiny text student (the encoder student, then the attention student) saved as the
    pyfunc model a registered student is (`serving.save_model`, its classifier inside), served by a real `mlflow
    models serve` on a loopback port."""
    from learned_attribution.adapters.serving import save_model

    folder = tmp_path_factory.mktemp(request.param)
    student = text_student_writer(folder, request.param)
    model = save_model(student, folder / "classifier", folder / "model")
    with serving_load.start_server(str(model), None, folder / "serve.log") as url:
        yield url, student


STUDENT_TEXTS = ["the film was good", "not a very fun plot", "it was bad and boring", "good but not fun",
                 "the plot was very boring", "it was fun", "bad film", "the film was not good but it was fun"]


def test_a_served_text_student_holds_under_concurrent_load_with_the_apis_answers(served_text_student):
    """4 clients x 8 requests of 3 texts at once: every answer 200 and equal to the in-process explanation of the
    same texts (the student and its teacher, the default methods)."""
    url, student = served_text_student
    explainer = StudentExplainer.from_folder(student, device="cpu")
    requests = serving_load.request_texts(STUDENT_TEXTS, 8, 3)
    expected = [[e.record() for e in explainer.explain(texts)] for texts in requests]
    assert set(expected[0][0]["scores"]) == {"student", "occlusion"}
    result = serving_load.run_load(url, requests, clients=4, expected=expected, methods=None, deadline_s=180,
                                   timeout_s=60)
    assert result["requests"] == 32 and result["errors"] == 0, result
    assert result["statuses"] == "200"
