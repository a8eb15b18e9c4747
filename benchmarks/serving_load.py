"""Benchmark: a served fold explainer under concurrent load (a real `mlflow models serve`, loopback only).

Run from the project root with the virtualenv active, after `kedro run --pipeline crosstask`:

    python benchmarks/serving_load.py                                   # models:/crosstask-heldout_sst2/latest
    python benchmarks/serving_load.py --model models:/crosstask-heldout_cola/1 --clients 1 4 8 --requests 25

The server is started on 127.0.0.1 with one worker process (its requests run on parallel threads), a first
request warms it up, and then, for each client count, that many threads send `--requests` requests each of
`--texts` texts (SST-2 validation sentences, rotated so requests differ). Every answer is checked: HTTP 200
and the same explanation as the sequential answer to the same request (scores to 1e-6). The table gives per
client count: requests, errors (non-200 or different answers), p50 / p95 request latency, texts/s. The
server is stopped by its process group when done (also on failure). Bounded: every request has a timeout and
the whole run stops after `--deadline` seconds.

Output: data/08_reporting/benchmarks/serving_load.csv. The integration test (tests/integration/test_serving.py)
runs the same `start_server` / `run_load` on a smoke fold.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "data" / "08_reporting" / "benchmarks" / "serving_load.csv"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def start_server(model_uri: str, tracking_uri: str | None, log_path: Path, startup_s: float = 180) -> Iterator[str]:
    """`mlflow models serve` of `model_uri` on a free loopback port; yields the base URL, stops the server's
    process group on exit."""
    port = free_port()
    mlflow_cli = Path(sys.executable).with_name("mlflow")
    # `mlflow models serve` starts uvicorn from PATH: the virtual environment's bin must be on it.
    env = {**os.environ, "LEARNED_ATTRIBUTION_DEVICE": os.environ.get("LEARNED_ATTRIBUTION_DEVICE", "cpu"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    if tracking_uri:
        env["MLFLOW_TRACKING_URI"] = tracking_uri
    log = open(log_path, "w")
    server = subprocess.Popen([str(mlflow_cli), "models", "serve", "-m", model_uri, "--env-manager", "local",
                               "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                              env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + startup_s
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"server exited: {log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{url}/ping", timeout=2) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"no answer in {startup_s:.0f} s: {log_path.read_text()[-3000:]}")
            time.sleep(1)
        yield url
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()


@dataclass
class Answer:
    status: int
    body: dict
    seconds: float


def post(url: str, texts: Sequence[str], methods: str | None = None, timeout: float = 120) -> Answer:
    """POST /invocations with one object per text (and the `methods` parameter); never raises on HTTP errors."""
    payload: dict = {"inputs": [{"text": t} for t in texts]}
    if methods is not None:
        payload["params"] = {"methods": methods}
    return post_payload(url, payload, timeout)


def post_payload(url: str, payload: dict, timeout: float = 120) -> Answer:
    """POST /invocations with a JSON payload as given; never raises on HTTP errors."""
    request = urllib.request.Request(f"{url}/invocations", data=json.dumps(payload).encode(),
                                     headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return Answer(reply.status, json.loads(reply.read()), time.perf_counter() - start)
    except urllib.error.HTTPError as error:
        return Answer(error.code, json.loads(error.read() or b"{}"), time.perf_counter() - start)


def same_explanations(got: list[dict], want: list[dict], atol: float = 1e-6) -> bool:
    """Same words, prediction and per-method scores (within `atol`) and rationales."""
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        if g["words"] != w["words"] or g["predicted"] != w["predicted"] or g["rationale"] != w["rationale"]:
            return False
        for method, scores in w["scores"].items():
            a = np.asarray([np.nan if s is None else s for s in g["scores"].get(method, [])], float)
            b = np.asarray([np.nan if s is None else s for s in scores], float)
            if a.shape != b.shape or not np.allclose(a, b, atol=atol, equal_nan=True):
                return False
    return True


def request_texts(pool: Sequence[str], n_requests: int, per_request: int) -> list[list[str]]:
    """`n_requests` distinct requests of `per_request` texts, rotating through `pool`."""
    return [[pool[(start * per_request + k) % len(pool)] for k in range(per_request)] for start in range(n_requests)]


def run_load(url: str, requests: list[list[str]], clients: int, expected: list[list[dict]], methods: str | None,
             deadline_s: float, timeout_s: float = 120) -> dict:
    """`clients` threads, each sending every request of `requests` once (offset so clients interleave);
    returns counts, errors and latency percentiles. `expected[i]` is the sequential answer to request i."""
    stop_at = time.monotonic() + deadline_s

    def client(offset: int) -> list[tuple[int, Answer | None]]:
        out = []
        for step in range(len(requests)):
            index = (offset + step) % len(requests)
            if time.monotonic() > stop_at:
                out.append((index, None))  # not sent: over the deadline (counted as an error)
                continue
            out.append((index, post(url, requests[index], methods, timeout_s)))
        return out

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        results = [item for batch in pool.map(client, range(clients)) for item in batch]
    wall = time.perf_counter() - start
    answered = [(i, a) for i, a in results if a is not None]
    errors = [i for i, a in results
              if a is None or a.status != 200 or not same_explanations(a.body.get("predictions", []), expected[i])]
    latencies = np.asarray([a.seconds for _, a in answered]) if answered else np.asarray([np.nan])
    texts = sum(len(requests[i]) for i, a in answered if a.status == 200)
    return {"clients": clients, "requests": len(results), "errors": len(errors),
            "statuses": ",".join(sorted({str(a.status) for _, a in answered})),
            "p50_s": float(np.percentile(latencies, 50)), "p95_s": float(np.percentile(latencies, 95)),
            "texts_per_s": texts / wall if wall > 0 else float("nan"), "wall_s": wall}


def sequential_answers(url: str, requests: list[list[str]], methods: str | None) -> list[list[dict]]:
    answers = []
    for texts in requests:
        answer = post(url, texts, methods)
        if answer.status != 200:
            raise RuntimeError(f"sequential request failed with HTTP {answer.status}: {answer.body}")
        answers.append(answer.body["predictions"])
    return answers


def sst2_sentences(n: int) -> list[str]:
    frame = pd.read_csv(ROOT / "data" / "01_raw" / "sst2" / "glue" / "dev.tsv", sep="\t", quoting=3)
    return frame["sentence"].astype(str).head(n).tolist()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="models:/crosstask-heldout_sst2/latest")
    parser.add_argument("--tracking-uri", default="sqlite:///mlflow.db")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--requests", type=int, default=25, help="requests per client")
    parser.add_argument("--texts", type=int, default=8, help="texts per request")
    parser.add_argument("--methods", default=None, help="comma-separated methods (default: the model's default)")
    parser.add_argument("--deadline", type=float, default=900, help="seconds for each client count at most")
    args = parser.parse_args(argv)
    requests = request_texts(sst2_sentences(400), args.requests, args.texts)
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    with start_server(args.model, args.tracking_uri, OUTPUT.with_suffix(".log")) as url:
        post(url, requests[0], args.methods)  # warm-up
        expected = sequential_answers(url, requests, args.methods)
        rows = []
        for clients in args.clients:
            row = run_load(url, requests, clients, expected, args.methods, args.deadline)
            rows.append({"model": args.model, "texts_per_request": args.texts, **row})
            print(f"{clients} clients: {row['requests']} requests, {row['errors']} errors, p50 {row['p50_s']:.3f} s, "
                  f"p95 {row['p95_s']:.3f} s, {row['texts_per_s']:.1f} texts/s", flush=True)
    table = pd.DataFrame(rows)
    table.to_csv(OUTPUT, index=False)
    print(table.to_string(index=False))
    print(f"wrote {OUTPUT}")
    return 0 if not table["errors"].any() else 1


if __name__ == "__main__":
    sys.exit(main())
