"""The ablation's training grid (services/evaluation/training_grid.py) on signals of a tiny classifier: six cells,
each reading what it names (the correct predictions or all examples; signals of the predicted or the gold class), the
choice made on the training tasks only (the held-out task's labels change no validation number and no choice)."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from learned_attribution.core.data.modes import recomputed
from learned_attribution.core.models.loading import load_classifier
from learned_attribution.core.models.signals import FEATURE_SETS, signal_rows, signed_columns
from learned_attribution.services.config import catalogue_variant, scoring_settings, training_settings
from learned_attribution.services.evaluation.protocol import rationale_test_examples
from learned_attribution.services.evaluation.training_grid import training_grid

CATALOGUE = yaml.safe_load((Path(__file__).parents[2] / "conf/base/parameters_expnet_plus_variants.yml")
                           .read_text())["expnet_plus_variants"]
RECIPES = tuple(catalogue_variant(name, CATALOGUE, "test")
                for name in ("stack_self_training", "stack_self_training_magnitude"))
TRAINING = training_settings({"hidden": 8, "alpha": 0.25, "gamma": 2.0, "learning_rate": 1e-2, "batch_unit": "examples",
                              "batch_size": 8, "max_epochs": 2, "patience": 1, "gate_l1": 0.01, "pseudo_weight": 0.5,
                              "seeds": 1}, 0, "test")
SCORING = scoring_settings({"batch_size": 4, "max_test_examples": None, "expensive": [], "expensive_sample_size": 2,
                            "baselines": {}, "faithfulness": {"fractions": [0.5], "batch_size": 4},
                            "bootstrap": {"n_boot": 20, "seed": 0}}, layer=-1, seed=0)


def task_examples(tokenizer, task: str, seed: int, roles=("rationale_train", "rationale_val")) -> pd.DataFrame:
    """Random texts of a task; every other one mispredicted; the rationale: the even positions."""
    rng = np.random.default_rng(seed)
    rows = []
    for role in roles:
        for i in range(12):
            ids = [tokenizer.cls_token_id, *rng.integers(5, tokenizer.vocab_size, size=int(rng.integers(4, 9))).tolist(),
                   tokenizer.sep_token_id]
            labels = [-100] + [int(j % 2 == 0) for j in range(len(ids) - 2)] + [-100]
            rows.append({"example_id": f"{task}_{role}_{i}", "task": task, "role": role, "input_ids": ids,
                         "token_labels": labels, "label": 1, "predicted": i % 2, "correct": i % 2 == 1})
    return pd.DataFrame(rows)


@pytest.fixture
def signals(tmp_path, classifier_writer):
    classifier = load_classifier(classifier_writer(tmp_path / "classifier"))
    model, tokenizer = classifier.model, classifier.tokenizer
    tables = {}
    for seed, task in enumerate(("a", "b", "c")):
        examples = task_examples(tokenizer, task, seed, ("rationale_test",) if task == "c" else
                                 ("rationale_train", "rationale_val"))
        rows = pd.concat(signal_rows(model, tokenizer, examples, list(FEATURE_SETS)), ignore_index=True)
        gold = pd.concat(signal_rows(model, tokenizer, recomputed(examples), list(FEATURE_SETS)), ignore_index=True)
        tables[task] = (examples, rows, gold)
    return classifier, tables


def grid(classifier, tables, held_out=None):
    examples, rows, gold = held_out or tables["c"]
    return training_grid([tables["a"][1:], tables["b"][1:]], rows, gold,
                         rationale_test_examples(examples), RECIPES, TRAINING, {"rho": 0.5, "threshold": 0.5},
                         classifier, SCORING, "cpu", fold="heldout_c", layer=-1, encoder="tiny", max_length=32)


def test_six_cells_each_reading_what_it_names_and_one_choice_on_the_training_tasks(signals):
    classifier, tables = signals
    table = grid(classifier, tables)
    assert sorted(zip(table["train_on"], table["inputs"])) == sorted(
        (cell, inputs) for cell in ("correct", "all_predicted", "all_gold") for inputs in ("signed", "magnitude"))
    assert table["selected"].sum() == 1
    assert table.loc[table["selected"], "val_auroc_gold"].item() == table["val_auroc_gold"].max()
    for mode in ("predicted", "gold"):
        assert table[f"{mode}_auroc"].between(0, 1).all() and table[f"val_auroc_{mode}"].between(0, 1).all()
    # Gold-class signals of the training tasks flipped in sign: only the cell trained on them learns otherwise.
    # The training tasks' gold-class signed signals flipped: only the cell trained on gold-class signals with signed
    # inputs can learn otherwise (magnitudes do not see a sign).
    flipped = {task: (examples, rows, gold.assign(**{c: -gold[c] for c in signed_columns(gold.columns)}))
               for task, (examples, rows, gold) in tables.items() if task != "c"}
    again = grid(classifier, flipped | {"c": tables["c"]}).set_index(["train_on", "inputs"])
    table = table.set_index(["train_on", "inputs"])
    for cell in [("correct", "signed"), ("correct", "magnitude"), ("all_predicted", "signed"),
                 ("all_predicted", "magnitude"), ("all_gold", "magnitude")]:
        assert again.loc[cell, "predicted_auroc"] == table.loc[cell, "predicted_auroc"], cell
        assert again.loc[cell, "val_auroc_predicted"] == table.loc[cell, "val_auroc_predicted"], cell
    assert again.loc[("all_gold", "signed"), "predicted_auroc"] != table.loc[("all_gold", "signed"), "predicted_auroc"]


def test_the_held_out_labels_change_no_validation_number_and_no_choice(signals):
    classifier, tables = signals
    examples, rows, gold = tables["c"]
    inverted = examples.assign(token_labels=examples["token_labels"].map(
        lambda labels: [label if label == -100 else 1 - label for label in labels]))
    first, second = grid(classifier, tables), grid(classifier, tables, held_out=(inverted, rows, gold))
    columns = ["train_on", "inputs", "val_auroc_predicted", "val_auroc_gold", "selected"]
    pd.testing.assert_frame_equal(first[columns], second[columns])
    assert not np.allclose(first["predicted_auroc"], second["predicted_auroc"])  # the scoring did read them
