"""Fine-tuning and running the sequence classifiers that the explainers explain (SPEC §2, §4)."""
from __future__ import annotations

import copy
import logging
import random
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef
from tqdm.auto import tqdm

from .runner import autocast, length_grouped_batches, model_device, pad_batch, predict_proba

logger = logging.getLogger(__name__)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


@dataclass(frozen=True)
class TrainingConfig:
    """A classifier's fine-tuning recipe (`classifiers.<task>`); bf16 and the seed come from `compute` and `seed`."""

    epochs: int
    # The learning rate warms up, then decays linearly to 0 over `decay_epochs` (None: `epochs`). Fewer epochs than
    # that train the first epochs of a longer schedule: the same weights, at the end of epoch `epochs`, as a run of
    # `decay_epochs` epochs has there.
    decay_epochs: int | None
    learning_rate: float
    batch_size: int
    weight_decay: float
    warmup_fraction: float
    class_weighting: bool  # inverse-frequency class weights in the loss
    selection_metric: str  # chooses the epoch on the validation slice: accuracy, macro_f1 or mcc
    # The word-embedding matrix (30,522 x 384 in MiniLM, half its weights) stays at the encoder's: its dense
    # gradient, clipping and AdamW update are a large share of a CPU step (benchmarks/finetune_step.py).
    freeze_word_embeddings: bool
    bf16: bool  # autocast (runner.autocast)
    seed: int

    def __post_init__(self) -> None:
        if self.decay_epochs is not None and (isinstance(self.decay_epochs, bool)
                                              or not isinstance(self.decay_epochs, int)
                                              or self.decay_epochs < self.epochs):
            raise ValueError(f"decay_epochs={self.decay_epochs!r} must be null or an integer of at least epochs "
                             f"({self.epochs})")


@dataclass
class TrainingResult:
    history: list[dict] = field(default_factory=list)  # one row per epoch: loss, validation metrics
    best_epoch: int = 0


def classification_metrics(labels: Sequence[int], predictions: Sequence[int]) -> dict[str, float]:
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    return {
        "accuracy": float(accuracy_score(labels, predictions)),
        "macro_f1": float(f1_score(labels, predictions, average="macro", zero_division=0)),
        "mcc": float(matthews_corrcoef(labels, predictions)) if len(labels) else float("nan"),
    }


# The classifiers' test metrics carry percentile bootstrap intervals over examples, like every other number reported.
# Each resample's accuracy, macro-F1 and MCC come from its confusion matrix, computed as sklearn computes them: macro-F1
# averages over the classes present in the resample's labels or predictions with 0 for an undefined class F1; MCC is
# Gorodkin's multiclass coefficient, 0 when a marginal is constant.
CLASSIFICATION_METRICS = ("accuracy", "macro_f1", "mcc")


def confusion_metrics(confusion: np.ndarray) -> dict[str, np.ndarray]:
    """Accuracy, macro-F1 and MCC of a stack of confusion matrices (`[..., true, predicted]` counts)."""
    confusion = np.asarray(confusion, dtype=float)
    n = confusion.sum(axis=(-2, -1))
    true_positive = np.diagonal(confusion, axis1=-2, axis2=-1)
    true_total, predicted_total = confusion.sum(axis=-1), confusion.sum(axis=-2)
    with np.errstate(invalid="ignore", divide="ignore"):
        f1_denominator = true_total + predicted_total
        class_f1 = np.where(f1_denominator > 0, 2 * true_positive / np.where(f1_denominator > 0, f1_denominator, 1), 0)
        present = f1_denominator > 0
        macro_f1 = (class_f1 * present).sum(axis=-1) / np.maximum(present.sum(axis=-1), 1)
        correct = true_positive.sum(axis=-1)
        covariance = correct * n - (true_total * predicted_total).sum(axis=-1)
        spread = np.sqrt((n ** 2 - (predicted_total ** 2).sum(axis=-1)) * (n ** 2 - (true_total ** 2).sum(axis=-1)))
        mcc = np.where(spread > 0, covariance / np.where(spread > 0, spread, 1), 0.0)
        accuracy = np.where(n > 0, correct / np.where(n > 0, n, 1), np.nan)
    return {"accuracy": accuracy, "macro_f1": macro_f1, "mcc": mcc}


