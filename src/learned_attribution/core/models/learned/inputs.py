"""The input pipeline of a learned explainer: raw signal columns -> the network's inputs, fitted once during
training, saved in the artifact and applied unchanged at prediction (one code path, so training and serving
cannot drift apart).

Steps, in order (each optional, as the variant says): signed columns as magnitudes (`signs: magnitude`); the
anchor term, the anchor column rank-normalised within the example (`anchor`); within-example z-scores
(`example_z`); within-example ranks (a network that `ranks_inputs`: `simplex`); standardisation with fitted
statistics. The statistics saved are the target classifier's (`standardise: per_task`: its own unlabeled tokens;
`global`: the training tokens'); during training each task's rows are standardised with that task's statistics
through the same `transform`.

A column that is constant up to float rounding is fitted as constant (`constant_columns`) and enters the network as
exactly 0, during training and at prediction: standardising it would only magnify rounding error, which differs
between devices and batch shapes. The decision is saved with the statistics as a std of 0 (a spread of 0, nothing to
divide by): JSON-safe, and never written before, since fitted stds were floored at 1e-6, so saved explainers
transform as they did."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from ..signals import signed_columns
from .recipe import Variant

ANCHOR_SCALE = 4.0  # the anchor's logit range: comparable to what the residual network learns
# A column whose spread is within CONSTANT_ULPS float32 epsilons of its scale is rounding noise: the signals' own
# rounding spreads a column by a few epsilons (DeBERTa's embedding gradient . input, 0 exactly, by 1-13 of its
# gradient norm), and a spread that small would still be mostly device noise once standardised.
CONSTANT_ULPS = 64


def within_example_ranks(values: np.ndarray, example_ids: np.ndarray) -> np.ndarray:
    """Every column of `values` [N, F] rank-normalised within each example: lowest -0.5, highest 0.5, ties
    averaged, a one-token example 0. Monotone within an example, so each column ranks tokens as before."""
    frame = pd.DataFrame(np.asarray(values, dtype=np.float64).reshape(len(example_ids), -1))
    groups = frame.groupby(np.asarray(example_ids), sort=False)
    ranks = groups.rank(method="average") - 1
    sizes = groups[0].transform("size").to_numpy()[:, None] - 1
    normalised = np.where(sizes > 0, ranks.to_numpy() / np.maximum(sizes, 1), 0.5)
    return (normalised - 0.5).astype(np.float32)


def within_example_z(values: np.ndarray, example_ids: np.ndarray) -> np.ndarray:
    """Every column z-scored within each example (population std; a one-token example becomes 0)."""
    frame = pd.DataFrame(values)
    groups = frame.groupby(np.asarray(example_ids), sort=False)
    return ((frame - groups.transform("mean")) / (groups.transform("std", ddof=0) + 1e-6)).to_numpy(np.float32)


def anchor_offsets(values: np.ndarray, example_ids: np.ndarray) -> np.ndarray:
    """The anchor term: `values` rank-normalised within each example, scaled to logits in
    [-ANCHOR_SCALE/2, ANCHOR_SCALE/2]; the anchor alone ranks tokens exactly as its signal does."""
    return ANCHOR_SCALE * within_example_ranks(np.asarray(values)[:, None], example_ids)[:, 0]


def statistics(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Column means and standard deviations (+1e-6), computed in float64."""
    values = np.asarray(values, dtype=np.float64)
    return values.mean(0).astype(np.float32), (values.std(0) + 1e-6).astype(np.float32)


def column_scales(values: np.ndarray, columns: Sequence[str]) -> np.ndarray:
    """The magnitude [F] each column is rounded at: its largest |value|, and for a gradient . input column its
    gradient norm's too. g . x sums terms of size up to ||g|| ||x||, so its rounding error is ~eps ||g|| ||x|| however
    small |g . x| is; where g is orthogonal to x (DeBERTa's word embeddings: their LayerNorm makes the logit blind
    to their scale) g . x is 0 and that error is all the column holds, which its own magnitude cannot reveal."""
    columns = list(columns)
    magnitudes = np.abs(np.asarray(values, dtype=np.float64)).max(0, initial=0.0)
    scales = magnitudes.copy()
    for index, column in enumerate(columns):
        norm = column.replace("_grad_x_input", "_grad_norm")
        if column.endswith("_grad_x_input") and norm in columns:
            scales[index] = max(scales[index], magnitudes[columns.index(norm)])
    return scales


def constant_columns(values: np.ndarray, columns: Sequence[str], example_ids: np.ndarray | None = None) -> np.ndarray:
    """Which columns of `values` [N, F] are constant up to float rounding [F] (bool): their spread (population std,
    in float64; within examples when `example_ids` is given, for the steps that read a column within its example)
    is at most CONSTANT_ULPS float32 epsilons of their scale (`column_scales`). An all-zero column is constant."""
    frame = pd.DataFrame(np.asarray(values, dtype=np.float64))
    if example_ids is None:
        centres = frame.mean()
    else:
        centres = frame.groupby(np.asarray(example_ids), sort=False).transform("mean")
    spread = np.sqrt(((frame - centres) ** 2).mean().to_numpy())
    return spread <= CONSTANT_ULPS * np.finfo(np.float32).eps * column_scales(frame.to_numpy(), columns)


