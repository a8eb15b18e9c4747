"""Per-example plausibility metrics, registered by name the way explainers are (`core/explainers/base.py`).

A metric is a function of one example's finite token scores and its 0/1 gold rationale, giving one number (NaN
where it is undefined: the example is left out of the mean). `plausibility.evaluate` computes every registered
metric on every example; each is averaged over the examples that define it, given a bootstrap interval by the
scoring protocol, and written as a column of the metric tables (`<name>`, `<name>_low`, `<name>_high`). A new metric
is one `@register_metric` in a module imported by `core/metrics/__init__.py`.

AUROC is not among them: it is computed for every example in one vectorised pass (`plausibility.example_aurocs`).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

ExampleMetric = Callable[[np.ndarray, np.ndarray], float]  # (scores, gold) of one example -> value or NaN

EXAMPLE_METRICS: dict[str, ExampleMetric] = {}


def register_metric(name: str) -> Callable[[ExampleMetric], ExampleMetric]:
    """Class decorator's twin for metrics: `@register_metric("auprc")` adds the function under `name`."""

    def add(metric: ExampleMetric) -> ExampleMetric:
        if name in EXAMPLE_METRICS:
            raise ValueError(f"metric {name!r} is registered twice")
        EXAMPLE_METRICS[name] = metric
        return metric

    return add
