"""Each smoke fold's registered MLflow model: the loaded pyfunc gives the Python API's scores, and a real
`mlflow models serve` subprocess answers POST /invocations with them."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from learned_attribution.explain import FoldExplainer

pytestmark = pytest.mark.integration

SMOKE_MODELS = Path(__file__).resolve().parents[2] / "data" / "smoke" / "06_models"
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
    model = mlflow.pyfunc.load_model(f"models:/{name}/{latest_version(client, name)}")
    signature = model.metadata.signature
    assert signature.inputs.input_names() == ["text"] and [p.name for p in signature.params.params] == ["methods"]
    assert model.metadata.get_input_schema() is not None
    assert_same(model.predict(pd.DataFrame({"text": TEXTS})), api_records(fold))
    chosen = model.predict(pd.DataFrame({"text": TEXTS}), params={"methods": "expnet_paper,raw_attention"})
    assert_same(chosen, api_records(fold, ["expnet_paper", "raw_attention"]))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_mlflow_models_serve_answers_a_real_request(smoke_crosstask_run, smoke_tracking_uri, tmp_path):
    client = MlflowClient(smoke_tracking_uri)
    name = "crosstask-smoke-heldout_sst2"
    port = free_port()
    mlflow_cli = Path(sys.executable).with_name("mlflow")
    # `mlflow models serve` starts uvicorn from PATH: the virtual environment's bin must be on it.
    env = {**os.environ, "MLFLOW_TRACKING_URI": smoke_tracking_uri, "LEARNED_ATTRIBUTION_DEVICE": "cpu",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    log = open(tmp_path / "serve.log", "w")
    server = subprocess.Popen([str(mlflow_cli), "models", "serve", "-m", f"models:/{name}/{latest_version(client, name)}",
                               "--env-manager", "local", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                              env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while True:
            assert server.poll() is None, f"server exited: {(tmp_path / 'serve.log').read_text()[-3000:]}"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=2) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, f"no answer in 180 s: {(tmp_path / 'serve.log').read_text()[-3000:]}"
            time.sleep(1)
        body = json.dumps({"dataframe_split": {"columns": ["text"], "data": [[t] for t in TEXTS]}}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{port}/invocations", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as reply:
            served = json.loads(reply.read())["predictions"]
        assert_same(served, api_records("heldout_sst2"))
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()
