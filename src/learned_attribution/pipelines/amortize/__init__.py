from .pipeline import create_own_pipeline, create_pipeline

__all__ = ["create_own_pipeline", "create_pipeline"]
