"""Explaining and scoring rationale sets, the one protocol of the folds, evaluate_external, transfer and the students'
plausibility (SPEC §8-9): `protocol` (examples, explain, score: one metric schema), `cost` (throughput as a ratio to
a forward pass), `faithfulness` (ERASER AOPC per method, in process or on Dask), `folds` (training a fold's learned
explainers) and `external` (a user's rationale file)."""
