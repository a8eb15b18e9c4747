"""`suggest`'s rule is the one the committed record chose on validation pools (docs/record/suggestion_rules_choice.csv,
written by benchmarks/suggestion_rules.py), and each rule it may keep picks as documented."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from learned_attribution.core.picking import cluster_picks
from learned_attribution.services.fewshot.suggest import SUGGESTION_RULE, SUGGESTION_RULES, picked_rows

RECORD = Path(__file__).resolve().parents[2] / "docs" / "record" / "suggestion_rules_choice.csv"


def test_the_kept_rule_is_the_recorded_choice():
    choice = pd.read_csv(RECORD)
    assert choice["chosen"].sum() == 1
    assert SUGGESTION_RULE == choice.loc[choice["chosen"], "rule"].iloc[0]
    kept = choice.set_index("rule").loc[SUGGESTION_RULE]
    rules = choice[choice["rule"] != "random"]
    if SUGGESTION_RULE == "random":  # no rule above twice its standard error
        assert (rules["auroc_gain"] <= 2 * rules["auroc_gain_se"]).all()
    else:
        assert kept["auroc_gain"] == rules["auroc_gain"].max() and kept["auroc_gain"] > 2 * kept["auroc_gain_se"]


@pytest.mark.parametrize("rule", SUGGESTION_RULES)
def test_each_rule_picks_k_distinct_rows_the_same_for_a_seed(rule):
    features = np.random.default_rng(0).normal(size=(40, 5))
    picked = picked_rows(features, 6, seed=3, rule=rule)
    assert len(set(picked)) == 6 and picked == picked_rows(features, 6, seed=3, rule=rule)
    if rule == "typical per cluster":
        assert picked == cluster_picks(features, 6, 3, "typical")
    elif rule == "random per cluster":
        assert picked == cluster_picks(features, 6, 3, "random")
    else:
        assert picked == sorted(picked) and picked != picked_rows(features, 6, seed=4, rule=rule)


def test_an_unknown_rule_is_refused():
    with pytest.raises(ValueError, match="suggestion rule 'uncertainty': one of"):
        picked_rows(np.zeros((3, 2)), 1, 0, rule="uncertainty")
