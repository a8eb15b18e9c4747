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
Objectives: `focal` (the paper's), `pairwise` (logistic loss on every rationale/non-rationale token pair
of an example: a ranking objective, since explanations are judged by how they rank tokens) or both summed.

`select_variant` chooses a variant without the held-out task: train on one training task, validate on
the other, and the reverse; the mean validation AUROC decides. Only unlabeled signals of the other
task enter a fit (its labels are used to score the validation, never to train).
"""
from __future__ import annotations

import copy
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
from .signals import FEATURE_SETS

logger = logging.getLogger(__name__)

STANDARDISE = ("global", "per_task")
OBJECTIVES = ("focal", "pairwise", "focal+pairwise")
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

    def __post_init__(self) -> None:
        where = f"expnet_plus variant {self.name!r}"
        if self.anchor is None and self.anchor_weight != 1.0:
            raise ValueError(f"{where}: anchor_weight needs an anchor column")
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
        parts = ["+".join(self.feature_sets), f"{self.standardise} z", self.objective]
        parts += [flag for flag in ("example_z", "balance", "gating", "self_training") if getattr(self, flag)]
        if self.anchor:
            parts.append(f"anchored on {self.anchor} + {self.anchor_weight:g} x residual")
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
    seed: int = 13


class GatedExpNet(nn.Module):
    """ExpNet's 2-layer network (inputs -> hidden ReLU -> 1), optionally with one sigmoid gate per head
    multiplying every input column of that head (`head_of_column[c]` = head index, -1 = never gated)."""

    def __init__(self, n_features: int, hidden: int, head_of_column: Sequence[int] | None = None):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(n_features, hidden), nn.ReLU(), nn.Linear(hidden, 1))
        self.gate_logits = None
        if head_of_column is not None:
            heads = torch.as_tensor(list(head_of_column), dtype=torch.long)
            self.register_buffer("head_of_column", heads)
            self.gate_logits = nn.Parameter(torch.full((int(heads.max()) + 1,), 2.0))  # gates start near 0.88

    def gates(self) -> torch.Tensor | None:
        return None if self.gate_logits is None else torch.sigmoid(self.gate_logits)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        if self.gate_logits is not None:
            gated = self.head_of_column >= 0
            scale = torch.ones(features.shape[-1], dtype=features.dtype, device=features.device)
            scale[gated] = self.gates()[self.head_of_column[gated]]
            features = features * scale
        return self.layers(features).squeeze(-1)


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
    (rationale i, non-rationale j) token pairs of log(1 + exp(-(s_i - s_j))); examples without such
    a pair are skipped; the result is the (weighted) mean over the other examples."""
    positive = (labels > 0.5) & mask
    negative = (labels < 0.5) & mask
    pair = positive[:, :, None] & negative[:, None, :]  # [B, T(i), T(j)]
    losses = nn.functional.softplus(-(logits[:, :, None] - logits[:, None, :]))
    n_pairs = pair.sum((1, 2))
    per_example = (losses * pair).sum((1, 2)) / n_pairs.clamp(min=1)
    weights = torch.ones_like(per_example) if example_weights is None else example_weights
    weights = weights * (n_pairs > 0)
    return (per_example * weights).sum() / weights.sum().clamp(min=1e-12)


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
    offsets = torch.as_tensor(table[ANCHOR_COLUMN].to_numpy(np.float32)) if ANCHOR_COLUMN in table else None
    return Examples(torch.as_tensor(features), torch.as_tensor(labels), boundaries, lengths,
                    table["task"].to_numpy()[boundaries], example_ids, np.ones(len(boundaries)), offsets)


def anchor_offsets(values: np.ndarray, example_ids: np.ndarray) -> np.ndarray:
    """The anchor term: `values` rank-normalised within each example (lowest 0, highest 1, ties averaged; a
    one-token example 0.5), centred and scaled to logits in [-ANCHOR_SCALE/2, ANCHOR_SCALE/2]. Monotone in the
    values within an example, so the anchor alone ranks tokens exactly as its signal does."""
    series = pd.Series(np.asarray(values, dtype=np.float64))
    groups = series.groupby(np.asarray(example_ids), sort=False)
    ranks = groups.rank(method="average") - 1
    sizes = groups.transform("size") - 1
    normalised = np.where(sizes > 0, ranks / sizes.clip(lower=1), 0.5)
    return (ANCHOR_SCALE * (normalised - 0.5)).astype(np.float32)


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

