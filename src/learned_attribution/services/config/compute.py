"""`compute` (where the torch work runs: device, bf16, the Dask cluster) and `mlflow` (the one store)."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Mapping

import torch

from learned_attribution.core.models.runner import resolve_bf16, resolve_device

from ..distributed import DaskSettings
from .blocks import block, positive_int

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ComputeSettings:
    """`compute`: where the torch work of a node runs (device, bf16 autocast) and the Dask cluster of the
    per-example work (None: in process)."""

    device: torch.device
    bf16: bool
    dask: DaskSettings | None = None

    def place(self, model: torch.nn.Module) -> torch.nn.Module:
        """`model` moved to the device (in place, as `nn.Module.to`)."""
        return model.to(self.device)


DASK_KEYS = ("address", "n_workers", "threads_per_worker", "methods", "batches_per_task", "retries")


def compute_settings(compute: Mapping[str, Any]) -> ComputeSettings:
    """`params:compute` (conf/base/parameters.yml): device auto | cpu | cuda | cuda:N | mps, bf16 auto | true |
    false, and the `dask` block; logs the choice and why."""
    values = block(compute, "compute", ("device", "bf16", "dask"))
    try:
        device = resolve_device(values["device"])
        bf16 = resolve_bf16(values["bf16"], device)
    except ValueError as error:
        raise ValueError(f"parameter compute: {error}") from error
    reason = "forced" if values["bf16"] != "auto" else ("native on this CPU" if bf16 else
                                                        "fp32: a GPU, or a CPU without native bf16 kernels")
    logger.info("compute: device %s, bf16 autocast %s (%s)", device, "on" if bf16 else "off", reason)
    return ComputeSettings(device, bf16, dask_settings(values["dask"], str(values["device"])))


def dask_settings(dask: Mapping[str, Any], device: str = "auto") -> DaskSettings | None:
    """`params:compute.dask`, or None when `address` is unset (everything in process)."""
    values = block(dask, "compute.dask", DASK_KEYS)
    if not values["address"]:
        return None
    address = str(values["address"])
    if address != "local" and "://" not in address:
        raise ValueError(f"parameter compute.dask.address={address!r}: expected local or a scheduler address such "
                         "as tcp://host:8786")
    counts = {key: positive_int(values[key], f"compute.dask.{key}")
              for key in ("n_workers", "threads_per_worker", "batches_per_task")}
    retries = positive_int(values["retries"], "compute.dask.retries", minimum=0)
    methods = None if values["methods"] is None else tuple(values["methods"])
    return DaskSettings(address, counts["n_workers"], counts["threads_per_worker"], methods,
                        counts["batches_per_task"], retries, device)


@dataclass(frozen=True)
class TrackingSettings:
    """`mlflow`: the one store every pipeline logs to (`MLFLOW_TRACKING_URI` wins), the crosstask experiment, and
    whether a logging failure stops the run."""

    tracking_uri: str
    experiment: str
    strict: bool


def tracking_settings(mlflow: Mapping[str, Any]) -> TrackingSettings:
    return TrackingSettings(**block(mlflow, "mlflow", ("tracking_uri", "experiment", "strict")))
