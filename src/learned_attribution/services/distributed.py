"""Distributed attribution on Dask: the per-example work of a fold (the expensive explainers, any
baseline by configuration, and faithfulness) split into example batches and run as `dask.distributed` tasks.

- `compute.dask.address`: null runs everything in process (as before); `local` starts a LocalCluster of
  `n_workers` processes x `threads_per_worker` threads for the node; `tcp://host:8786` joins a running
  scheduler (`dask scheduler` / `dask worker`, docs/scale.md).
- Each worker loads the classifier once, from its saved Hugging Face folder (`TrainedClassifier.path`, the
  catalog's `classifier_<task>` folder), not from a pickle shipped with every task: workers on other machines
  must see the project folder at the same path (a shared file system).
- Tasks hold whole explainer batches built exactly as in process (`runner.iter_batches`), the explainers
  are built from their registry name and settings on the worker, and the sampling explainers seed per
  example, so a distributed run gives the in-process scores (tested with a 2-worker LocalCluster).
  Results come back in example order. A failing batch is retried one example at a time on the worker and
  an example that still fails is listed with its error, as in process; a task whose worker died is rerun
  (`retries`).

Why not Kedro's DaskRunner (the Kedro docs' pattern that runs each node as a Dask task): the cost of a fold
is inside two nodes (explain_heldout, faithfulness) whose work is thousands of independent examples, so
node-level scheduling would still run each of them on one machine; it would also need every intermediate
dataset on shared storage. Distributing inside those nodes gives the example-level parallelism and keeps
`kedro run` and its catalog as they are.
"""
from __future__ import annotations

import logging
import shutil
import tempfile
import time
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from learned_attribution.core.explainers import build_method
from learned_attribution.core.explainers.apply import ExplainRun, explain_batches, explain_run
from learned_attribution.core.models.faithfulness import faithfulness
from learned_attribution.core.models.loading import load_classifier
from learned_attribution.core.models.runner import iter_batches, resolve_device

logger = logging.getLogger(__name__)

@dataclass(frozen=True)
class DaskSettings:
    """Where the per-example work runs (`compute.dask`, parsed by `services/config/`)."""

    address: str  # local (a LocalCluster started for the node) or a scheduler address, tcp://host:8786
    n_workers: int
    threads_per_worker: int
    methods: tuple[str, ...] | None  # None: the scoring protocol's `expensive` methods
    batches_per_task: int
    retries: int
    device: str = "auto"  # the `compute.device` setting, resolved on each worker (its own GPU under `auto`)

    def describe(self) -> str:
        if self.address == "local":
            return f"dask LocalCluster {self.n_workers}x{self.threads_per_worker}"
        return f"dask {self.address}"


@contextmanager
def dask_client(settings: DaskSettings) -> Iterator[Any]:
    """A `distributed.Client`: on a LocalCluster started here (closed after) or on the scheduler at `address`."""
    from distributed import Client, LocalCluster  # Dask's scheduler client takes a second to import: with a cluster only

    cluster = None
    if settings.address == "local":
        cluster = LocalCluster(n_workers=settings.n_workers, threads_per_worker=settings.threads_per_worker,
                               processes=True, dashboard_address=":0")
        client = Client(cluster)
    else:
        try:
            client = Client(settings.address, timeout="30s")
        except (OSError, TimeoutError) as error:
            raise RuntimeError(f"parameter compute.dask.address={settings.address!r}: no Dask scheduler answered "
                               f"({type(error).__name__}: {error}); start one with `dask scheduler` and workers "
                               "with `dask worker <address>` (docs/scale.md)") from error
    try:
        n_workers = len(client.scheduler_info().get("workers", {}))
        logger.info("%s: %d workers", settings.describe(), n_workers)
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


# ----------------------------------------------------------------------------------------------------
# On the workers
# ----------------------------------------------------------------------------------------------------

_WORKER_CLASSIFIERS: dict[tuple[str, str], Any] = {}


def worker_classifier(path: str, device: str):
    """The classifier saved at `path`, loaded once per worker process and placed on `device` (a
    `compute.device` setting, resolved on the worker: `auto` picks the worker's own GPU when it has one)."""
    key = (path, device)
    if key not in _WORKER_CLASSIFIERS:
        classifier = load_classifier(path)
        classifier.model.to(resolve_device(device))
        _WORKER_CLASSIFIERS[key] = classifier
    return _WORKER_CLASSIFIERS[key]


def _limit_threads() -> None:
    """One torch intra-op thread pool per worker thread budget (several workers on one machine must not each
    take every core: contention slows torch by an order of magnitude)."""
    try:
        from distributed import get_worker  # on a worker, where `distributed` is loaded

        threads = int(get_worker().state.nthreads)
    except (ImportError, ValueError, AttributeError):
        return
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