def pseudo_rationales(table: pd.DataFrame, rho: float, n_heads: int, min_agree: int = 2) -> pd.DataFrame:
    """Unlabeled token rows with pseudo labels where the cheap signals agree: a token is a rationale
    token when at least `min_agree` of raw attention, positive attention x gradient (means over heads)
    and the layer-gradient norm put it in its example's top k = round(rho * n); a non-rationale token
    when all three put it in the bottom half; other tokens are dropped. Examples left without both
    kinds are dropped. Needs the attention, attention_x_gradient and layer_gradient columns."""
    table = table.drop(columns=["token_label"], errors="ignore").reset_index(drop=True)
    signals = pd.DataFrame({
        "raw_attention": table[[f"cls_to_tok_h{h}" for h in range(n_heads)]].mean(1),
        "attention_x_gradient": table[[f"axg_h{h}" for h in range(n_heads)]].clip(lower=0).mean(1),
        "layer_gradient": table["layer_grad_norm"],
    })
    groups = table["example_id"]
    ranks = signals.groupby(groups).rank(ascending=False, method="first")  # 1 = highest
    n = groups.map(groups.value_counts())
    k = n.map(lambda size: budget_k(int(size), rho))
    top = ranks.le(k, axis=0).sum(1)
    bottom = ranks.gt(n / 2, axis=0).all(1)
    table["token_label"] = np.where(top >= min_agree, 1.0, np.where(bottom, 0.0, np.nan))
    table = table[table["token_label"].notna()]
    kinds = table.groupby("example_id")["token_label"].transform("nunique")
    return table[kinds == 2].reset_index(drop=True)


# ----------------------------------------------------------------------------------------------------
# Training and prediction
# ----------------------------------------------------------------------------------------------------

@dataclass
class ExpNetPlus:
    """A trained variant, ready for one target classifier: `predict` takes raw signal columns."""

    variant: Variant
    columns: list[str]
    net: GatedExpNet
    target_mean: np.ndarray  # standardisation applied to the target classifier's signals
    target_std: np.ndarray
    history: list[dict] = field(default_factory=list)
    best_epoch: int = 0
    calibrated_threshold: float = 0.5
    n_pseudo_examples: int = 0
    threshold: float = 0.5
    context: dict = field(default_factory=dict)  # fold, tasks, encoder, classifier shape (models/artifacts.py)

    def predict(self, features: np.ndarray, example_ids: np.ndarray | None = None) -> np.ndarray:
        """Token probabilities for raw signals [N, len(columns)] of the target classifier; `example_ids`
        (one per row) are needed by `example_z` variants."""
        features = np.asarray(features, np.float32)
        if (self.variant.example_z or self.variant.anchor) and example_ids is None:
            raise ValueError(f"ExpNet+ variant {self.variant.name!r} reads whole examples: pass example_ids")
        offsets = 0.0
        if self.variant.anchor:
            offsets = torch.as_tensor(anchor_offsets(features[:, self.columns.index(self.variant.anchor)],
                                                     example_ids))
        if self.variant.example_z:
            features = within_example_z(features, example_ids)
        with torch.inference_mode():
            x = torch.as_tensor((features - self.target_mean) / self.target_std)
            residual = self.net(x) if self.variant.anchor_weight else torch.zeros(len(x))
            return torch.sigmoid(offsets + self.variant.anchor_weight * residual).numpy()

    def gates(self) -> dict[str, float]:
        gates = self.net.gates()
        return {} if gates is None else {f"gate_h{h}": float(g) for h, g in enumerate(gates.detach())}


def mean_example_auroc(scores: list[np.ndarray], gold: list[np.ndarray]) -> float:
    values = [auroc_score(g, s) for s, g in zip(scores, gold) if 0 < g.sum() < len(g)]
    return float(np.mean(values)) if values else float("nan")


def _objective(net: GatedExpNet, x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor, offsets: torch.Tensor,
               weights: torch.Tensor, variant: Variant, settings: TrainingSettings) -> torch.Tensor:
    logits = net(x) + offsets  # the residual is trained on top of the anchor (offsets 0 without one)
    loss = torch.zeros((), device=logits.device)
    if "focal" in variant.objective:
        token_weights = weights[:, None].expand_as(mask)[mask]
        per_token = focal_loss(logits[mask], y[mask], settings.alpha, settings.gamma, reduction="none")
        loss = loss + (per_token * token_weights).sum() / token_weights.sum()
    if "pairwise" in variant.objective:
        loss = loss + pairwise_ranking_loss(logits, y, mask, weights)
    gates = net.gates()
    if gates is not None:
        loss = loss + settings.gate_l1 * gates.mean()
    return loss


