"""The objectives of the one training loop: the paper's focal loss and two ranking losses over whole examples,
and `objective`, which sums what a variant asks for over the network's members."""
from __future__ import annotations

import torch
from torch import nn

from .recipe import TrainingSettings, Variant


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


def distillation_loss(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor,
                      example_weights: torch.Tensor | None = None) -> torch.Tensor:
    """Reproducing a teacher's real-valued token scores on padded examples [B, T]: ListNet's top-one
    cross-entropy between softmax(student) and softmax(the teacher's within-example z-scores), which rewards
    ranking the teacher's top tokens first, plus the squared error between both sides' within-example z-scores,
    which asks for the teacher's relative magnitudes as well. One-token examples are skipped; the result is the
    (weighted) mean over the other examples."""
    n = mask.sum(-1, keepdim=True).clamp(min=1)

    def z(values: torch.Tensor) -> torch.Tensor:
        mean = (values * mask).sum(-1, keepdim=True) / n
        sd = ((((values - mean) * mask) ** 2).sum(-1, keepdim=True) / n).sqrt()
        return ((values - mean) / (sd + 1e-6)) * mask

    target_z = z(targets)
    log_student = torch.log_softmax(logits.masked_fill(~mask, float("-inf")), dim=-1).masked_fill(~mask, 0.0)
    target_p = torch.softmax(target_z.masked_fill(~mask, float("-inf")), dim=-1).masked_fill(~mask, 0.0)
    listwise = -(target_p * log_student).sum(-1)
    squared = (((z(logits) - target_z) ** 2) * mask).sum(-1) / n[:, 0]
    return _mean_over_examples(listwise + squared, mask.sum(-1) > 1, example_weights)


def objective(net: nn.Module, x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor, offsets: torch.Tensor,
              weights: torch.Tensor, variant: Variant, settings: TrainingSettings) -> torch.Tensor:
    """The members' losses summed (their parameters are disjoint, so each member trains as if alone) on padded
    examples [B, T, F]; the residual is trained on top of the anchor (`offsets`, 0 without one)."""
    logits = net(x) + offsets  # [S, B, T]
    members = logits.shape[0]
    loss = torch.zeros((), device=logits.device)
    if "focal" in variant.objective:
        token_weights = weights[:, None].expand_as(mask)[mask]
        per_token = focal_loss(logits[:, mask], y[mask], settings.alpha, settings.gamma, reduction="none")
        loss = loss + ((per_token * token_weights).sum(-1) / token_weights.sum()).sum()
    ranking = {"pairwise": pairwise_ranking_loss, "listwise": listwise_ranking_loss, "distill": distillation_loss}
    for name, ranking_loss in ranking.items():
        if name in variant.objective:  # the members' examples side by side, as one batch
            batch = logits.shape[1]
            loss = loss + members * ranking_loss(logits.reshape(members * batch, -1), y.repeat(members, 1),
                                                 mask.repeat(members, 1), weights.repeat(members))
    gates = net.gates()
    if gates is not None:
        loss = loss + settings.gate_l1 * gates.mean(-1).sum()
    return loss
