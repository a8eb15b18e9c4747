"""The one package that talks to MLflow: the store (`store`: which one, whether it works, experiments, stale runs,
resume keys, raw files as inputs, guarded logging) and the run logger (`run.TrackedRun`: open or continue, chunked
params and metrics, tables, texts, figures, folders, a registered model). The MLflow hook (adapters/hooks) and the
`fit` command log through it; the served model's pyfunc wrapper is adapters/serving.py."""