@dataclass
class InputPipeline:
    """Raw signal columns -> network inputs (see the module docstring). `mean`/`std`: the fitted statistics applied
    at prediction (the target classifier's); a std of 0 marks a constant column, which enters as 0."""

    columns: list[str]
    magnitudes: bool = False
    anchor: str | None = None
    example_z: bool = False
    ranks: bool = False
    mean: np.ndarray | None = None
    std: np.ndarray | None = None

    @classmethod
    def for_variant(cls, variant: Variant, columns: Sequence[str]) -> "InputPipeline":
        columns = list(columns)
        if variant.anchor and variant.anchor not in columns:
            raise ValueError(f"learned-explainer variant {variant.name!r}: anchor {variant.anchor!r} is not among its "
                             f"input columns (add its feature set)")
        return cls(columns, magnitudes=variant.signs == "magnitude", anchor=variant.anchor,
                   example_z=variant.example_z, ranks=variant.network_class.ranks_inputs)

    @property
    def reads_whole_examples(self) -> bool:
        return bool(self.anchor or self.example_z or self.ranks)

    @property
    def standardises(self) -> bool:
        """Ranks are already on one scale: a rank pipeline fits no statistics (only its constant columns)."""
        return not self.ranks

    @property
    def reads_within_examples(self) -> bool:
        """Whether the standardised values are read relative to their example (z-scores or ranks within it)."""
        return self.example_z or self.ranks

    def _signs(self, features: np.ndarray, example_ids: np.ndarray | None) -> np.ndarray:
        """The per-value step (magnitudes), on a checked copy of the raw features."""
        values = np.array(features, dtype=np.float32)  # a copy: the caller's array is never changed
        if values.ndim != 2 or values.shape[1] != len(self.columns):
            raise ValueError(f"input pipeline: expected features of shape [N, {len(self.columns)}], got "
                             f"{list(values.shape)}")
        if self.reads_whole_examples and example_ids is None:
            raise ValueError("this learned explainer reads whole examples: pass example_ids")
        if self.magnitudes:
            signed = [self.columns.index(column) for column in signed_columns(self.columns)]
            values[:, signed] = np.abs(values[:, signed])
        return values

    def prepare(self, features: np.ndarray, example_ids: np.ndarray | None,
                constant: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
        """The steps before standardisation on raw features [N, len(columns)] (rows of whole examples): the values
        and the anchor offsets [N] (None without an anchor). The `constant` columns [F] (bool) are zeroed first,
        so the within-example steps see no rounding noise in them either."""
        values = self._signs(features, example_ids)
        if constant is not None and constant.any():
            values[:, constant] = 0.0
        offsets = None
        if self.anchor:
            offsets = anchor_offsets(values[:, self.columns.index(self.anchor)], example_ids)
        if self.example_z:
            values = within_example_z(values, example_ids)
        if self.ranks:
            values = within_example_ranks(values, example_ids)
        return values, offsets

    def fitted_statistics(self, features: np.ndarray, example_ids: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """The standardisation statistics of raw rows (after the other steps); zeros and ones for ranks. Columns
        constant up to rounding (`constant_columns`, judged after the magnitudes and before the steps that would
        magnify their rounding) get a mean and std of 0."""
        values = self._signs(features, example_ids)
        constant = constant_columns(values, self.columns, example_ids if self.reads_within_examples else None)
        if not self.standardises:
            mean, std = np.zeros(len(self.columns), np.float32), np.ones(len(self.columns), np.float32)
        else:
            mean, std = statistics(self.prepare(features, example_ids, constant)[0])
        mean[constant], std[constant] = 0.0, 0.0
        return mean, std

    def transform(self, features: np.ndarray, example_ids: np.ndarray | None = None, mean: np.ndarray | None = None,
                  std: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
        """Raw features -> (network inputs [N, F] float32, anchor offsets [N] or None), standardised with `mean`/`std`
        (default: the fitted statistics)."""
        mean = self.mean if mean is None else mean
        std = self.std if std is None else std
        if mean is None or std is None:
            raise ValueError("input pipeline used before its statistics were fitted")
        constant = np.asarray(std) == 0
        values, offsets = self.prepare(features, example_ids, constant)
        if constant.any():  # zeroed in `prepare`: (0 - 0) / 1 keeps them exactly 0
            mean, std = np.where(constant, 0, mean).astype(np.float32), np.where(constant, 1, std).astype(np.float32)
        return ((values - mean) / std).astype(np.float32), offsets

    def config(self) -> dict:
        """JSON-ready (saved in the artifact's config.json)."""
        return {"columns": list(self.columns), "magnitudes": self.magnitudes, "anchor": self.anchor,
                "example_z": self.example_z, "ranks": self.ranks,
                "mean": None if self.mean is None else [float(v) for v in self.mean],
                "std": None if self.std is None else [float(v) for v in self.std]}

    @classmethod
    def from_config(cls, config: dict) -> "InputPipeline":
        config = dict(config)
        for key in ("mean", "std"):
            config[key] = None if config.get(key) is None else np.asarray(config[key], np.float32)
        return cls(**config)
