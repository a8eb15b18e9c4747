"""The track record of the selection rules (services/reporting/selection_rules.py) on three hand-made folds, every answer
worked out by hand."""
import pandas as pd
import pytest

from learned_attribution.services.reporting.selection_rules import (never_best, rule_summary, track_record,
                                                              track_record_section)

# Validation AUROC per training direction: v1 is best on average but worst in one direction; v2 the steadiest.
DIRECTIONS = {"v1": (0.90, 0.50), "v2": (0.62, 0.58), "v3": (0.52, 0.48)}
HELD_OUT = {"heldout_a": {"v1": 0.60, "v2": 0.70, "v3": 0.65},
            "heldout_b": {"v1": 0.80, "v2": 0.75, "v3": 0.70},
            "heldout_c": {"v1": 0.60, "v2": 0.67, "v3": 0.50}}


def selection() -> pd.DataFrame:
    rows = []
    for variant, (first, second) in DIRECTIONS.items():
        rows += [{"variant": variant, "direction": "x+y->z", "val_auroc": first},
                 {"variant": variant, "direction": "x+z->y", "val_auroc": second},
                 {"variant": variant, "direction": "mean", "val_auroc": (first + second) / 2}]
    return pd.DataFrame(rows)


def ablation() -> pd.DataFrame:
    rows = [{"fold": fold, "variant": variant, "auroc": auroc} for fold, scores in HELD_OUT.items()
            for variant, auroc in scores.items()]
    # the best baseline and the floors sit in the same table and are not candidates
    rows += [{"fold": fold, "variant": "saliency (best baseline)", "auroc": 0.99} for fold in HELD_OUT]
    return pd.DataFrame(rows)


def test_each_rule_is_scored_on_every_fold_by_hand():
    track = track_record(ablation(), {fold: selection() for fold in HELD_OUT}).set_index(["fold", "rule"])
    expected = {  # (Spearman, pick, regret); fixed_default reads the other two folds' held-out AUROCs
        ("heldout_a", "mean_validation"): (-0.5, "v1", 0.10), ("heldout_a", "worst_direction"): (0.5, "v2", 0.0),
        ("heldout_a", "fixed_default"): (0.5, "v2", 0.0),  # v1 .70, v2 .71, v3 .60
        ("heldout_b", "mean_validation"): (1.0, "v1", 0.0), ("heldout_b", "worst_direction"): (0.5, "v2", 0.05),
        ("heldout_b", "fixed_default"): (0.5, "v2", 0.05),  # v1 .60, v2 .685, v3 .575
        ("heldout_c", "mean_validation"): (0.5, "v1", 0.07), ("heldout_c", "worst_direction"): (1.0, "v2", 0.0),
        ("heldout_c", "fixed_default"): (1.0, "v2", 0.0)}  # v1 .70, v2 .725, v3 .675
    assert set(track.index) == set(expected)
    for key, (spearman, picked, regret) in expected.items():
        row = track.loc[key]
        assert row["spearman"] == pytest.approx(spearman) and row["picked"] == picked
        assert row["regret"] == pytest.approx(regret) and row["n_candidates"] == 3
        assert row["best"] == max(HELD_OUT[key[0]], key=HELD_OUT[key[0]].get)
    summary = rule_summary(track.reset_index()).set_index("rule")
    assert summary.loc["mean_validation", "mean_spearman"] == pytest.approx(1 / 3)
    assert summary.loc["mean_validation", "mean_regret"] == pytest.approx(0.17 / 3)
    assert summary.loc["mean_validation", "max_regret"] == pytest.approx(0.10)
    assert summary["folds_picking_the_best"].to_dict() == {"mean_validation": 1, "worst_direction": 2,
                                                           "fixed_default": 2}
    assert never_best(track.reset_index(), {"heldout_a": selection()}) == ["v3"]


def test_a_single_fold_has_no_fixed_default_and_the_section_renders():
    track = track_record(ablation(), {"heldout_a": selection()})
    assert track["rule"].tolist() == ["mean_validation", "worst_direction"]
    constant = selection().assign(val_auroc=0.5)
    section = track_record_section(ablation(), {"heldout_a": constant, "heldout_b": selection()})
    assert "| heldout_a | mean_validation | n/a | v1 | 0.600 | v2 | 0.700 | 0.100 |" in section  # ties: first
    assert section.endswith("Candidates never the best nor picked: v3.")
