"""The training loops of the learned explainers and the scoring of a trained one (`LearnedModel`, `model.py`). A
variant's registered network says which loop trains it (`registry.py`: what it reads).

`fit_variant` trains any variant whose network reads signal columns (the paper's ExpNet and every ExpNet+ variant):
its `InputPipeline` is fitted on the training data, every row enters the network through that pipeline's `transform`
(each task's rows with that task's statistics), `settings.seeds` networks train side by side on the same batches
(batches of whole examples or of single tokens, `settings.batch_unit`), each keeps its own best epoch by the
variant's stopping rule (the mean per-example validation AUROC, or the paper's pooled token AUROC:
`metrics.plausibility.example_aurocs` in both cases), and the threshold of the own rule is calibrated on the
validation examples. `fit_text_variant` trains a text student (a network that reads the text rather than signal
columns: `encoder`, `attention`)."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn

from learned_attribution.core.metrics.fidelity import example_spearman
from learned_attribution.core.metrics.plausibility import (example_aurocs, mean_example_auroc, precision_recall_f1,
                                                       threshold_mask)

from ..runner import model_device
from .encoder import student_text_scores, train_text_student
from .inputs import InputPipeline
from .losses import objective
from .model import LearnedModel
from .networks import build_text_network, build_variant_network
from .pseudo import pseudo_labels
from .recipe import TrainingSettings, Variant
from .registry import HIDDEN_STATES

logger = logging.getLogger(__name__)

PSEUDO_TASK = "pseudo"


@dataclass
class Examples:
    """Network inputs of several examples, grouped: features [N, F], labels [N], and per example its first row,
    length, task and weight (with `batch_unit: tokens` every token is an example of its own)."""

    features: torch.Tensor
    labels: torch.Tensor
    starts: np.ndarray
    lengths: np.ndarray
    tasks: np.ndarray
    weights: np.ndarray
    offsets: torch.Tensor | None = None  # [N] fixed logit offsets (the anchor term), None: no anchor

    def __len__(self) -> int:
        return len(self.starts)

    def to(self, device: torch.device | str) -> "Examples":
        self.features, self.labels = self.features.to(device), self.labels.to(device)
        if self.offsets is not None:
            self.offsets = self.offsets.to(device)
        return self

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


def group_examples(inputs: np.ndarray, labels: np.ndarray, example_ids: np.ndarray, tasks: np.ndarray,
                   offsets: np.ndarray | None, per_token: bool = False) -> Examples:
    """Rows (contiguous per example) -> `Examples`; `per_token`: every row an example of its own."""
    if per_token:
        boundaries = np.arange(len(example_ids))
    else:
        boundaries = np.r_[0, np.nonzero(example_ids[1:] != example_ids[:-1])[0] + 1] if len(example_ids) else \
            np.zeros(0, dtype=int)
        if len(np.unique(example_ids[boundaries])) != len(boundaries):
            raise ValueError("token rows of an example must be contiguous (sort by example_id, position)")
    lengths = np.diff(np.r_[boundaries, len(example_ids)])
    return Examples(torch.as_tensor(inputs), torch.as_tensor(np.asarray(labels, np.float32)), boundaries, lengths,
                    np.asarray(tasks)[boundaries], np.ones(len(boundaries)),
                    None if offsets is None else torch.as_tensor(offsets))


def calibrate_threshold(probabilities: list[np.ndarray], gold: list[np.ndarray],
                        grid: np.ndarray | None = None) -> float:
    """The threshold (with the one-token fallback) that maximises mean per-example F1 on validation data."""
    grid = np.round(np.arange(0.05, 0.96, 0.05), 2) if grid is None else grid
    best_threshold, best_f1 = 0.5, -1.0
    for threshold in grid:
        f1 = np.mean([precision_recall_f1(threshold_mask(p, threshold), g)[2] for p, g in zip(probabilities, gold)])
        if f1 > best_f1:
            best_threshold, best_f1 = float(threshold), f1
    return best_threshold


def _transformed(pipeline: InputPipeline, table: pd.DataFrame, statistics: dict[str, tuple]) -> tuple:
    """Rows of `table` through `pipeline.transform`, each task's rows with that task's statistics, in row order:
    (inputs [N, F], offsets [N] or None)."""
    tasks = table["task"].to_numpy()
    inputs = np.empty((len(table), len(pipeline.columns)), np.float32)
    offsets = np.zeros(len(table), np.float32) if pipeline.anchor else None
    for task in pd.unique(tasks):
        rows = tasks == task
        part = table[rows]
        values, part_offsets = pipeline.transform(part[pipeline.columns].to_numpy(np.float32),
                                                  part["example_id"].to_numpy(), *statistics[task])
        inputs[rows] = values
        if offsets is not None:
            offsets[rows] = part_offsets
    return inputs, offsets


def member_validation_scores(net: nn.Module, inputs: torch.Tensor, offsets: torch.Tensor | float,
                             labels: np.ndarray, groups: np.ndarray, statistic: str = "auroc") -> np.ndarray:
    """Each member's mean `statistic` over `groups` of validation rows: the AUROC against rationale labels (one group
    per example: the mean per-example AUROC; one group for every row: the pooled token AUROC), or the Spearman
    correlation with real-valued targets."""
    per_group = example_aurocs if statistic == "auroc" else example_spearman
    with torch.inference_mode():
        logits = (net(inputs) + offsets).cpu().numpy()  # [S, N]
    scores = []
    for member_logits in logits:
        aurocs = per_group(member_logits, labels, groups)
        scores.append(float(np.nanmean(aurocs)) if np.isfinite(aurocs).any() else float("nan"))
    return np.asarray(scores)


def fit_variant(variant: Variant, train: pd.DataFrame, val: pd.DataFrame, *, columns: Sequence[str], rho: float,
                settings: TrainingSettings, target: pd.DataFrame | None = None,
                stats_tables: dict[str, pd.DataFrame] | None = None, device: torch.device | str = "cpu") -> LearnedModel:
    """Train `variant` on the labelled `train` token rows (one or more tasks) on `device`, stop early on `val`,
    for the target classifier whose unlabeled signal rows are `target` (labels, if present, are dropped; only
    self-training and per-task standardisation read it, so the paper's ExpNet takes None). `stats_tables` maps
    every task (training tasks and the target's) to its unlabeled token rows, for per-task standardisation. The
    trained networks are returned on the CPU, where they are saved and applied to signal tables."""
    columns = list(columns)
    stats_tables = stats_tables or {}
    pipeline = InputPipeline.for_variant(variant, columns)
    needs_target = variant.self_training or (variant.standardise == "per_task" and pipeline.standardises)
    if needs_target and target is None:
        raise ValueError(f"learned-explainer variant {variant.name!r} reads the target classifier's unlabeled "
                         "signals: pass target")
    target = None if target is None else target.drop(columns=["token_label"], errors="ignore").reset_index(drop=True)

    def fitted(table: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        return pipeline.fitted_statistics(table[columns].to_numpy(np.float32), table["example_id"].to_numpy())

    if variant.standardise == "per_task" and pipeline.standardises:
        target_task = target["task"].iloc[0]
        statistics = {task: fitted(stats_tables[task]) for task in {*train["task"], *val["task"], target_task}}
        statistics[PSEUDO_TASK] = statistics[target_task]
        target_statistics = statistics[target_task]
    else:
        target_statistics = fitted(train)
        statistics = {task: target_statistics for task in {*train["task"], *val["task"], PSEUDO_TASK}}
    pipeline.mean, pipeline.std = target_statistics

    train_inputs, train_offsets = _transformed(pipeline, train, statistics)
    parts = [(train_inputs, train_offsets, train["token_label"].to_numpy(np.float32), train["example_id"].to_numpy(),
              train["task"].to_numpy())]
    n_pseudo = 0
    if variant.self_training:
        # The target's examples go through the pipeline whole (within-example steps see every token), then the
        # pseudo-labelled tokens are kept.
        labels = pseudo_labels(target, rho, rule=variant.pseudo)
        keep = ~np.isnan(labels)
        inputs, offsets = _transformed(pipeline, target.assign(task=PSEUDO_TASK), statistics)
        parts.append((inputs[keep], None if offsets is None else offsets[keep], labels[keep],
                      target["example_id"].to_numpy()[keep], np.full(int(keep.sum()), PSEUDO_TASK, dtype=object)))
        n_pseudo = int(pd.unique(target["example_id"].to_numpy()[keep]).size)
    inputs, offsets, labels, example_ids, tasks = (
        np.concatenate([p[i] for p in parts]) if parts[0][i] is not None else None for i in range(5))
    train_examples = group_examples(inputs, labels, example_ids, tasks, offsets,
                                    per_token=settings.batch_unit == "tokens")
    counted = pd.Series(train_examples.tasks).value_counts()
    if variant.balance or variant.self_training:  # every task weighs the same, the pseudo task pseudo_weight
        share = {t: (settings.pseudo_weight if t == PSEUDO_TASK else 1.0) / c for t, c in counted.items()}
        train_examples.weights = np.array([share[t] for t in train_examples.tasks]) * len(train_examples)
    val_inputs, val_offsets = _transformed(pipeline, val, statistics)
    val_labels = val["token_label"].to_numpy(np.float32)
    val_ids = val["example_id"].to_numpy()
    groups = np.zeros(len(val), dtype=np.int64) if variant.stopping == "token_auroc" else val_ids
    statistic = "spearman" if variant.stopping == "example_spearman" else "auroc"

    torch.manual_seed(settings.seed)
    rng = np.random.default_rng(settings.seed)
    net = build_variant_network(variant, columns, settings).to(device)
    optimizer = torch.optim.Adam(net.parameters(), lr=variant.learning_rate or settings.learning_rate)
    model = LearnedModel(variant, pipeline, net, n_pseudo_examples=n_pseudo)
    train_examples.to(device)
    weights_all = torch.as_tensor(train_examples.weights, dtype=torch.float32, device=device)
    val_x = torch.as_tensor(val_inputs, device=device)
    val_offset = 0.0 if val_offsets is None else torch.as_tensor(val_offsets, device=device)
    members = settings.seeds
    best = np.full(members, -np.inf)
    best_epochs, waited = np.zeros(members, dtype=int), np.zeros(members, dtype=int)
    best_state = {name: value.detach().clone() for name, value in net.named_parameters()}
    # anchor_weight 0 is the anchor alone: nothing to train.
    for epoch in range(1, (settings.max_epochs if variant.anchor_weight else 0) + 1):
        net.train()
        order = rng.permutation(len(train_examples))
        total = 0.0
        for start in range(0, len(order), settings.batch_size):
            index = order[start:start + settings.batch_size]
            x, y, mask, batch_offsets = train_examples.padded(index)
            loss = objective(net, x, y, mask, batch_offsets, weights_all[index], variant, settings)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(index) / members
        net.eval()
        val_scores = member_validation_scores(net, val_x, val_offset, val_labels, groups, statistic)
        model.history.append({"epoch": epoch, "train_loss": total / len(order),
                              f"val_{statistic}": float(val_scores.mean()), f"member_val_{statistic}": val_scores.tolist()})
        improved = val_scores > best
        best[improved], best_epochs[improved], waited[improved] = val_scores[improved], epoch, 0
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
    model.member_val_scores = [float(v) for v in best] if model.history else []
    probabilities = model.network_probabilities(torch.as_tensor(val_inputs),
                                                0.0 if val_offsets is None else torch.as_tensor(val_offsets))
    if statistic == "auroc":  # a rationale-label own rule; a student of real-valued scores keeps 0.5
        by_example = pd.DataFrame({"p": probabilities, "y": val_labels}).groupby(val_ids, sort=False)
        model.calibrated_threshold = calibrate_threshold([g["p"].to_numpy() for _, g in by_example],
                                                         [g["y"].to_numpy() for _, g in by_example])
    logger.info("%s: best epochs %s of %d, validation %s per seed %s", variant.name, model.member_best_epochs,
                len(model.history), variant.stopping.replace("_", " "), np.round(best, 4).tolist())
    return model


def fit_text_variant(variant: Variant, model: nn.Module, tokenizer, train: pd.DataFrame, val: pd.DataFrame, *,
                     settings: TrainingSettings, layer: int = -1, device: torch.device | str = "cpu"
                     ) -> LearnedModel:
    """The text student of `variant` for classifier `model`: network `encoder` (a copy of its encoder, its top
    `encoder_blocks` trained) or `attention` (`attention_layers` new layers over its hidden states at the explained
    `layer`, computed once), trained on `train` texts (example_id, input_ids, predicted, scores: the teacher's, one
    per scored token) and stopped early on `val`'s by the one loop of the text students (`encoder.train_text_student`;
    the step is the variant's learning_rate). The classifier is not changed. Returned on the CPU."""
    torch.manual_seed(settings.seed)
    net = build_text_network(variant, model, layer)
    inputs = net.text_inputs(model, tokenizer, pd.concat([train, val], ignore_index=True), 2 * settings.batch_size,
                             device)
    history, best_epoch, best = train_text_student(net, inputs, train, val, variant.learning_rate or
                                                   settings.learning_rate, settings, device)
    logger.info("%s: best epoch %d of %d, validation Spearman %.4f", variant.name, best_epoch, len(history), best)
    return LearnedModel(variant, InputPipeline([]), net, history=history, best_epoch=best_epoch,
                        member_best_epochs=[best_epoch], member_val_scores=[best])


def score_texts(model: LearnedModel, examples: pd.DataFrame, tokenizer, batch_size: int = 32,
                classifier: nn.Module | None = None) -> pd.DataFrame:
    """A text student's token scores (example_id, scores over the scored tokens) of texts (example_id, input_ids,
    predicted); an attention student reads `classifier`'s hidden states (the one it was trained for)."""
    if classifier is None and model.variant.network_class.reads == HIDDEN_STATES:
        raise ValueError(f"{model.variant.name} is an {model.variant.network} student: it reads its classifier's "
                         "hidden states, pass classifier=")
    inputs = model.net.text_inputs(classifier, tokenizer, examples, batch_size, model_device(model.net))
    return student_text_scores(model.net, inputs, examples, batch_size)


@dataclass(frozen=True)
class TransformedRows:
    """Signal rows of whole examples through one input pipeline, once (`transformed_rows`): the network's inputs and
    anchor offsets (`InputPipeline.transform`) and the rows' example ids and token labels, in the table's order.
    Every step of a pipeline reads one example's rows or one value, so the rows of some examples are the same
    whether transformed alone or with others: the refits of one prior (which keep its pipeline) read subsets of the
    rows transformed once instead of transforming them again."""

    pipeline: InputPipeline
    example_ids: np.ndarray
    inputs: np.ndarray
    offsets: np.ndarray | None
    labels: np.ndarray | None  # `token_label`, where the table has it

    def of_examples(self, ids, by_id: bool = False) -> "TransformedRows":
        """The rows of the examples `ids`, in this table's order, or (`by_id`) ordered by example id (stable: each
        example's rows keep their order)."""
        index = np.flatnonzero(pd.Series(self.example_ids).isin(set(ids)).to_numpy())
        if by_id:
            index = index[np.argsort(self.example_ids[index], kind="stable")]
        return TransformedRows(self.pipeline, self.example_ids[index], self.inputs[index],
                               None if self.offsets is None else self.offsets[index],
                               None if self.labels is None else self.labels[index])

    def probabilities(self, model: LearnedModel, member: int | None = None) -> np.ndarray:
        """`model`'s token probabilities on these rows (`LearnedModel.predict` without the transform); `model` must
        read them through the pipeline they were transformed with."""
        if model.inputs is not self.pipeline:
            raise ValueError(f"rows transformed by another input pipeline than {model.variant.name}'s: transform "
                             "them with `transformed_rows(model, table)`")
        return model.network_probabilities(torch.as_tensor(self.inputs),
                                           0.0 if self.offsets is None else torch.as_tensor(self.offsets), member)


def transformed_rows(model: LearnedModel, table: pd.DataFrame) -> TransformedRows:
    """The signal rows `table` of `model`'s target classifier (whole examples) through its input pipeline, once."""
    missing = [c for c in (*model.columns, "example_id") if c not in table.columns]
    if missing:
        raise ValueError(f"signal rows lack columns {missing}: pass the target classifier's signal rows")
    example_ids = table["example_id"].to_numpy()
    inputs, offsets = model.inputs.transform(table[model.columns].to_numpy(np.float32), example_ids)
    labels = table["token_label"].to_numpy(np.float32) if "token_label" in table.columns else None
    return TransformedRows(model.inputs, example_ids, inputs, offsets, labels)


def _by_example(values: np.ndarray, example_ids: np.ndarray) -> tuple[list, list[np.ndarray]]:
    grouped = pd.Series(values).groupby(example_ids, sort=False)
    return list(grouped.groups), [g.to_numpy() for _, g in grouped]


def score_examples(model: LearnedModel, table: pd.DataFrame | TransformedRows, member: int | None = None
                   ) -> pd.DataFrame:
    """One row per example of `table` (target classifier's signal rows, or those rows transformed once): example_id
    and its token scores (the ensemble's, or one seed's network's with `member`)."""
    if isinstance(table, TransformedRows):
        probabilities, example_ids = table.probabilities(model, member), table.example_ids
    else:
        example_ids = table["example_id"].to_numpy()
        probabilities = model.predict(table[model.columns].to_numpy(np.float32), example_ids, member)
    ids, scores = _by_example(probabilities, example_ids)
    return pd.DataFrame({"example_id": ids, "scores": scores})


def validation_auroc(model: LearnedModel, table: pd.DataFrame | TransformedRows, member: int | None = None) -> float:
    """Mean per-example AUROC of `model` (the ensemble, or one seed's network) on labelled token rows of its
    target classifier (or those rows transformed once)."""
    scored = score_examples(model, table, member)
    if isinstance(table, TransformedRows):
        gold = dict(zip(*_by_example(table.labels, table.example_ids)))
    else:
        gold = table.groupby("example_id", sort=False)["token_label"].apply(np.asarray)
    return mean_example_auroc(list(scored["scores"]), [gold[i] for i in scored["example_id"]])
