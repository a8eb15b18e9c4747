"""The suggestion-rule benchmark's choice (`benchmarks/suggestion_rules.py: choose`) on known paired gains: a rule is
kept only when its mean gain over the random draws is above twice its standard error; otherwise the seeded random
sample is."""
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import suggestion_rules  # noqa: E402


def draws(gains: dict[str, list[float]]) -> pd.DataFrame:
    rows = []
    for repeat in range(4):
        rows.append({"fold": "f", "k": 8, "rule": "random", "repeat": repeat, "auroc": 0.7, "f1_matched": 0.4,
                     "mispredicted_share": 0.1})
        for rule, values in gains.items():
            rows.append({"fold": "f", "k": 8, "rule": rule, "repeat": repeat, "auroc": 0.7 + values[repeat],
                         "f1_matched": 0.4, "mispredicted_share": 0.1})
    return pd.DataFrame(rows)


def test_a_rule_above_its_noise_is_kept():
    table = suggestion_rules.choose(draws({"steady": [0.02, 0.021, 0.019, 0.02], "noisy": [0.1, -0.09, 0.08, -0.07]}))
    assert table.loc[table["chosen"], "rule"].tolist() == ["steady"]
    assert table.set_index("rule").loc["steady", "above_random"] == 4


def test_without_a_rule_above_its_noise_the_random_sample_is_kept():
    table = suggestion_rules.choose(draws({"noisy": [0.1, -0.09, 0.08, -0.07], "flat": [0.0, 0.001, -0.001, 0.0]}))
    assert table.loc[table["chosen"], "rule"].tolist() == ["random"]
