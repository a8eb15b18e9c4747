"""Nodes of the afn pipeline: thin calls into `services/afn` (the computations) and `services/reporting` (the
report and the plots). The first node parses the settings; every other node takes them parsed. The MLflow hook
logs the run from the saved outputs (`adapters/hooks/runs.py`, `AFN`)."""
from __future__ import annotations

from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from learned_attribution.core.data.schema import RawText
from learned_attribution.services.afn import build, measure
from learned_attribution.services.afn.layers import summary
from learned_attribution.services.config import AfnSettings, afn_settings
from learned_attribution.services.config import ComputeSettings, compute_settings
from learned_attribution.services.reporting.afn import render_report, run_config
from learned_attribution.services.reporting.afn_charts import afn_figures


def parse_settings(afn: dict[str, Any], encoder: dict[str, Any], max_length: int, seed: int,
                   compute: dict[str, Any]) -> tuple[AfnSettings, ComputeSettings]:
    """The run's parameter blocks, parsed once: `afn` with the shared encoder, max_length and seed, and `compute`."""
    settings = afn_settings({"afn": afn, "encoder": encoder, "max_length": max_length, "seed": seed})
    return settings, compute_settings(compute)


def _trees(train: RawText, dev: RawText, test: RawText) -> dict[str, RawText]:
    return {"train": train, "dev": dev, "test": test}


def build_corpus(trees_train: RawText, trees_dev: RawText, trees_test: RawText, user_sentences: RawText | None,
                 settings: AfnSettings) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The AFN corpus (SST phrases and the user's sentences) and its skipped lines."""
    return build.build_corpus(_trees(trees_train, trees_dev, trees_test), user_sentences, settings)


def build_pairs(trees_train: RawText, trees_dev: RawText, trees_test: RawText, corpus: pd.DataFrame,
                user_pairs: RawText | None, settings: AfnSettings) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The shift pairs and the skipped user pairs."""
    return build.build_pairs(_trees(trees_train, trees_dev, trees_test), corpus, user_pairs, settings)


def measure_strengths(corpus: pd.DataFrame, settings: AfnSettings, compute: ComputeSettings
                      ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """S_i, tau, HIGH and rank of every corpus token at every layer (encoder on the `compute` device)."""
    tokenizer, model = measure.load_afn_encoder(settings, compute)
    return measure.measure_strengths(corpus, tokenizer, model, settings)


def measure_shifts(pairs: pd.DataFrame, settings: AfnSettings, compute: ComputeSettings
                   ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Delta_i of every token of A at every layer, and R_H per pair and layer (encoder on the `compute` device)."""
    tokenizer, model = measure.load_afn_encoder(settings, compute)
    return measure.measure_shifts(pairs, tokenizer, model, settings)


def summarize(layers: pd.DataFrame, token_strengths: pd.DataFrame, corpus: pd.DataFrame, pair_table: pd.DataFrame,
              skipped: pd.DataFrame, settings: AfnSettings) -> dict[str, Any]:
    """Headline numbers at the AFN layer, the claim checks, and the run's counts."""
    return summary(layers, token_strengths, corpus, pair_table, skipped, settings)


def make_plots(layers: pd.DataFrame, token_shifts: pd.DataFrame, pair_table: pd.DataFrame, head: dict[str, Any],
               settings: AfnSettings) -> tuple[Figure, Figure, Figure]:
    """Strength by layer, R_H by layer and the Delta_i heatmaps."""
    return afn_figures(layers, token_shifts, pair_table, int(head["afn_layer"]), settings)


def write_report(head: dict[str, Any], layers: pd.DataFrame, skipped: pd.DataFrame, settings: AfnSettings) -> str:
    """data/08_reporting/afn_report.md."""
    return render_report(head, layers, skipped, run_config(head, settings))
