"""One explained text (`Explanation`), and how token scores become word scores and a rationale.

- Every method scores the subword tokens for one class: the class the classifier predicts, or the class asked for
  (`target`), or that class's margin over a contrast class (`contrast`: logits for the gradient family, softmax
  probabilities for the perturbation family, `core/explainers/objective.py`); each explanation says which, and
  which of its methods cannot depend on the class (`class_agnostic`).
- A word's score aggregates its subwords: the sum for signed methods (evidence for and against: IG, Input x
  Gradient, occlusion, LIME, KernelSHAP, AttCAT, whose token scores add up), the maximum otherwise (a word is as
  important as its most important piece; learned explainers output probabilities). Words without a subword (cut by
  truncation, or characters the tokenizer drops) get `None` and are never in a rationale.
- Rationale (each method's own rule, per word): learned explainers mark words whose probability reaches
  their threshold calibrated on the training tasks' validation data (at least one word); other methods mark
  the top k = round(rho x n words), rho being the fold's matched budget (the training tasks' rationale density).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from learned_attribution.core.metrics.plausibility import budget_k, threshold_mask, top_k_mask

WORD_SPLITS = ("tokenizer", "whitespace")
# A text is `mostly_unknown` when MORE than this share of its subword tokens is the tokenizer's unknown token: the
# classifier then reads mostly one and the same embedding, and its prediction (often confident) says little about
# the text. Half is the point where the unknown token outweighs everything the model can read; a single emoji in a
# sentence stays well below it.
UNKNOWN_SHARE_THRESHOLD = 0.5


@dataclass
class Explanation:
    """One explained text."""

    text: str
    words: list[str]
    tokens: list[str]  # subword tokens, [CLS]/[SEP] excluded
    token_words: list[int]  # the word each token belongs to
    predicted: int
    label: str  # the classifier's name for `predicted` (config.id2label)
    probability: float  # of the predicted class
    truncated: bool
    token_scores: dict[str, list[float]] = field(default_factory=dict)
    word_scores: dict[str, list[float | None]] = field(default_factory=dict)
    rationale: dict[str, list[int]] = field(default_factory=dict)  # 0/1 per word, each method's own rule
    id: str | None = None
    offsets: list[tuple[int, int]] | None = None  # each word's [start, end) in `text`; None for a given word list
    unknown_share: float = 0.0  # share of the subword tokens that are the tokenizer's unknown token
    variants: dict[str, str] = field(default_factory=dict)  # the trained variant each learned method applied
    # The class the scores explain (None: the predicted one) and the contrast class whose margin they explain beside
    # it (None: none), by index and by the classifier's name; the methods whose scores cannot depend on the class.
    explained: int | None = None
    explained_label: str | None = None
    contrast: int | None = None
    contrast_label: str | None = None
    class_agnostic: list[str] = field(default_factory=list)

    @property
    def explains_predicted(self) -> bool:
        """Whether the scores explain the class the classifier predicts (with no contrast)."""
        return (self.explained is None or self.explained == self.predicted) and self.contrast is None

    @property
    def mostly_unknown(self) -> bool:
        """More than `UNKNOWN_SHARE_THRESHOLD` of the subword tokens are unknown: the explanation means little."""
        return self.unknown_share > UNKNOWN_SHARE_THRESHOLD

    def record(self) -> dict[str, Any]:
        """The JSONL object of the CLI and the served model (JSON types only: offsets as lists)."""
        return {"id": self.id, "text": self.text, "words": self.words,
                "offsets": None if self.offsets is None else [[start, end] for start, end in self.offsets],
                "predicted": self.predicted, "label": self.label, "probability": self.probability,
                "truncated": self.truncated, "unknown_share": self.unknown_share,
                "mostly_unknown": self.mostly_unknown, "variants": self.variants,
                "explained": self.predicted if self.explained is None else self.explained,
                "explained_label": self.label if self.explained_label is None else self.explained_label,
                "explains_predicted": self.explains_predicted, "contrast": self.contrast,
                "contrast_label": self.contrast_label, "class_agnostic": self.class_agnostic,
                "scores": self.word_scores, "rationale": self.rationale}


def word_scores(token_scores: np.ndarray, token_words: Sequence[int], n_words: int, signed: bool) -> list[float | None]:
    """Per-word scores from per-token scores: sum over a word's tokens if `signed`, else their maximum;
    None for a word without tokens."""
    out: list[float | None] = [None] * n_words
    for score, word in zip(np.asarray(token_scores, dtype=float), token_words):
        current = out[word]
        out[word] = float(score) if current is None else (current + float(score) if signed else max(current, float(score)))
    return out


def own_rule(scores: Sequence[float | None], threshold: float | None, rho: float) -> list[int]:
    """0/1 per word: `threshold_mask` (learned explainers) or top-k at the budget rho, over words with a score."""
    present = [i for i, s in enumerate(scores) if s is not None]
    mask = [0] * len(scores)
    if not present:
        return mask
    values = np.asarray([scores[i] for i in present], dtype=float)
    chosen = threshold_mask(values, threshold) if threshold is not None else top_k_mask(values, budget_k(len(values), rho))
    for index, keep in zip(present, chosen):
        mask[index] = int(keep)
    return mask