def _explain_task(path: str, device: str, name: str, settings: dict, examples: pd.DataFrame,
                  batches: list[list[int]]) -> tuple[list[dict], list[dict]]:
    _limit_threads()
    classifier = worker_classifier(path, device)
    return explain_batches(classifier.model, classifier.tokenizer, examples, batches,
                           {name: build_method(name, **settings)})


def _faithfulness_task(path: str, device: str, input_ids: list[list[int]], scores: list[np.ndarray],
                       target: list[int], fractions: tuple[float, ...], batch_size: int) -> pd.DataFrame:
    _limit_threads()
    classifier = worker_classifier(path, device)
    return faithfulness(classifier.model, input_ids, scores, target, fractions=fractions, batch_size=batch_size,
                        pad_token_id=classifier.tokenizer.pad_token_id)


# ----------------------------------------------------------------------------------------------------
# On the client
# ----------------------------------------------------------------------------------------------------

def classifier_folder(classifier) -> str:
    """The folder the workers load the classifier from: where it was loaded from, or (a classifier built in
    memory) a copy saved once to a temporary folder, which only workers on this machine can read."""
    if classifier.path is not None:
        return str(Path(classifier.path).resolve())
    folder = Path(tempfile.mkdtemp(prefix="learned_attribution_classifier_"))
    weakref.finalize(classifier, shutil.rmtree, folder, True)  # removed with the classifier (or at exit)
    classifier.model.save_pretrained(folder)
    classifier.tokenizer.save_pretrained(folder)
    classifier.path = folder
    logger.warning("the classifier has no saved folder: written to %s for the Dask workers (workers on other "
                   "machines cannot read it; run from the catalog's saved classifier instead)", folder)
    return str(folder)


def _gather(client, futures: list, description: str) -> list:
    """Results in submission order, with a progress bar as tasks finish."""
    from distributed import as_completed  # with a cluster only (see dask_client)

    for _ in tqdm(as_completed(futures), total=len(futures), desc=description, leave=False):
        pass
    return client.gather(futures)


def explain_on_dask(client, classifier, examples: pd.DataFrame, methods: Mapping[str, dict], batch_size: int,
                    settings: DaskSettings) -> ExplainRun:
    """Each of `methods` (registry name -> settings) on every example of `examples`, as Dask tasks of
    `settings.batches_per_task` batches (the in-process batches); an `ExplainRun`."""
    path = classifier_folder(classifier)
    batches = list(iter_batches(list(examples["input_ids"]), batch_size))
    groups = [batches[i:i + settings.batches_per_task] for i in range(0, len(batches), settings.batches_per_task)]
    rows, failures, seconds = [], [], {}
    for name, method_settings in methods.items():
        started = time.perf_counter()
        futures = []
        for group in groups:
            positions = [i for batch in group for i in batch]
            local, offset = [], 0  # batch indices into the task's own rows
            for batch in group:
                local.append(list(range(offset, offset + len(batch))))
                offset += len(batch)
            futures.append(client.submit(_explain_task, path, settings.device, name, dict(method_settings or {}),
                                         examples.iloc[positions].reset_index(drop=True), local, pure=False,
                                         retries=settings.retries))
        for task_rows, task_failures in _gather(client, futures, f"explain {name} ({settings.describe()})"):
            rows.extend(task_rows)
            failures.extend(task_failures)
        seconds[name] = time.perf_counter() - started
        logger.info("%s on %s: %d examples in %.1f s", name, settings.describe(), len(examples), seconds[name])
    return explain_run(rows, failures, seconds)


def faithfulness_on_dask(client, classifier, input_ids: Sequence[Sequence[int]],
                         scores: Sequence[np.ndarray], target: Sequence[int], fractions: Sequence[float],
                         batch_size: int, settings: DaskSettings) -> pd.DataFrame:
    """`core.models.faithfulness.faithfulness` of the examples, as Dask tasks of `batch_size x batches_per_task`
    examples; rows in example order (`example` renumbered over the whole input)."""
    path = classifier_folder(classifier)
    size = batch_size * settings.batches_per_task
    futures = [client.submit(_faithfulness_task, path, settings.device, [list(map(int, ids)) for ids in input_ids[i:i + size]],
                             [np.asarray(s, dtype=float) for s in scores[i:i + size]],
                             [int(t) for t in target[i:i + size]], tuple(fractions), batch_size, pure=False,
                             retries=settings.retries)
               for i in range(0, len(input_ids), size)]
    table = pd.concat(_gather(client, futures, f"faithfulness ({settings.describe()})"), ignore_index=True)
    table["example"] = np.arange(len(table))
    return table

