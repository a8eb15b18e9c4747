"""Does a student lack texts? Its learning curve: refit on nested shares of its teacher's texts."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from learned_attribution.core.explainers.learned import STUDENT

from .scores import fidelity_table, scores_of, student_method
from ..config import AmortizeSettings
from .student import fit_student


def learning_curve(classifier, texts: pd.DataFrame, signals: pd.DataFrame, teacher_scores: pd.DataFrame,
                   held_out: pd.DataFrame, reference_scores: pd.DataFrame, settings: AmortizeSettings,
                   fractions: Sequence[float] = (0.125, 0.25, 0.5, 1.0)) -> pd.DataFrame:
    """The student refit, as `fit_student` trains it (every variant, the best on validation kept), on nested seeded
    shares `fractions` of its teacher's texts, each fit scored against the reference on the held-out texts through
    the `student` method, as `evaluate_student` scores it. One row per share: fraction, n_texts, the selected
    variant, its Spearman on its own training texts and on its validation texts, the held-out Spearman with its
    interval and the top-k overlaps."""
    bad = [f for f in fractions if not 0 < f <= 1]
    if bad or not fractions:
        raise ValueError(f"learning-curve fractions {list(fractions)} must be in (0, 1]")
    order = np.random.default_rng(settings.seed).permutation(len(teacher_scores))
    rows = []
    for fraction in sorted(fractions):
        n_texts = max(2, int(round(fraction * len(teacher_scores))))
        subset = teacher_scores.iloc[np.sort(order[:n_texts])]
        student, variants = fit_student(classifier, texts, signals, subset, settings.variants, settings.training_settings(),
                                        settings.val_fraction, settings.seed, layer=settings.layer)
        scores, _ = scores_of(classifier, held_out, {STUDENT: student_method(classifier, student, settings.layer)},
                              settings.batch_size)
        fidelity = fidelity_table({STUDENT: scores}, reference_scores, settings.top_k_fractions, settings.n_boot,
                                  settings.seed, settings.top_k_tokens).iloc[0]
        selected = variants.iloc[0]
        rows.append({"fraction": fraction, "n_texts": n_texts, "variant": selected["variant"],
                     "train_spearman": selected["train_spearman"], "val_spearman": selected["val_spearman"],
                     **fidelity.drop(["method"]).to_dict()})
    return pd.DataFrame(rows)