def classification_intervals(labels: Sequence[int], predictions: Sequence[int], n_boot: int = 1000, seed: int = 0,
                             alpha: float = 0.05) -> dict[str, float]:
    """`<metric>_low` and `<metric>_high` for each of `CLASSIFICATION_METRICS`: the percentile bootstrap interval
    (1 - alpha) over examples resampled with replacement, reproducible for a seed; NaN without examples."""
    labels, predictions = np.asarray(labels, dtype=int), np.asarray(predictions, dtype=int)
    if labels.shape != predictions.shape:
        raise ValueError(f"labels and predictions differ in length: {labels.shape[0]} and {predictions.shape[0]}")
    if n_boot < 1:
        raise ValueError(f"n_boot must be at least 1, got {n_boot}")
    n = labels.shape[0]
    if n == 0:
        return {f"{metric}_{end}": float("nan") for metric in CLASSIFICATION_METRICS for end in ("low", "high")}
    classes = int(max(labels.max(), predictions.max())) + 1
    cell = labels * classes + predictions
    rng = np.random.default_rng(seed)
    confusions = np.empty((n_boot, classes * classes))
    chunk = max(1, 1_000_000 // n)  # about a million indices at a time, whatever the number of examples
    for start in range(0, n_boot, chunk):
        stop = min(n_boot, start + chunk)
        picks = cell[rng.integers(0, n, size=(stop - start, n))]
        offsets = picks + (np.arange(stop - start) * classes * classes)[:, None]
        confusions[start:stop] = np.bincount(offsets.ravel(), minlength=(stop - start) * classes * classes
                                             ).reshape(stop - start, classes * classes)
    resampled = confusion_metrics(confusions.reshape(n_boot, classes, classes))
    intervals = {}
    for metric in CLASSIFICATION_METRICS:
        low, high = np.quantile(resampled[metric], [alpha / 2, 1 - alpha / 2])
        intervals[f"{metric}_low"], intervals[f"{metric}_high"] = float(low), float(high)
    return intervals


def trainable_parameters(model: torch.nn.Module, freeze_word_embeddings: bool) -> list[torch.nn.Parameter]:
    """The parameters fine-tuning updates: all of them, or all but the word embeddings (any supported family:
    `get_input_embeddings`), which are then marked `requires_grad=False` so backward computes no gradient for them."""
    if freeze_word_embeddings:
        model.get_input_embeddings().weight.requires_grad_(False)
    return [p for p in model.parameters() if p.requires_grad]


def fine_tune(model: torch.nn.Module, train_ids: Sequence[Sequence[int]], train_labels: Sequence[int],
              val_ids: Sequence[Sequence[int]], val_labels: Sequence[int], config: TrainingConfig,
              pad_token_id: int) -> TrainingResult:
    """Fine-tune `model` in place with AdamW and linear warm-up/decay; keep the epoch that scores
    best on the validation slice (`selection_metric`)."""
    seed_everything(config.seed)
    use_bf16 = config.bf16
    labels = torch.as_tensor(np.asarray(train_labels), dtype=torch.long)
    n_classes = model.config.num_labels
    weights = None
    if config.class_weighting:
        counts = torch.bincount(labels, minlength=n_classes).float().clamp(min=1)
        weights = counts.sum() / (n_classes * counts)
        logger.info("Class weights %s", weights.tolist())
    loss_fn = torch.nn.CrossEntropyLoss(weight=None if weights is None else weights.to(model_device(model)))
    # The fused kernel makes the optimizer step ~5x faster on this CPU (measured: 0.85 s -> 0.17 s per step).
    trained = trainable_parameters(model, config.freeze_word_embeddings)
    optimizer = torch.optim.AdamW(trained, lr=config.learning_rate, weight_decay=config.weight_decay, fused=True)
    lengths = [len(s) for s in train_ids]
    steps_per_epoch = int(np.ceil(len(train_ids) / config.batch_size))
    total = steps_per_epoch * (config.decay_epochs or config.epochs)
    warmup = int(total * config.warmup_fraction)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: (step + 1) / warmup if step < warmup else max(0.0, (total - step) / max(1, total - warmup)))
    result, best_score, best_state = TrainingResult(), -np.inf, None
    for epoch in range(1, config.epochs + 1):
        model.train()
        running, seen = 0.0, 0
        batches = length_grouped_batches(lengths, config.batch_size, shuffle=True, seed=config.seed + epoch)
        for batch in tqdm(batches, desc=f"epoch {epoch}/{config.epochs}", leave=False):
            input_ids, attention_mask = pad_batch([train_ids[i] for i in batch], pad_token_id, model_device(model))
            loss = training_step(model, trained, optimizer, loss_fn, input_ids, attention_mask, labels[batch],
                                 use_bf16)
            scheduler.step()
            running += loss * len(batch)
            seen += len(batch)
        probabilities = predict_proba(model, val_ids, config.batch_size * 2, pad_token_id, use_bf16)
        metrics = classification_metrics(val_labels, probabilities.argmax(1))
        row = {"epoch": epoch, "train_loss": running / max(1, seen), **{f"val_{k}": v for k, v in metrics.items()}}
        result.history.append(row)
        logger.info("epoch %d: %s", epoch, {k: round(v, 4) for k, v in row.items()})
        if metrics[config.selection_metric] > best_score:
            best_score, result.best_epoch = metrics[config.selection_metric], epoch
            best_state = copy.deepcopy(model.state_dict())
    if best_state is not None:
        model.load_state_dict(best_state)
    model.eval()
    return result


def training_step(model: torch.nn.Module, trained: Sequence[torch.nn.Parameter], optimizer: torch.optim.Optimizer,
                  loss_fn: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor,
                  bf16: bool) -> float:
    """One optimisation step (forward, fp32 loss, backward, gradient clipping at 1, update); returns the loss."""
    with autocast(input_ids.device, bf16):
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
    loss = loss_fn(logits.float(), labels.to(logits.device))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(trained, 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.item()
