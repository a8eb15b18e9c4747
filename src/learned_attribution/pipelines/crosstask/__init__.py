from .pipeline import create_folds, create_pipeline

__all__ = ["create_folds", "create_pipeline"]
