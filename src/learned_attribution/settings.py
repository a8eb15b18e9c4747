"""Kedro project settings."""
from kedro.config import OmegaConfigLoader

from learned_attribution.adapters.hooks import MlflowRunsHook, NodeTimingHook, StaleOutputsHook, UpstreamInputsHook
from learned_attribution.core.tasks import held_out_task

# Pluggy calls the last registered first: the upstream inputs are checked before anything else (a run that cannot
# start sets nothing aside and opens no MLflow run), stale outputs are set aside before the MLflow hook reads which
# nodes an `--only-missing-outputs` run will run.
HOOKS = (NodeTimingHook(), MlflowRunsHook(), StaleOutputsHook(), UpstreamInputsHook())

CONFIG_LOADER_CLASS = OmegaConfigLoader
# Parameters merge softly: an environment (conf/smoke) overrides only the keys it names. `${held_out_task:<fold>}`
# names a fold's task in the catalog (core/tasks.py, the one list of tasks).
CONFIG_LOADER_ARGS = {"base_env": "base", "default_run_env": "local", "merge_strategy": {"parameters": "soft"},
                      "custom_resolvers": {"held_out_task": held_out_task}}
