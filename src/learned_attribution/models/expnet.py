"""ExpNet (SPEC §6): a tiny feed-forward network from per-token attention features to token importance."""
from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field

import numpy as np
import torch
from sklearn.metrics import roc_auc_score
from torch import nn

logger = logging.getLogger(__name__)


class ExpNet(nn.Module):
    """2H inputs -> `hidden` ReLU units -> 1 sigmoid output (probability that the token is important)."""

    def __init__(self, n_features: int, hidden: int = 16):
        super().__init__()
        self.n_features = n_features
        self.hidden = hidden
        self.layers = nn.Sequential(nn.Linear(n_features, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """Logits [..., 1] -> [...]; apply sigmoid for probabilities."""
        return self.layers(features).squeeze(-1)


def focal_loss(logits: torch.Tensor, targets: torch.Tensor, alpha: float = 0.25, gamma: float = 2.0,
               reduction: str = "mean") -> torch.Tensor:
    """Binary focal loss (Lin et al. 2017), mean over tokens (`reduction="none"`: per token):
    -alpha_t (1 - p_t)^gamma log(p_t), alpha_t = alpha for positives and 1 - alpha for negatives."""
    targets = targets.float()
    log_p = nn.functional.logsigmoid(logits)
    log_not_p = nn.functional.logsigmoid(-logits)
    log_p_t = targets * log_p + (1 - targets) * log_not_p
    p_t = log_p_t.exp()
    alpha_t = targets * alpha + (1 - targets) * (1 - alpha)
    losses = -alpha_t * (1 - p_t) ** gamma * log_p_t
    return losses if reduction == "none" else losses.mean()


@dataclass
class ExpNetConfig:
    hidden: int = 16
    alpha: float = 0.25
    gamma: float = 2.0
    learning_rate: float = 1e-3
    batch_size: int = 512
    max_epochs: int = 50
    patience: int = 5  # epochs without validation improvement before stopping
    threshold: float = 0.5
    seed: int = 13


@dataclass
class ExpNetTraining:
    model: ExpNet
    feature_mean: np.ndarray  # inputs are standardised with the training tokens' statistics
    feature_std: np.ndarray
    history: list[dict] = field(default_factory=list)
    best_epoch: int = 0
    calibrated_threshold: float = 0.5
    threshold: float = 0.5  # the paper's own rule
    context: dict = field(default_factory=dict)  # fold, tasks, encoder, classifier shape (models/artifacts.py)

    def predict(self, features: np.ndarray) -> np.ndarray:
        """Token probabilities for raw (unstandardised) features [N, 2H]."""
        with torch.inference_mode():
            x = torch.as_tensor((features - self.feature_mean) / self.feature_std, dtype=torch.float32)
            return torch.sigmoid(self.model(x)).numpy()


def train_expnet(train_x: np.ndarray, train_y: np.ndarray, val_x: np.ndarray, val_y: np.ndarray,
                 config: ExpNetConfig, device: torch.device | str = "cpu") -> ExpNetTraining:
    """Adam on focal loss on `device`; early stopping on validation token AUROC (the ranking the explainer is
    judged on), keeping the best epoch's weights. The trained network is returned on the CPU (it is saved
    and applied to feature tables there)."""
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    mean = train_x.mean(0)
    std = train_x.std(0) + 1e-6
    x = torch.as_tensor((train_x - mean) / std, dtype=torch.float32, device=device)
    y = torch.as_tensor(train_y, dtype=torch.float32, device=device)
    vx = torch.as_tensor((val_x - mean) / std, dtype=torch.float32, device=device)
    model = ExpNet(train_x.shape[1], config.hidden).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.learning_rate)
    training = ExpNetTraining(model, mean, std)
    best, best_state, waited = -np.inf, None, 0
    for epoch in range(1, config.max_epochs + 1):
        model.train()
        order = rng.permutation(len(x))
        total = 0.0
        for start in range(0, len(order), config.batch_size):
            index = torch.as_tensor(order[start:start + config.batch_size], device=device)
            loss = focal_loss(model(x[index]), y[index], config.alpha, config.gamma)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(index)
        model.eval()
        with torch.inference_mode():
            val_logits = model(vx)
            val_loss = focal_loss(val_logits, torch.as_tensor(val_y, device=device), config.alpha, config.gamma).item()
        val_auroc = (float(roc_auc_score(val_y, val_logits.cpu().numpy())) if len(np.unique(val_y)) == 2
                     else float("nan"))
        training.history.append({"epoch": epoch, "train_loss": total / len(x), "val_loss": val_loss,
                                 "val_auroc": val_auroc})
        if val_auroc > best:
            best, best_state, training.best_epoch, waited = val_auroc, copy.deepcopy(model.state_dict()), epoch, 0
        else:
            waited += 1
            if waited >= config.patience:
                break
    if best_state is not None:
        model.load_state_dict(best_state)
    model.cpu().eval()
    logger.info("ExpNet: best epoch %d of %d, validation token AUROC %.4f", training.best_epoch,
                len(training.history), best)
    return training


def calibrate_threshold(probabilities: list[np.ndarray], gold: list[np.ndarray],
                        grid: np.ndarray | None = None) -> float:
    """The threshold (with the one-token fallback) that maximises mean per-example F1 on validation data."""
    from learned_attribution.metrics.plausibility import precision_recall_f1, threshold_mask

    grid = np.round(np.arange(0.05, 0.96, 0.05), 2) if grid is None else grid
    best_threshold, best_f1 = 0.5, -1.0
    for threshold in grid:
        f1 = np.mean([precision_recall_f1(threshold_mask(p, threshold), g)[2] for p, g in zip(probabilities, gold)])
        if f1 > best_f1:
            best_threshold, best_f1 = float(threshold), f1
    return best_threshold
