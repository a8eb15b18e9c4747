"""The project's Kedro pipelines (one package each: nodes.py, pipeline.py), and `bind`, the one way a template
fixes a node function's namespace-specific arguments."""
from functools import partial, update_wrapper


def bind(function, **fixed):
    """`function` with the keyword arguments `fixed` given, keeping its name and docstring (Kedro and kedro-viz
    show them)."""
    bound = partial(function, **fixed)
    update_wrapper(bound, function)
    return bound
