"""Self-training's pseudo-rationales: labels for the target classifier's unlabeled tokens where cheap signals
agree."""
from __future__ import annotations

import numpy as np
import pandas as pd

from learned_attribution.core.metrics.plausibility import budget_k

from .recipe import PSEUDO_RULES


def pseudo_labels(table: pd.DataFrame, rho: float, min_agree: int = 2, rule: str = "cheap") -> np.ndarray:
    """One pseudo label per row of `table` (unlabeled signal rows of whole examples; NaN: no label, the token is
    left out, and so is every token of an example left without both kinds). With k = round(rho * n) for an example
    of n tokens:
    - `cheap`: raw attention, positive attention x gradient (means over the heads) and the layer-gradient norm; a
      rationale token (label 1) when at least `min_agree` of them put it in their top k; a non-rationale token
      when all three put it in the bottom half.
    - `agreement`: those three plus |layer gradient x input|, saliency and |input x gradient| (the embedding
      gradient's norm and its product with the embedding); a token's label is the share of the six that put it
      in their top k, kept as a rationale token when at least half do (a soft label in [0.5, 1]); a
      non-rationale token (0) when none does and at least half put it in their bottom half.
    The per-head columns are read whatever the head count (the training classifiers' signal tables hold them)."""
    if rule not in PSEUDO_RULES:
        raise ValueError(f"pseudo-rationale rule {rule!r}, expected one of {PSEUDO_RULES}")
    table = table.reset_index(drop=True)
    from_cls = [c for c in table.columns if c.startswith("cls_to_tok_h")]
    attention_x_gradient = [c for c in table.columns if c.startswith("axg_h")]
    signals = pd.DataFrame({
        "raw_attention": table[from_cls].mean(1),
        "attention_x_gradient": table[attention_x_gradient].clip(lower=0).mean(1),
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
    labelled = pd.Series(labels).groupby(groups.to_numpy())
    both = (labelled.transform("max") >= 0.5) & (labelled.transform("min") < 0.5)
    return np.where(both.to_numpy(), labels, np.nan)
