"""Token attribution methods behind one interface (see base.py); importing this package registers them all."""
from . import activation, attention, expnet, gradient, perturbation  # noqa: F401  (registration side effect)
from .base import EXPLAINERS, Attribution, Batch, Explainer, build_explainer, register

__all__ = ["EXPLAINERS", "Attribution", "Batch", "Explainer", "build_explainer", "register"]
