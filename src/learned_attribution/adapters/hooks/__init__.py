"""The project's Kedro hooks: MLflow tracking of every pipeline (`tracking`, what each logs in `runs`), the node
timings of each pipeline (`timing`), the check that a pipeline's upstream inputs exist (`inputs`) and the settings
fingerprints that let `--only-missing-outputs` rerun what a settings change made stale (`fingerprints`)."""
from .fingerprints import StaleOutputsHook
from .inputs import UpstreamInputsHook
from .timing import NodeTimingHook
from .tracking import MlflowRunsHook

__all__ = ["MlflowRunsHook", "NodeTimingHook", "StaleOutputsHook", "UpstreamInputsHook"]