def fit_variant(variant: Variant, train: pd.DataFrame, val: pd.DataFrame, target: pd.DataFrame,
                stats_tables: dict[str, pd.DataFrame], columns: Sequence[str], rho: float, n_heads: int,
                settings: TrainingSettings, device: torch.device | str = "cpu") -> ExpNetPlus:
    """Train `variant` on the labelled `train` token rows (one or more tasks) on `device`, stop early on `val`
    (mean per-example AUROC), for the target classifier whose unlabeled signal rows are `target`
    (labels, if present, are dropped here). `stats_tables` maps every task (training tasks and the
    target's task) to its unlabeled token rows, for per-task standardisation. The trained network is
    returned on the CPU, where it is saved and applied to signal tables."""
    target = target.drop(columns=["token_label"], errors="ignore")
    target_task = target["task"].iloc[0]
    columns = list(columns)
    if variant.anchor:
        if variant.anchor not in columns:
            raise ValueError(f"expnet_plus variant {variant.name!r}: anchor {variant.anchor!r} is not among its input "
                             f"columns (add its feature set)")
        train, val, target = (with_anchor(t, variant.anchor) for t in (train, val, target))
    if variant.self_training:
        pseudo = pseudo_rationales(target, rho, n_heads).assign(task=PSEUDO_TASK)
        train = pd.concat([train, pseudo], ignore_index=True)
    if variant.example_z:
        train, val, target = (example_standardised(t, columns) for t in (train, val, target))
        stats_tables = {task: example_standardised(t, columns) for task, t in stats_tables.items()}
    if variant.standardise == "per_task":
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
    net = GatedExpNet(len(columns), settings.hidden, head_of_columns(columns) if variant.gating else None).to(device)
    optimizer = torch.optim.Adam(net.parameters(), lr=settings.learning_rate)
    model = ExpNetPlus(variant, columns, net, target_mean, target_std,
                       n_pseudo_examples=int(counts[tasks == PSEUDO_TASK].sum()))
    weights_all = torch.as_tensor(train_examples.weights, dtype=torch.float32, device=device)
    train_examples.features, train_examples.labels = train_examples.features.to(device), train_examples.labels.to(device)
    if train_examples.offsets is not None:
        train_examples.offsets = train_examples.offsets.to(device)
    val_features = val_examples.features.to(device)
    val_offsets = torch.zeros(len(val_features)) if val_examples.offsets is None else val_examples.offsets
    best, best_state, waited = -np.inf, None, 0
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
            total += loss.item() * len(index)
        net.eval()
        with torch.inference_mode():
            val_scores = (net(val_features).cpu() + val_offsets).numpy()
        val_auroc = mean_example_auroc(val_examples.split_scores(val_scores), val_examples.gold())
        model.history.append({"epoch": epoch, "train_loss": total / len(order), "val_auroc": val_auroc})
        if val_auroc > best:
            best, best_state, model.best_epoch, waited = val_auroc, copy.deepcopy(net.state_dict()), epoch, 0
        else:
            waited += 1
            if waited >= settings.patience:
                break
    if best_state is not None:
        net.load_state_dict(best_state)
    net.cpu().eval()
    with torch.inference_mode():
        residual = net(val_examples.features) if variant.anchor_weight else torch.zeros(len(val_offsets))
        val_probabilities = torch.sigmoid(val_offsets + variant.anchor_weight * residual).numpy()
    model.calibrated_threshold = calibrate_threshold(val_examples.split_scores(val_probabilities), val_examples.gold())
    logger.info("ExpNet+ %s: best epoch %d of %d, validation AUROC %.4f", variant.name, model.best_epoch,
                len(model.history), best)
    return model


def score_examples(model: ExpNetPlus, table: pd.DataFrame) -> pd.DataFrame:
    """One row per example of `table` (target classifier's signal rows): example_id and its token scores."""
    table = table.reset_index(drop=True)
    probabilities = model.predict(table[model.columns].to_numpy(np.float32), table["example_id"].to_numpy())
    grouped = pd.Series(probabilities).groupby(table["example_id"].to_numpy(), sort=False)
    return pd.DataFrame({"example_id": list(grouped.groups), "scores": [g.to_numpy() for _, g in grouped]})


def validation_auroc(model: ExpNetPlus, table: pd.DataFrame) -> float:
    """Mean per-example AUROC of `model` on labelled token rows of its target classifier."""
    scored = score_examples(model, table)
    gold = table.groupby("example_id", sort=False)["token_label"].apply(np.asarray)
    return mean_example_auroc(list(scored["scores"]), [gold[i] for i in scored["example_id"]])


def select_variant(variants: Sequence[Variant], tasks: dict[str, dict[str, pd.DataFrame]],
                   columns: dict[str, Sequence[str]], rho: float, n_heads: int,
                   settings: TrainingSettings, device: torch.device | str = "cpu") -> pd.DataFrame:
    """Leave-one-training-task-out validation of every variant, on the two training tasks only.

    `tasks[task]` holds that training task's `train` and `val` token rows (correct predictions with a
    non-empty rationale) and `unlabeled` (all its rationale token rows, the signals only). For each
    ordered pair (A, B): fit on A (early stopping on A's val) for B's classifier, score on B's val.
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
            auroc = validation_auroc(model, tasks[other]["val"])
            scores.append(auroc)
            rows.append({"variant": variant.name, "direction": f"{source}->{other}", "val_auroc": auroc,
                         "best_epoch": model.best_epoch})
        rows.append({"variant": variant.name, "direction": "mean", "val_auroc": float(np.mean(scores)),
                     "best_epoch": np.nan})
    table = pd.DataFrame(rows)
    order = table[table["direction"] == "mean"].sort_values("val_auroc", ascending=False, kind="mergesort")["variant"]
    table["rank"] = table["variant"].map({v: i + 1 for i, v in enumerate(order)})
    table["selected"] = table["rank"] == 1
    return table.sort_values(["rank", "direction"], kind="mergesort").reset_index(drop=True)
