"""The three tasks of the cross-task protocol (SPEC §1): every pipeline, the folds and the API read this list."""
TASKS = ("hatexplain", "sst2", "cola")
FOLD_PREFIX = "heldout_"
FOLDS = tuple(f"{FOLD_PREFIX}{task}" for task in TASKS)

# Class names in label-id order, by task and number of classes: written into each fine-tuned classifier's
# config (`id2label`), so explanations, reports and served answers name the class instead of LABEL_<n>.
CLASS_NAMES = {
    "hatexplain": {2: ("normal", "toxic"), 3: ("normal", "offensive", "hatespeech")},
    "sst2": {2: ("negative", "positive")},
    "cola": {2: ("unacceptable", "acceptable")},
}


def class_names(task: str, n_classes: int) -> tuple[str, ...]:
    """The names of `task`'s classes 0..n_classes-1 (LABEL_<n>, transformers' default, for an unknown set)."""
    return CLASS_NAMES.get(task, {}).get(n_classes) or tuple(f"LABEL_{i}" for i in range(n_classes))
