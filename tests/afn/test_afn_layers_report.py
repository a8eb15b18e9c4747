"""Layer comparison, headline claims, report text, plots and the catalog's plot paths."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from matplotlib.figure import Figure

from learned_attribution.services.afn.layers import (PAIR_LAYER_COLUMNS, compare_layers, headline, layer_comparison,
                                                     strength_by_layer, summary, swap_by_layer)
from learned_attribution.services.reporting import afn_charts as plots
from learned_attribution.services.reporting.afn import PLOT_FILES, render_report, run_config

PROJECT = Path(__file__).resolve().parents[2]


def token_rows(layer, sentence, words_classes_strengths):
    rows = []
    strengths = np.array([s for _, _, s in words_classes_strengths], dtype=float)
    order = (-strengths).argsort().argsort()
    for k, (word, cls, strength) in enumerate(words_classes_strengths):
        rows.append({"sentence_id": sentence, "source": "sst", "n_tokens": len(strengths), "layer": layer,
                     "token_index": k + 1, "token": word, "word_index": k, "word": word, "word_class": cls,
                     "strength": strength, "tau": np.percentile(strengths, 75),
                     "high": strength > np.percentile(strengths, 75), "rank": order[k] + 1,
                     "rank_norm": order[k] / (len(strengths) - 1)})
    return rows


@pytest.fixture
def strengths():
    rows = []
    # layer 1: content 6 and 4 vs function 2 and 2 -> ratio 2.5; layer 2: content 3 and 3 vs function 3 and 3 -> 1
    rows += token_rows(1, "s1", [("great", "content", 6), ("the", "function", 2), ("film", "content", 4),
                                 ("a", "function", 2)])
    rows += token_rows(2, "s1", [("great", "content", 3), ("the", "function", 3), ("film", "content", 3),
                                 ("a", "function", 3)])
    return pd.DataFrame(rows)


def test_strength_by_layer_by_hand(strengths):
    table = strength_by_layer(strengths).set_index("layer")
    assert table.loc[1, "mean_strength_content"] == 5.0
    assert table.loc[1, "mean_strength_function"] == 2.0
    assert table.loc[1, "content_function_ratio"] == 2.5
    assert table.loc[2, "content_function_ratio"] == 1.0
    assert np.isnan(table.loc[1, "content_punctuation_ratio"])  # no punctuation in these sentences
    assert table.loc[1, "content_token_share"] == 0.5
    assert table.loc[1, "high_content_share"] == 1.0  # HIGH at layer 1: "great" only (tau = 4.5)
    assert table.loc[1, "top1_content_share"] == 1.0
    assert table.loc[1, "mean_rank_norm_content"] == pytest.approx((0 + 1 / 3) / 2)


def pair_rows(layer, r_h, share_high, kind="context"):
    row = dict.fromkeys(PAIR_LAYER_COLUMNS, 0.0)
    row.update({"pair_id": f"{kind}{layer}", "kind": kind, "source": "test", "layer": layer, "r_h": r_h,
                "share_high": share_high, "r_h_unchanged": 0.3, "share_high_unchanged": 0.2, "cls_shift": 1.0})
    return row


def test_headline_claims(strengths):
    pairs = pd.DataFrame([pair_rows(1, 0.8, 0.25), pair_rows(2, 0.4, 0.25)])
    layers = layer_comparison(strengths, pairs, afn_layer=1)
    assert layers["layer"].tolist() == [1, 2] and layers["is_afn_layer"].tolist() == [True, False]
    head = headline(layers, afn_layer=1, n_layers=2)
    assert head["r_h_context"] == 0.8 and head["next_layer"] == 2
    assert head["content_function_ratio"] == 2.5 and head["content_function_ratio_next"] == 1.0
    assert head["claims"] == {"high_tokens_carry_most_shift": True, "r_h_near_paper": True,
                              "content_words_rank_highest": True, "afn_layer_beats_next": True}
    assert head["best_content_function_layer"] == 1 and head["afn_layer_ratio_rank"] == 1
    # seen from layer 2 every claim fails, and there is no next layer
    head = headline(layers, afn_layer=2, n_layers=2)
    assert head["claims"]["high_tokens_carry_most_shift"] is False
    assert head["claims"]["r_h_near_paper"] is False
    assert head["claims"]["content_words_rank_highest"] is False  # all strengths tie at layer 2
    assert head["claims"]["afn_layer_beats_next"] is None and head["next_layer"] is None
    assert head["afn_layer_ratio_rank"] == 2


def test_report_states_numbers_and_failed_claims(strengths):
    pairs = pd.DataFrame([pair_rows(1, 0.8, 0.25), pair_rows(2, 0.4, 0.25)])
    layers = layer_comparison(strengths, pairs, afn_layer=2)
    head = {**headline(layers, afn_layer=2, n_layers=2), "n_corpus_sentences": 1}
    skipped = pd.DataFrame([{"stage": "shift", "item": "p1", "reason": "over max_length", "detail": "9 tokens"}])
    text = render_report(head, layers, skipped, {"encoder": "tiny"})
    assert "| R_H: share of the context shift carried by HIGH tokens | about 76.0% | 40.0% |" in text
    assert "does not hold" in text
    assert "1 inputs skipped" in text and "over max_length" in text
    for path in PLOT_FILES.values():
        assert f"]({path})" in text


def test_catalog_writes_the_plots_the_report_links():
    catalog = yaml.safe_load((PROJECT / "conf/base/catalog_afn.yml").read_text())
    report = catalog["afn.report"]["filepath"]
    plot_paths = {entry["filepath"] for entry in catalog.values()
                  if entry["type"] == "learned_attribution.adapters.kedro_datasets.AtomicMatplotlibDataset"}
    report_dir = report.rsplit("/", 1)[0]
    assert plot_paths == {f"{report_dir}/{path}" for path in PLOT_FILES.values()}


def test_row_normalised():
    matrix = np.array([[1.0, 2.0, np.nan], [0.0, 0.0, 0.0], [3.0, 6.0, 12.0]])
    np.testing.assert_allclose(plots.row_normalised(matrix), [[0.5, 1.0, np.nan], [0, 0, 0], [0.25, 0.5, 1.0]])


def test_plots_build_figures(strengths):
    pairs = pd.DataFrame([pair_rows(1, 0.8, 0.25), pair_rows(2, 0.4, 0.25), pair_rows(1, 0.2, 0.2, "prompt"),
                          pair_rows(2, 0.1, 0.2, "prompt")])
    layers = layer_comparison(strengths, pairs, afn_layer=1)
    assert len(plots.plot_strength_by_layer(layers, 1).axes) == 3
    assert isinstance(plots.plot_rh_by_layer(layers, 1), Figure)
    pair_table = pd.DataFrame({"pair_id": ["e0", "c0", "c1", "p0"], "kind": ["context"] * 3 + ["prompt"],
                               "source": ["example", "sst_minimal_pair", "sst_minimal_pair", "corpus"],
                               "text_a": ["a day"] * 4, "text_b": ["a walk"] * 4})
    assert plots.choose_heatmap_pairs(pair_table, 3) == ["e0", "c0", "p0"]
    assert plots.choose_heatmap_pairs(pair_table, 0) == []
    shifts = pd.DataFrame([{"pair_id": "e0", "layer": layer, "token_index": k, "token": token, "high": k == 2,
                            "changed": k == 2, "delta": float(layer + k)}
                           for layer in (0, 1, 2) for k, token in enumerate(["[CLS]", "a", "day", "[SEP]"])])
    figure = plots.plot_shift_heatmaps(shifts, pair_table, ["e0"], afn_layer=1)
    labels = [label.get_text() for label in figure.axes[0].get_xticklabels()]
    assert labels == ["[CLS]", "a", ">day*", "[SEP]"]


def test_swap_by_layer_pools_context_tokens():
    rows = [  # pair c0: swapped token carries 6 of 10, is HIGH; pair c1: swapped token 2 of 4, LOW, HIGH one carries 1
        ("c0", "context", True, True, True, 6.0), ("c0", "context", True, False, False, 4.0),
        ("c1", "context", True, True, False, 2.0), ("c1", "context", True, False, True, 1.0),
        ("c1", "context", True, False, False, 1.0),
        ("c1", "context", False, False, False, 9.0),  # [CLS]: not aligned, left out
        ("p0", "prompt", True, False, True, 50.0),  # prompt pairs are left out
    ]
    shifts = pd.DataFrame([dict(zip(["pair_id", "kind", "aligned", "changed", "high", "delta"], row), layer=3)
                           for row in rows])
    table = swap_by_layer(shifts).set_index("layer")
    assert table.loc[3, "changed_token_share_context"] == pytest.approx(2 / 5)
    assert table.loc[3, "changed_shift_share_context"] == pytest.approx(8 / 14)
    assert table.loc[3, "changed_high_rate_context"] == pytest.approx(1 / 2)
    assert table.loc[3, "r_h_pooled_context"] == pytest.approx(7 / 14)


def test_summary_counts_the_run_and_the_report_lists_its_settings(strengths, make_settings):
    pairs = pd.DataFrame([pair_rows(1, 0.8, 0.25), pair_rows(2, 0.4, 0.25)])
    settings = make_settings(layer=1)
    layers = compare_layers(strengths, pairs, pd.DataFrame(columns=["pair_id"]), settings)
    assert layers["is_afn_layer"].tolist() == [True, False]
    corpus = pd.DataFrame({"source": ["sst", "user"]})
    pair_table = pd.DataFrame({"kind": ["context", "context", "prompt"]})
    skipped = pd.DataFrame({"stage": ["corpus"], "item": ["u.txt:2"], "reason": ["empty sentence"], "detail": [""]})
    head = summary(layers, strengths, corpus, pair_table, skipped, settings)
    assert {key: head[key] for key in ("encoder", "n_corpus_sentences", "n_corpus_user_sentences", "n_context_pairs",
                                       "n_prompt_pairs", "n_skipped", "afn_layer", "n_layers")} == {
        "encoder": "packaged:all-MiniLM-L6-v2", "n_corpus_sentences": 1, "n_corpus_user_sentences": 1,
        "n_context_pairs": 2, "n_prompt_pairs": 1, "n_skipped": 1, "afn_layer": 1, "n_layers": 2}
    assert head["r_h_context"] == 0.8
    text = render_report(head, layers, skipped, run_config(head, settings))
    for line in ("- percentile: 75", "- max_length: 128", "- seed: 13", "- corpus sentences: 1 (1 from the user file)",
                 "- corpus phrase length (words): 4-12", "- prompt prefixes: [['summarize:', 'translate:']]",
                 "- skipped inputs: 1", "- AFN layer: 1"):
        assert line + "\n" in text
    with pytest.raises(ValueError, match="every sentence was skipped"):
        summary(layers, strengths.iloc[:0], corpus, pair_table, skipped, settings)
    with pytest.raises(ValueError, match=r"afn.layer=3: this encoder has blocks 1..2"):
        compare_layers(strengths, pairs, pd.DataFrame(columns=["pair_id"]), make_settings(layer=3))


def test_the_run_draws_the_configured_number_of_measured_pairs(strengths, make_settings):
    pairs = pd.DataFrame([pair_rows(1, 0.8, 0.25), pair_rows(2, 0.4, 0.25)])
    layers = layer_comparison(strengths, pairs, afn_layer=1)
    pair_table = pd.DataFrame({"pair_id": ["e0", "c0", "c1"], "kind": ["context"] * 3,
                               "source": ["example", "sst_minimal_pair", "sst_minimal_pair"],
                               "text_a": ["a day"] * 3, "text_b": ["a walk"] * 3})
    shifts = pd.DataFrame([{"pair_id": pair, "layer": layer, "token_index": k, "token": token, "high": k == 1,
                            "changed": k == 1, "delta": float(layer + k)}
                           for pair in ("e0", "c1") for layer in (0, 1, 2) for k, token in enumerate(["a", "day"])])
    strength, rh, heatmaps = plots.afn_figures(layers, shifts, pair_table, 1, make_settings(plots={"n_heatmap_pairs": 3}))
    assert len(strength.axes) == 3 and isinstance(rh, Figure)
    # c0 was not measured: two heatmaps (and their colour bars)
    assert [axis.get_title().split(" ")[0] for axis in heatmaps.axes if axis.get_title()] == ["e0", "c1"]
