"""afn: token activation strength, HIGH/LOW buckets, activation shift and the layer comparison (SPEC §10)."""
from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
