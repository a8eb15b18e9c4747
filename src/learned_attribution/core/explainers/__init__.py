"""Token attribution methods behind one interface (see base.py); importing this package registers them all."""
from . import activation, attention, gradient, learned, perturbation  # noqa: F401  (registration side effect)
from .base import METHODS, Attribution, Batch, AttributionMethod, build_method, register

__all__ = ["METHODS", "Attribution", "Batch", "AttributionMethod", "build_method", "register"]
