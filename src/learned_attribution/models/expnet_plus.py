"""ExpNet+ (issue 06): ExpNet's small network over more transferable inputs, with transfer-minded training.

A `Variant` names one recipe: which feature sets of `signals.py` it reads, how inputs are standardised,
the objective, and three ideas for transfer to an unseen task's classifier:
- `standardise: per_task`: every classifier's signals are z-scored with that classifier's own token
  statistics; for the held-out classifier these come from its *unlabeled* tokens (label-free adaptation).
- `balance`: task-balanced multi-task training (every training task weighs the same, whatever its size).
- `gating`: one learned sigmoid gate per attention head over that head's inputs, with an L1 pull towards
  0, so heads whose patterns do not transfer can be switched off.
- `self_training`: pseudo-rationales on the held-out classifier's unlabeled tokens where the cheap
  signals (raw attention, attention x gradient, layer-gradient norm) agree, trained on as a third task.
- `example_z`: every input z-scored within its example first (the scores are judged by how they rank the
  tokens of one example, so what matters is how a token stands out from its neighbours).
- `anchor` (issue 10): an anchored residual. The score is a fixed anchor, one signal column rank-normalised
  within the example (e.g. `embedding_grad_norm`, the saliency baseline's score), plus `anchor_weight` x
  the network's output, which is trained as a residual on top of the anchor. `anchor_weight: 0` is the
  anchor itself, so a selection that includes it can only lose what its own validation noise costs.
- `network: simplex` (issue 10): a convex stack instead of the 2-layer network: every input column is
  rank-normalised within its example and the score is a weighted mean of those ranks, weights on the simplex
  (softmax), learned on the training tasks (aggregation of explanation methods, Rieger & Hansen 2019).
  The weights say which signals the stack trusts (`ExpNetPlus.stack_weights`).
- `signs: magnitude` (issue 10): the signed columns (`signals.signed_columns`) enter as absolute values. Those
  are gradients of the predicted class, so they invert on a mispredicted example, a regime the explainer never
  trains on (correct predictions only, SPEC §4) and the one most of CoLA's rationale examples are in.
- `pseudo: agreement` (issue 10): self-training's pseudo-rationales from six cheap signals instead of three,
  each positive token labelled with the share of the signals that put it in their top k (soft labels).
A variant may set its own Adam `learning_rate` (the convex stacks take 1e-2: ~50 weights converge in 6-12 epochs
instead of running to the epoch cap at 1e-3, with the same held-out scores).
Every variant trains `TrainingSettings.seeds` networks side by side (different initialisations, the same
batches; each stops early on its own validation AUROC); the explainer is their ensemble (mean logit), the
selection reads the seed-mean validation AUROC, and `predict(..., member=i)` gives seed i's own scores, so
that the seed spread is reported.
Objectives: `focal` (the paper's), `pairwise` (logistic loss on every rationale/non-rationale token pair
of an example: a ranking objective, since explanations are judged by how they rank tokens), both summed, or
`listwise` (issue 10: cross-entropy between the softmax of an example's scores and its rationale tokens' share of
the labels, ListNet's top-one loss: it rewards putting rationale tokens at the very top, which is what a top-k
budget reads, where the pairwise loss counts a swap at the bottom of the ranking as much as one at the top).

`select_variant` chooses a variant without the held-out task: train on one training task, validate on
the other (on all its validation rationale examples, mispredicted ones too), and the reverse; the mean
validation AUROC decides. Only unlabeled signals of the other task enter a fit (its labels are used to score
the validation, never to train).
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn
from tqdm.auto import tqdm

from learned_attribution.metrics.plausibility import auroc_score, budget_k

from .expnet import calibrate_threshold, focal_loss
from .signals import FEATURE_SETS, signed_columns

logger = logging.getLogger(__name__)

STANDARDISE = ("global", "per_task")
OBJECTIVES = ("focal", "pairwise", "focal+pairwise", "listwise")
NETWORKS = ("mlp", "simplex")
PSEUDO_RULES = ("cheap", "agreement")
SIGNS = ("signed", "magnitude")
PSEUDO_TASK = "pseudo"
ANCHOR_COLUMN = "__anchor__"
ANCHOR_SCALE = 4.0  # the anchor's logit range: comparable to what the residual network learns


@dataclass(frozen=True)
class Variant:
    name: str
    feature_sets: tuple[str, ...] = ("attention",)
    standardise: str = "global"
    objective: str = "focal"
    balance: bool = False
    gating: bool = False
    self_training: bool = False
    example_z: bool = False
    anchor: str | None = None  # a signal column the learned residual is added to (rank-normalised per example)
    anchor_weight: float = 1.0  # weight of the residual at prediction (0: the anchor alone)
    network: str = "mlp"  # mlp: ExpNet's 2-layer network; simplex: a convex stack of rank-normalised inputs
    pseudo: str = "cheap"  # self-training's pseudo-rationale rule (see pseudo_rationales)
    signs: str = "signed"  # magnitude: signed columns enter as absolute values
    learning_rate: float | None = None  # Adam's step for this variant (None: TrainingSettings.learning_rate)

    def __post_init__(self) -> None:
        where = f"expnet_plus variant {self.name!r}"
        if self.network not in NETWORKS:
            raise ValueError(f"{where}: network={self.network!r}, expected one of {NETWORKS}")
        if self.pseudo not in PSEUDO_RULES:
            raise ValueError(f"{where}: pseudo={self.pseudo!r}, expected one of {PSEUDO_RULES}")
        if self.signs not in SIGNS:
            raise ValueError(f"{where}: signs={self.signs!r}, expected one of {SIGNS}")
        if self.network == "simplex":
            conflicting = [flag for flag in ("example_z", "gating", "anchor") if getattr(self, flag)]
            if conflicting or self.standardise != "global":
                raise ValueError(f"{where}: a simplex stack rank-normalises its inputs within the example, so it "
                                 f"takes no {conflicting or ['standardise: ' + self.standardise]}")
        if self.anchor is None and self.anchor_weight != 1.0:
            raise ValueError(f"{where}: anchor_weight needs an anchor column")
        if self.learning_rate is not None and not float(self.learning_rate) > 0:
            raise ValueError(f"{where}: learning_rate={self.learning_rate!r} must be positive")
        if not 0.0 <= float(self.anchor_weight) <= 1.0:
            raise ValueError(f"{where}: anchor_weight={self.anchor_weight!r} must be in [0, 1]")
        unknown = set(self.feature_sets) - set(FEATURE_SETS)
        if not self.feature_sets or unknown:
            raise ValueError(f"{where}: feature_sets {list(self.feature_sets)} must be a non-empty subset of "
                             f"{list(FEATURE_SETS)}")
        if self.standardise not in STANDARDISE:
            raise ValueError(f"{where}: standardise={self.standardise!r}, expected one of {STANDARDISE}")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"{where}: objective={self.objective!r}, expected one of {OBJECTIVES}")

    @classmethod
    def from_params(cls, name: str, settings: dict) -> "Variant":
        settings = dict(settings)
        settings["feature_sets"] = tuple(settings.get("feature_sets", ("attention",)))
        unknown = set(settings) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"expnet_plus variant {name!r}: unknown settings {sorted(unknown)}")
        return cls(name=name, **settings)

    def describe(self) -> str:
        inputs = "within-example ranks" if self.network == "simplex" else f"{self.standardise} z"
        parts = ["+".join(self.feature_sets), inputs, self.objective]
        if self.network == "simplex":
            parts.append("convex stack")
        parts += [flag for flag in ("example_z", "balance", "gating", "self_training") if getattr(self, flag)]
        if self.self_training and self.pseudo != "cheap":
            parts.append(f"{self.pseudo} pseudo-rationales")
        if self.signs == "magnitude":
            parts.append("signed inputs as magnitudes")
        if self.anchor:
            parts.append(f"anchored on {self.anchor} + {self.anchor_weight:g} x residual")
        if self.learning_rate:
            parts.append(f"learning rate {self.learning_rate:g}")
        return ", ".join(parts)


@dataclass
class TrainingSettings:
    hidden: int = 16
    alpha: float = 0.25
    gamma: float = 2.0
    learning_rate: float = 1e-3
    examples_per_batch: int = 64
    max_epochs: int = 30
    patience: int = 4
    gate_l1: float = 0.01
    pseudo_weight: float = 0.5  # weight of the pseudo-labelled task relative to a real training task
    seeds: int = 3  # networks trained side by side from different initialisations (the explainer is their ensemble)
    seed: int = 13

    def __post_init__(self) -> None:
        if int(self.seeds) < 1:
            raise ValueError(f"parameter crosstask.expnet_plus.training.seeds={self.seeds!r} must be at least 1")


class GatedExpNet(nn.Module):
    """ExpNet's 2-layer network (inputs -> hidden ReLU -> 1), optionally with one sigmoid gate per head
    multiplying every input column of that head (`head_of_column[c]` = head index, -1 = never gated).
    `members` independent copies (seeds) side by side: inputs [..., F] -> logits [members, ...]."""

    def __init__(self, n_features: int, hidden: int, head_of_column: Sequence[int] | None = None, members: int = 1):
        super().__init__()
        # each member initialised exactly as nn.Linear would (so one member reproduces ExpNet's network)
        first = [nn.Linear(n_features, hidden) for _ in range(members)]
        second = [nn.Linear(hidden, 1) for _ in range(members)]
        self.w1 = nn.Parameter(torch.stack([layer.weight.detach().T for layer in first]))  # [S, F, H]
        self.b1 = nn.Parameter(torch.stack([layer.bias.detach() for layer in first]))  # [S, H]
        self.w2 = nn.Parameter(torch.stack([layer.weight.detach()[0] for layer in second]))  # [S, H]
        self.b2 = nn.Parameter(torch.stack([layer.bias.detach()[0] for layer in second]))  # [S]
        self.gate_logits = None
        if head_of_column is not None:
            heads = torch.as_tensor(list(head_of_column), dtype=torch.long)
            self.register_buffer("head_of_column", heads)
            self.gate_logits = nn.Parameter(torch.full((members, int(heads.max()) + 1), 2.0))  # gates start near 0.88

    @property
    def members(self) -> int:
        return self.w1.shape[0]

    def architecture(self) -> dict:
        heads = self.head_of_column.tolist() if self.gate_logits is not None else None
        return {"class": "GatedExpNet", "n_features": self.w1.shape[1], "hidden": self.w1.shape[2],
                "head_of_column": heads, "members": self.members}

    def gates(self) -> torch.Tensor | None:
        """[members, heads] gate values, None without gating."""
        return None if self.gate_logits is None else torch.sigmoid(self.gate_logits)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        shape = features.shape[:-1]
        x = features.reshape(1, -1, features.shape[-1])  # [1, N, F]
        if self.gate_logits is not None:
            gated = self.head_of_column >= 0
            scale = torch.ones(self.members, features.shape[-1], dtype=features.dtype, device=features.device)
            scale[:, gated] = self.gates()[:, self.head_of_column[gated]]
            x = x * scale[:, None, :]  # [S, N, F]
        hidden = torch.relu(torch.matmul(x, self.w1) + self.b1[:, None, :])  # [S, N, H]
        logits = (hidden * self.w2[:, None, :]).sum(-1) + self.b2[:, None]
        return logits.reshape(self.members, *shape)


class SimplexStack(nn.Module):
    """A convex stack: logits = scale x (inputs . softmax(weights)) + bias, per member, inputs [..., F] ->
    [members, ...]. With rank-normalised inputs the score ranks tokens by a weighted mean of the signals' ranks;
    scale and bias only calibrate (they never change a ranking)."""

    def __init__(self, n_features: int, members: int = 1):
        super().__init__()
        self.weight_logits = nn.Parameter(0.01 * torch.randn(members, n_features))
        self.log_scale = nn.Parameter(torch.full((members,), float(np.log(ANCHOR_SCALE))))
        self.bias = nn.Parameter(torch.zeros(members))

    @property
    def members(self) -> int:
        return self.weight_logits.shape[0]

    def architecture(self) -> dict:
        return {"class": "SimplexStack", "n_features": self.weight_logits.shape[1], "members": self.members}

    def weights(self) -> torch.Tensor:
        """[members, F] convex weights."""
        return torch.softmax(self.weight_logits, -1)

    def gates(self) -> None:
        return None

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        shape = features.shape[:-1]
        mixed = features.reshape(-1, features.shape[-1]) @ self.weights().T  # [N, S]
        logits = self.log_scale.exp()[None, :] * mixed + self.bias[None, :]
        return logits.T.reshape(self.members, *shape)


def build_network(architecture: dict) -> nn.Module:
    """A network from its `architecture()` dict (as saved with a trained explainer)."""
    architecture = dict(architecture)
    kind = architecture.pop("class")
    if kind == "GatedExpNet":
        return GatedExpNet(**architecture)
    if kind == "SimplexStack":
        return SimplexStack(**architecture)
    raise ValueError(f"unknown ExpNet+ network class {kind!r}")


def head_of_columns(columns: Sequence[str]) -> list[int]:
    """Head index of every per-head column (`..._h<k>`), -1 for the others."""
    heads = []
    for column in columns:
        match = re.search(r"_h(\d+)$", column)
        heads.append(int(match.group(1)) if match else -1)
    return heads


def pairwise_ranking_loss(logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor,
                          example_weights: torch.Tensor | None = None) -> torch.Tensor:
    """Logistic pairwise loss on padded examples [B, T]: for every example, the mean over its
    (rationale i, non-rationale j) token pairs of log(1 + exp(-(s_i - s_j))), each pair weighted by
    label_i - label_j (1 with hard labels; a soft pseudo-label of 0.6 weighs its pairs 0.6); rationale tokens
    have labels >= 0.5. Examples without such a pair are skipped; the result is the (weighted) mean over the
    other examples."""
    positive = (labels >= 0.5) & mask
    negative = (labels < 0.5) & mask
    pair = positive[:, :, None] & negative[:, None, :]  # [B, T(i), T(j)]
    pair_weights = (labels[:, :, None] - labels[:, None, :]) * pair
    losses = nn.functional.softplus(-(logits[:, :, None] - logits[:, None, :]))
    total_weight = pair_weights.sum((1, 2))
    per_example = (losses * pair_weights).sum((1, 2)) / total_weight.clamp(min=1e-12)
    return _mean_over_examples(per_example, total_weight > 0, example_weights)


def listwise_ranking_loss(logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor,
                          example_weights: torch.Tensor | None = None) -> torch.Tensor:
    """ListNet's top-one loss on padded examples [B, T]: for every example, -sum_i p_i log softmax(s)_i over its
    real tokens, p = the rationale tokens' labels (>= 0.5) normalised to sum to one (soft pseudo-labels weigh
    their tokens by their label). It is log(number of tokens) for constant scores and falls to log(number of
    rationale tokens) as they take all the softmax mass. Examples without both kinds are skipped, as in
    `pairwise_ranking_loss`; the result is the (weighted) mean over the other examples."""
    positive = (labels >= 0.5) & mask
    target = labels * positive
    log_probabilities = torch.log_softmax(logits.masked_fill(~mask, float("-inf")), dim=-1)
    per_example = -(target * log_probabilities.masked_fill(~mask, 0.0)).sum(-1) / target.sum(-1).clamp(min=1e-12)
    both = positive.any(-1) & ((labels < 0.5) & mask).any(-1)
    return _mean_over_examples(per_example, both, example_weights)


def _mean_over_examples(per_example: torch.Tensor, kept: torch.Tensor,
                        example_weights: torch.Tensor | None) -> torch.Tensor:
    """The (weighted) mean of a ranking loss over the examples `kept` (those with both kinds of token)."""
    weights = torch.ones_like(per_example) if example_weights is None else example_weights
    weights = weights * kept
    return (per_example * weights).sum() / weights.sum().clamp(min=1e-12)


def example_aurocs(logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-example AUROC of padded scores [..., B, T] against 0/1 labels [B, T]: the share of (rationale,
    other) token pairs ranked right, ties half (Mann-Whitney, as `auroc_score`); NaN for an example without
    both kinds."""
    positive = (labels > 0.5) & mask
    negative = (labels < 0.5) & mask
    pair = (positive[:, :, None] & negative[:, None, :]).float()
    difference = logits[..., :, None] - logits[..., None, :]
    right = (difference > 0).float() + 0.5 * (difference == 0).float()
    n_pairs = pair.sum((1, 2))
    aurocs = (right * pair).sum((-2, -1)) / n_pairs.clamp(min=1)
    return torch.where(n_pairs > 0, aurocs, torch.full_like(aurocs, float("nan")))


