"""The project's Kedro hooks: MLflow tracking of every pipeline (`tracking`, what each logs in `runs`) and the
node timings of each pipeline (`timing`)."""
from .timing import NodeTimingHook
from .tracking import MlflowRunsHook

__all__ = ["MlflowRunsHook", "NodeTimingHook"]
