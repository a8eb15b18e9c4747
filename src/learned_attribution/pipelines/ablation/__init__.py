"""ablation: every ExpNet+ candidate of a fold beside the main job's recipe (on demand, after the main job)."""
from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
