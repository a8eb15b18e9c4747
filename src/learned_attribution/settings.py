"""Kedro project settings."""
from kedro.config import OmegaConfigLoader

from learned_attribution.adapters.hooks import MlflowRunsHook, NodeTimingHook

HOOKS = (MlflowRunsHook(), NodeTimingHook())

CONFIG_LOADER_CLASS = OmegaConfigLoader
# Parameters merge softly: an environment (conf/smoke) overrides only the keys it names.
CONFIG_LOADER_ARGS = {"base_env": "base", "default_run_env": "local", "merge_strategy": {"parameters": "soft"}}
