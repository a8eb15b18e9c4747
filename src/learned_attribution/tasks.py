"""The three tasks of the cross-task protocol (SPEC §1): every pipeline, the folds and the API read this list."""
TASKS = ("hatexplain", "sst2", "cola")
FOLD_PREFIX = "heldout_"
FOLDS = tuple(f"{FOLD_PREFIX}{task}" for task in TASKS)