# ----------------------------------------------------------------------------------------------------
# Token tables -> padded examples
# ----------------------------------------------------------------------------------------------------

@dataclass
class Examples:
    """Token rows of several examples, grouped: features [N, F] (standardised), labels [N], and per
    example its first row, length, task and weight."""

    features: torch.Tensor
    labels: torch.Tensor
    starts: np.ndarray
    lengths: np.ndarray
    tasks: np.ndarray
    example_ids: np.ndarray
    weights: np.ndarray | None = None
    offsets: torch.Tensor | None = None  # [N] fixed logit offsets (the anchor term), None: no anchor

    def __len__(self) -> int:
        return len(self.starts)

    def padded(self, index: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Examples `index` as [B, T, F] features, [B, T] labels, [B, T] mask and [B, T] offsets (0 without
        an anchor)."""
        device = self.features.device
        lengths = torch.as_tensor(self.lengths[index], device=device)
        width = int(lengths.max())
        positions = torch.arange(width, device=device)[None, :]
        mask = positions < lengths[:, None]
        rows = torch.as_tensor(self.starts[index], device=device)[:, None] + positions
        rows = torch.where(mask, rows, torch.zeros_like(rows))
        offsets = torch.zeros(rows.shape, device=device) if self.offsets is None else self.offsets[rows] * mask
        return self.features[rows], self.labels[rows] * mask, mask, offsets

    def split_scores(self, scores: np.ndarray) -> list[np.ndarray]:
        return [scores[s:s + n] for s, n in zip(self.starts, self.lengths)]

    def gold(self) -> list[np.ndarray]:
        return self.split_scores(self.labels.numpy())


def group_examples(table: pd.DataFrame, columns: Sequence[str], mean: dict | np.ndarray, std: dict | np.ndarray,
                   label_column: str = "token_label") -> Examples:
    """Token rows (contiguous per example, in position order) -> `Examples`, standardised per task
    (`mean`/`std` dicts keyed by task) or globally (arrays)."""
    table = table.reset_index(drop=True)
    features = table[list(columns)].to_numpy(np.float32, copy=True)
    if isinstance(mean, dict):
        tasks = table["task"].to_numpy()
        for task in np.unique(tasks):
            rows = tasks == task
            features[rows] = (features[rows] - mean[task]) / std[task]
    else:
        features = (features - mean) / std
    boundaries = np.r_[0, np.nonzero(table["example_id"].to_numpy()[1:] != table["example_id"].to_numpy()[:-1])[0] + 1]
    lengths = np.diff(np.r_[boundaries, len(table)])
    example_ids = table["example_id"].to_numpy()[boundaries]
    if len(np.unique(example_ids)) != len(example_ids):
        raise ValueError("token rows of an example must be contiguous (sort by example_id, position)")
    labels = table[label_column].to_numpy(np.float32) if label_column in table else np.zeros(len(table), np.float32)
    offsets = torch.as_tensor(table[ANCHOR_COLUMN].to_numpy(np.float32, copy=True)) if ANCHOR_COLUMN in table else None
    return Examples(torch.as_tensor(features), torch.as_tensor(labels), boundaries, lengths,
                    table["task"].to_numpy()[boundaries], example_ids, np.ones(len(boundaries)), offsets)


def within_example_ranks(values: np.ndarray, example_ids: np.ndarray) -> np.ndarray:
    """Every column of `values` [N, F] rank-normalised within each example: lowest -0.5, highest 0.5, ties
    averaged, a one-token example 0. Monotone within an example, so each column ranks tokens as before."""
    frame = pd.DataFrame(np.asarray(values, dtype=np.float64).reshape(len(example_ids), -1))
    groups = frame.groupby(np.asarray(example_ids), sort=False)
    ranks = groups.rank(method="average") - 1
    sizes = groups[0].transform("size").to_numpy()[:, None] - 1
    normalised = np.where(sizes > 0, ranks.to_numpy() / np.maximum(sizes, 1), 0.5)
    return (normalised - 0.5).astype(np.float32)


def anchor_offsets(values: np.ndarray, example_ids: np.ndarray) -> np.ndarray:
    """The anchor term: `values` rank-normalised within each example (`within_example_ranks`), scaled to logits
    in [-ANCHOR_SCALE/2, ANCHOR_SCALE/2]; the anchor alone ranks tokens exactly as its signal does."""
    return ANCHOR_SCALE * within_example_ranks(np.asarray(values)[:, None], example_ids)[:, 0]


def example_ranked(table: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """`table` with `columns` replaced by their within-example ranks."""
    values = within_example_ranks(table[list(columns)].to_numpy(np.float32), table["example_id"].to_numpy())
    return table.assign(**{c: values[:, i] for i, c in enumerate(columns)})


def magnitudes(table: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """`table` with its signed columns among `columns` as absolute values (`Variant.signs: magnitude`)."""
    return table.assign(**{column: table[column].abs() for column in signed_columns(columns)})


def with_anchor(table: pd.DataFrame, anchor: str) -> pd.DataFrame:
    """`table` with the anchor term of column `anchor` (per example) as `ANCHOR_COLUMN`."""
    if anchor not in table:
        raise ValueError(f"anchor column {anchor!r} is not among the signal columns")
    return table.assign(**{ANCHOR_COLUMN: anchor_offsets(table[anchor].to_numpy(), table["example_id"].to_numpy())})


def within_example_z(values: np.ndarray, example_ids: np.ndarray) -> np.ndarray:
    """Every column z-scored within each example (population std; a one-token example becomes 0)."""
    frame = pd.DataFrame(values)
    groups = frame.groupby(np.asarray(example_ids), sort=False)
    return ((frame - groups.transform("mean")) / (groups.transform("std", ddof=0) + 1e-6)).to_numpy(np.float32)


def example_standardised(table: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """`table` with `columns` replaced by their within-example z-scores."""
    values = within_example_z(table[list(columns)].to_numpy(np.float32), table["example_id"].to_numpy())
    return table.assign(**{c: values[:, i] for i, c in enumerate(columns)})


def statistics(table: pd.DataFrame, columns: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    values = table[list(columns)].to_numpy(np.float64)
    return values.mean(0).astype(np.float32), (values.std(0) + 1e-6).astype(np.float32)


def per_task_statistics(tables: dict[str, pd.DataFrame], columns: Sequence[str]) -> tuple[dict, dict]:
    stats = {task: statistics(table, columns) for task, table in tables.items()}
    return {t: s[0] for t, s in stats.items()}, {t: s[1] for t, s in stats.items()}


# ----------------------------------------------------------------------------------------------------
# Pseudo-rationales
# ----------------------------------------------------------------------------------------------------

def pseudo_rationales(table: pd.DataFrame, rho: float, n_heads: int, min_agree: int = 2,
                      rule: str = "cheap") -> pd.DataFrame:
    """Unlabeled token rows with pseudo labels where cheap signals agree; other tokens are dropped, and so are
    examples left without both kinds. With k = round(rho * n) for an example of n tokens:
    - `cheap`: raw attention, positive attention x gradient (means over heads) and the layer-gradient norm; a
      rationale token (label 1) when at least `min_agree` of them put it in their top k; a non-rationale token
      when all three put it in the bottom half.
    - `agreement`: those three plus |layer gradient x input|, saliency and |input x gradient| (the embedding
      gradient's norm and its product with the embedding); a token's label is the share of the six that put it
      in their top k, kept as a rationale token when at least half do (a soft label in [0.5, 1]); a
      non-rationale token (0) when none does and at least half put it in their bottom half."""
    if rule not in PSEUDO_RULES:
        raise ValueError(f"pseudo-rationale rule {rule!r}, expected one of {PSEUDO_RULES}")
    table = table.drop(columns=["token_label"], errors="ignore").reset_index(drop=True)
    signals = pd.DataFrame({
        "raw_attention": table[[f"cls_to_tok_h{h}" for h in range(n_heads)]].mean(1),
        "attention_x_gradient": table[[f"axg_h{h}" for h in range(n_heads)]].clip(lower=0).mean(1),
        "layer_gradient": table["layer_grad_norm"],
    })
    if rule == "agreement":
        signals["layer_gradient_x_input"] = table["layer_grad_x_input"].abs()
        signals["saliency"] = table["embedding_grad_norm"]
        signals["input_x_gradient"] = table["embedding_grad_x_input"].abs()
    groups = table["example_id"]
    ranks = signals.groupby(groups).rank(ascending=False, method="first")  # 1 = highest
    n = groups.map(groups.value_counts())
    k = n.map(lambda size: budget_k(int(size), rho))
    top = ranks.le(k, axis=0).sum(1)
    bottom = ranks.gt(n / 2, axis=0).sum(1)
    n_signals = signals.shape[1]
    if rule == "cheap":
        labels = np.where(top >= min_agree, 1.0, np.where(bottom == n_signals, 0.0, np.nan))
    else:
        share = top / n_signals
        labels = np.where(share >= 0.5, share, np.where((top == 0) & (bottom >= n_signals / 2), 0.0, np.nan))
    table["token_label"] = labels
    table = table[table["token_label"].notna()]
    by_example = table.groupby("example_id")["token_label"]
    both = (by_example.transform("max") >= 0.5) & (by_example.transform("min") < 0.5)
    return table[both].reset_index(drop=True)


# ----------------------------------------------------------------------------------------------------
# Training and prediction
# ----------------------------------------------------------------------------------------------------

@dataclass
class ExpNetPlus:
    """A trained variant, ready for one target classifier: `predict` takes raw signal columns. `net` holds one
    network per seed; the explainer's score is their ensemble (mean logit)."""

    variant: Variant
    columns: list[str]
    net: nn.Module  # GatedExpNet or SimplexStack, inputs [..., F] -> logits [members, ...]
    target_mean: np.ndarray  # standardisation applied to the target classifier's signals
    target_std: np.ndarray
    history: list[dict] = field(default_factory=list)
    best_epoch: int = 0  # the last best epoch among the members
    member_best_epochs: list[int] = field(default_factory=list)
    member_val_auroc: list[float] = field(default_factory=list)  # each seed's validation AUROC at its best epoch
    calibrated_threshold: float = 0.5
    n_pseudo_examples: int = 0
    threshold: float = 0.5
    context: dict = field(default_factory=dict)  # fold, tasks, encoder, classifier shape (models/artifacts.py)

    @property
    def n_members(self) -> int:
        return self.net.members

    def predict(self, features: np.ndarray, example_ids: np.ndarray | None = None,
                member: int | None = None) -> np.ndarray:
        """Token probabilities for raw signals [N, len(columns)] of the target classifier: the seeds' ensemble,
        or one seed's network (`member`). `example_ids` (one per row) are needed by the variants that read whole
        examples (example_z, anchor, simplex)."""
        features = np.asarray(features, np.float32)
        if self.variant.signs == "magnitude":
            signed = [self.columns.index(column) for column in signed_columns(self.columns)]
            features = features.copy()
            features[:, signed] = np.abs(features[:, signed])
        per_example = self.variant.example_z or self.variant.anchor or self.variant.network == "simplex"
        if per_example and example_ids is None:
            raise ValueError(f"ExpNet+ variant {self.variant.name!r} reads whole examples: pass example_ids")
        offsets = 0.0
        if self.variant.anchor:
            offsets = torch.as_tensor(anchor_offsets(features[:, self.columns.index(self.variant.anchor)],
                                                     example_ids))
        if self.variant.example_z:
            features = within_example_z(features, example_ids)
        if self.variant.network == "simplex":
            features = within_example_ranks(features, example_ids)
        return self.network_probabilities(torch.as_tensor((features - self.target_mean) / self.target_std), offsets,
                                          member)

    def network_probabilities(self, inputs: torch.Tensor, offsets: torch.Tensor | float,
                              member: int | None = None) -> np.ndarray:
        """Token probabilities from the network's own inputs (already transformed and standardised) and the anchor
        offsets (0 without an anchor): sigmoid(offset + anchor_weight x the ensemble's, or one seed's, logit)."""
        with torch.inference_mode():
            if not self.variant.anchor_weight:
                residual = torch.zeros(len(inputs))
            else:
                logits = self.net(inputs)
                residual = logits.mean(0) if member is None else logits[member]
            return torch.sigmoid(offsets + self.variant.anchor_weight * residual).numpy()

    def gates(self) -> dict[str, float]:
        """Head gates (mean over the seeds), empty without gating."""
        gates = self.net.gates()
        return {} if gates is None else {f"gate_h{h}": float(g) for h, g in enumerate(gates.detach().mean(0))}

    def stack_weights(self) -> dict[str, float]:
        """A simplex stack's convex weight of every input column (mean over the seeds), empty otherwise."""
        if not isinstance(self.net, SimplexStack):
            return {}
        return dict(zip(self.columns, self.net.weights().detach().mean(0).tolist()))


def mean_example_auroc(scores: list[np.ndarray], gold: list[np.ndarray]) -> float:
    values = [auroc_score(g, s) for s, g in zip(scores, gold) if 0 < g.sum() < len(g)]
    return float(np.mean(values)) if values else float("nan")


def _objective(net: nn.Module, x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor, offsets: torch.Tensor,
               weights: torch.Tensor, variant: Variant, settings: TrainingSettings) -> torch.Tensor:
    """The members' losses summed (their parameters are disjoint, so each member trains as if alone)."""
    logits = net(x) + offsets  # [S, B, T]; the residual is trained on top of the anchor (offsets 0 without one)
    members = logits.shape[0]
    loss = torch.zeros((), device=logits.device)
    if "focal" in variant.objective:
        token_weights = weights[:, None].expand_as(mask)[mask]
        per_token = focal_loss(logits[:, mask], y[mask], settings.alpha, settings.gamma, reduction="none")
        loss = loss + ((per_token * token_weights).sum(-1) / token_weights.sum()).sum()
    ranking = {"pairwise": pairwise_ranking_loss, "listwise": listwise_ranking_loss}
    for name, ranking_loss in ranking.items():
        if name in variant.objective:  # the members' examples side by side, as one batch
            batch = logits.shape[1]
            loss = loss + members * ranking_loss(logits.reshape(members * batch, -1), y.repeat(members, 1),
                                                 mask.repeat(members, 1), weights.repeat(members))
    gates = net.gates()
    if gates is not None:
        loss = loss + settings.gate_l1 * gates.mean(-1).sum()
    return loss


def member_validation_aurocs(net: nn.Module, examples: "Examples", examples_per_chunk: int = 64) -> np.ndarray:
    """Each member's mean per-example AUROC on labelled `examples` (anchor offsets included)."""
    totals, count = 0.0, 0
    with torch.inference_mode():
        for start in range(0, len(examples), examples_per_chunk):
            x, y, mask, offsets = examples.padded(np.arange(start, min(start + examples_per_chunk, len(examples))))
            aurocs = example_aurocs(net(x) + offsets, y, mask)  # [S, B]
            valid = ~torch.isnan(aurocs[0])
            totals = totals + aurocs[:, valid].sum(-1)
            count += int(valid.sum())
    return (totals / max(count, 1)).cpu().numpy() if count else np.full(net.members, np.nan)


def build_variant_network(variant: Variant, columns: Sequence[str], settings: TrainingSettings) -> nn.Module:
    if variant.network == "simplex":
        return SimplexStack(len(columns), members=settings.seeds)
    return GatedExpNet(len(columns), settings.hidden, head_of_columns(columns) if variant.gating else None,
                       members=settings.seeds)


def fit_variant(variant: Variant, train: pd.DataFrame, val: pd.DataFrame, target: pd.DataFrame,
                stats_tables: dict[str, pd.DataFrame], columns: Sequence[str], rho: float, n_heads: int,
                settings: TrainingSettings, device: torch.device | str = "cpu") -> ExpNetPlus:
    """Train `variant` on the labelled `train` token rows (one or more tasks) on `device`, stop early on `val`
    (mean per-example AUROC), for the target classifier whose unlabeled signal rows are `target`
    (labels, if present, are dropped here). `stats_tables` maps every task (training tasks and the
    target's task) to its unlabeled token rows, for per-task standardisation. `settings.seeds` networks train
    side by side on the same batches, each keeping its own best epoch. The trained networks are returned on the
    CPU, where they are saved and applied to signal tables."""
    target = target.drop(columns=["token_label"], errors="ignore")
    target_task = target["task"].iloc[0]
    columns = list(columns)
    if variant.signs == "magnitude":  # first, as predict does: every later step sees the magnitudes
        train, val, target = (magnitudes(t, columns) for t in (train, val, target))
        stats_tables = {task: magnitudes(t, columns) for task, t in stats_tables.items()}
    if variant.anchor:
        if variant.anchor not in columns:
            raise ValueError(f"expnet_plus variant {variant.name!r}: anchor {variant.anchor!r} is not among its input "
                             f"columns (add its feature set)")
        train, val, target = (with_anchor(t, variant.anchor) for t in (train, val, target))
    if variant.self_training:
        pseudo = pseudo_rationales(target, rho, n_heads, rule=variant.pseudo).assign(task=PSEUDO_TASK)
        train = pd.concat([train, pseudo], ignore_index=True)
    if variant.example_z:
        train, val, target = (example_standardised(t, columns) for t in (train, val, target))
        stats_tables = {task: example_standardised(t, columns) for task, t in stats_tables.items()}
    if variant.network == "simplex":  # ranks within the example: nothing to standardise
        train, val = (example_ranked(t, columns) for t in (train, val))
        mean, std = np.zeros(len(columns), np.float32), np.ones(len(columns), np.float32)
        target_mean, target_std = mean, std
    elif variant.standardise == "per_task":
        mean, std = per_task_statistics({t: stats_tables[t] for t in set(train["task"]) - {PSEUDO_TASK}} |
                                        {target_task: stats_tables[target_task]}, columns)
        mean[PSEUDO_TASK], std[PSEUDO_TASK] = mean[target_task], std[target_task]
        target_mean, target_std = mean[target_task], std[target_task]
    else:
        mean, std = statistics(train[train["task"] != PSEUDO_TASK], columns)
        target_mean, target_std = mean, std
    train_examples = group_examples(train, columns, mean, std)
    val_examples = group_examples(val, columns, mean, std)
    tasks, counts = np.unique(train_examples.tasks, return_counts=True)
    if variant.balance or variant.self_training:
        share = {t: (settings.pseudo_weight if t == PSEUDO_TASK else 1.0) / c for t, c in zip(tasks, counts)}
        train_examples.weights = np.array([share[t] for t in train_examples.tasks]) * len(train_examples)
    torch.manual_seed(settings.seed)
    rng = np.random.default_rng(settings.seed)
    net = build_variant_network(variant, columns, settings).to(device)
    optimizer = torch.optim.Adam(net.parameters(), lr=variant.learning_rate or settings.learning_rate)
    model = ExpNetPlus(variant, columns, net, target_mean, target_std,
                       n_pseudo_examples=int(counts[tasks == PSEUDO_TASK].sum()))
    weights_all = torch.as_tensor(train_examples.weights, dtype=torch.float32, device=device)
    for examples in (train_examples, val_examples):
        examples.features, examples.labels = examples.features.to(device), examples.labels.to(device)
        if examples.offsets is not None:
            examples.offsets = examples.offsets.to(device)
    members = settings.seeds
    best = np.full(members, -np.inf)
    best_epochs, waited = np.zeros(members, dtype=int), np.zeros(members, dtype=int)
    best_state = {name: value.detach().clone() for name, value in net.named_parameters()}
    # anchor_weight 0 is the anchor alone: nothing to train.
    for epoch in range(1, (settings.max_epochs if variant.anchor_weight else 0) + 1):
        net.train()
        order = rng.permutation(len(train_examples))
        total = 0.0
        for start in range(0, len(order), settings.examples_per_batch):
            index = order[start:start + settings.examples_per_batch]
            x, y, mask, offsets = train_examples.padded(index)
            loss = _objective(net, x, y, mask, offsets, weights_all[index], variant, settings)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(index) / members
        net.eval()
        val_aurocs = member_validation_aurocs(net, val_examples)
        model.history.append({"epoch": epoch, "train_loss": total / len(order), "val_auroc": float(val_aurocs.mean()),
                              "member_val_auroc": val_aurocs.tolist()})
        improved = val_aurocs > best
        best[improved], best_epochs[improved], waited[improved] = val_aurocs[improved], epoch, 0
        waited[~improved] += 1
        for name, value in net.named_parameters():  # every parameter has the members first
            best_state[name][improved] = value.detach()[improved]
        if (waited >= settings.patience).all():
            break
    with torch.no_grad():
        for name, value in net.named_parameters():
            value.copy_(best_state[name])
    net.cpu().eval()
    model.best_epoch, model.member_best_epochs = int(best_epochs.max()), best_epochs.tolist()
    model.member_val_auroc = [float(v) for v in best] if model.history else []
    val_examples.features, val_examples.labels = val_examples.features.cpu(), val_examples.labels.cpu()
    val_offsets = 0.0 if val_examples.offsets is None else val_examples.offsets.cpu()
    val_probabilities = model.network_probabilities(val_examples.features, val_offsets)
    model.calibrated_threshold = calibrate_threshold(val_examples.split_scores(val_probabilities), val_examples.gold())
    logger.info("ExpNet+ %s: best epochs %s of %d, validation AUROC per seed %s", variant.name,
                model.member_best_epochs, len(model.history), np.round(best, 4).tolist())
    return model


def score_examples(model: ExpNetPlus, table: pd.DataFrame, member: int | None = None) -> pd.DataFrame:
    """One row per example of `table` (target classifier's signal rows): example_id and its token scores (the
    ensemble's, or one seed's network's with `member`)."""
    table = table.reset_index(drop=True)
    probabilities = model.predict(table[model.columns].to_numpy(np.float32), table["example_id"].to_numpy(), member)
    grouped = pd.Series(probabilities).groupby(table["example_id"].to_numpy(), sort=False)
    return pd.DataFrame({"example_id": list(grouped.groups), "scores": [g.to_numpy() for _, g in grouped]})


def validation_auroc(model: ExpNetPlus, table: pd.DataFrame, member: int | None = None) -> float:
    """Mean per-example AUROC of `model` (the ensemble, or one seed's network) on labelled token rows of its
    target classifier."""
    scored = score_examples(model, table, member)
    gold = table.groupby("example_id", sort=False)["token_label"].apply(np.asarray)
    return mean_example_auroc(list(scored["scores"]), [gold[i] for i in scored["example_id"]])


def select_variant(variants: Sequence[Variant], tasks: dict[str, dict[str, pd.DataFrame]],
                   columns: dict[str, Sequence[str]], rho: float, n_heads: int,
                   settings: TrainingSettings, device: torch.device | str = "cpu") -> pd.DataFrame:
    """Leave-one-training-task-out validation of every variant, on the two training tasks only.

    `tasks[task]` holds that training task's `train` and `val` token rows (correct predictions with a
    non-empty rationale: what a network trains and stops early on), `val_all` (every validation example with a
    rationale, mispredicted ones too) and `unlabeled` (all its rationale token rows, the signals only). For each
    ordered pair (A, B): fit on A (early stopping on A's val) for B's classifier, score on B's `val_all`, the way
    the held-out test set is scored (every rationale example, SPEC §4): the mean of the seeds' own AUROCs
    (`val_auroc`, spread `val_auroc_seed_sd`), so a lucky seed does not pick the variant.
    `columns` maps each variant's name to its input columns. Returns one row per variant and direction
    plus the mean (`direction == "mean"`), best first, with `rank` and `selected` (rank 1; ties go to
    the earlier variant); the held-out task is not an argument, so it cannot be read."""
    if len(tasks) != 2:
        raise ValueError(f"select_variant needs exactly the two training tasks, got {sorted(tasks)}")
    rows = []
    unlabeled = {t: parts["unlabeled"].drop(columns=["token_label"], errors="ignore") for t, parts in tasks.items()}
    for variant in tqdm(variants, desc="ExpNet+ selection (variants x 2 directions)", unit="variant"):
        scores = []
        for source, other in (tuple(tasks), tuple(reversed(list(tasks)))):
            model = fit_variant(variant, tasks[source]["train"], tasks[source]["val"], unlabeled[other],
                                unlabeled, columns[variant.name], rho, n_heads, settings, device)
            seed_aurocs = [validation_auroc(model, tasks[other]["val_all"], member)
                           for member in range(model.n_members)]
            scores.append(float(np.mean(seed_aurocs)))
            rows.append({"variant": variant.name, "direction": f"{source}->{other}", "val_auroc": scores[-1],
                         "val_auroc_seed_sd": float(np.std(seed_aurocs)), "best_epoch": model.best_epoch})
        rows.append({"variant": variant.name, "direction": "mean", "val_auroc": float(np.mean(scores)),
                     "val_auroc_seed_sd": np.nan, "best_epoch": np.nan})
    table = pd.DataFrame(rows)
    order = table[table["direction"] == "mean"].sort_values("val_auroc", ascending=False, kind="mergesort")["variant"]
    table["rank"] = table["variant"].map({v: i + 1 for i, v in enumerate(order)})
    table["selected"] = table["rank"] == 1
    return table.sort_values(["rank", "direction"], kind="mergesort").reset_index(drop=True)
