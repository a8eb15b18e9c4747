"""A student judged on held-out texts: fidelity to a reference teacher, faithfulness, cost."""
from __future__ import annotations

import logging
from typing import Any, Sequence

import numpy as np
import pandas as pd

from learned_attribution.core.explainers import build_method
from learned_attribution.core.explainers.apply import explain_examples
from learned_attribution.core.metrics.fidelity import example_spearmans, paired_scores, top_k_agreement, top_k_overlap
from learned_attribution.core.metrics.plausibility import bootstrap_ci
from learned_attribution.core.models.signals import token_vocabulary
from learned_attribution.core.tasks import FOLD_PREFIX
from learned_attribution.core.explainers.learned import STUDENT

from ..config import ScoringSettings
from ..evaluation.cost import FORWARD, Timed, cost_table, timed_forward
from ..evaluation.faithfulness import faithfulness_rows, faithfulness_summary, scored
from ..evaluation.protocol import expensive_sample, score_methods, scored_examples
from ..config import AmortizeSettings

logger = logging.getLogger(__name__)


def fidelity_table(candidates: dict[str, pd.DataFrame], reference: pd.DataFrame,
                   fractions: Sequence[float] = (0.1, 0.2), n_boot: int = 1000, seed: int = 0,
                   counts: Sequence[int] = (5,)) -> pd.DataFrame:
    """Each candidate's token scores (example_id, scores) against the `reference`'s on the examples both have:
    mean per-example Spearman, top-k overlap with k a share of the tokens (`top10`: each of `fractions`) and with k
    a number of tokens (`top5_tokens`: each of `counts`, at most the text's tokens), with bootstrap 95% intervals."""
    rows = []
    for name, table in candidates.items():
        pairs = paired_scores(table, reference)
        row: dict[str, Any] = {"method": name, "n_examples": len(pairs)}
        if pairs:
            metrics = {"spearman": example_spearmans(pairs)}
            for fraction in fractions:
                metrics[f"top{round(100 * fraction)}"] = np.array([top_k_overlap(a, b, fraction) for a, b in pairs])
            for k in counts:
                metrics[f"top{int(k)}_tokens"] = np.array([top_k_agreement(a, b, k) for a, b in pairs])
            for metric, values in metrics.items():
                row[metric] = float(np.nanmean(values)) if np.isfinite(values).any() else float("nan")
                row[f"{metric}_low"], row[f"{metric}_high"] = bootstrap_ci(values, n_boot, seed)
        rows.append(row)
    return pd.DataFrame(rows)


def student_method(classifier, student, layer: int = -1):
    """The `student` attribution method of a trained student, for `classifier` (the one it is bound to)."""
    return build_method(STUDENT, model=student, layer=layer, vocabulary=token_vocabulary(classifier.tokenizer))


def scores_of(classifier, examples: pd.DataFrame, methods: dict, batch_size: int = 16):
    """Token scores (example_id, method, scores) of in-process methods, and each one's seconds."""
    run = explain_examples(classifier.model, classifier.tokenizer, examples, methods, batch_size)
    return run.scores, run.seconds


def faithfulness_table(classifier, examples: pd.DataFrame, scores: dict[str, pd.DataFrame],
                       fractions: Sequence[float], batch_size: int = 32, n_boot: int = 1000,
                       seed: int = 0) -> pd.DataFrame:
    """ERASER comprehensiveness and sufficiency (AOPC) of each method's scores on `examples` (for the predicted
    class), mean with bootstrap 95% intervals."""
    by_id = examples.set_index("example_id")
    methods = {name: scored(table[table["example_id"].isin(by_id.index)], by_id["input_ids"], by_id["predicted"])
               for name, table in scores.items()}
    methods = {name: rows for name, rows in methods.items() if rows.example_ids}
    return faithfulness_summary(faithfulness_rows(classifier, methods, fractions, batch_size), n_boot, seed)


def evaluate_student(classifier, student, held_out: pd.DataFrame, teacher_scores: pd.DataFrame,
                     reference_scores: pd.DataFrame | None, settings: AmortizeSettings,
                     ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Fidelity (student and teacher against the reference; empty without one), faithfulness (student, teacher,
    saliency) and cost on the held-out texts: examples per second of the student and saliency on every held-out
    text and of the teacher on the first `cost_texts` of them, each beside a plain forward pass over the same texts
    (`ratio_to_forward`), all timed in this call, in process."""
    teacher_name = f"teacher ({settings.teacher.describe()})"
    methods = {STUDENT: student_method(classifier, student, settings.layer), "saliency": build_method("saliency")}
    timed_forward(classifier, held_out.head(settings.batch_size), settings.batch_size)  # warm-up
    scores, seconds = scores_of(classifier, held_out, methods, settings.batch_size)
    sample = held_out.head(settings.cost_texts)
    _, teacher_seconds = scores_of(classifier, sample, {teacher_name: settings.teacher.build()}, settings.batch_size)
    forward = {len(held_out): timed_forward(classifier, held_out, settings.batch_size),
               len(sample): timed_forward(classifier, sample, settings.batch_size)}
    cost = cost_table([Timed(FORWARD, len(held_out), forward[len(held_out)]),
                       *(Timed(name, len(held_out), seconds[name]) for name in methods),
                       Timed(teacher_name, len(sample), teacher_seconds[teacher_name])], forward)
    by_method = {name: rows for name, rows in scores.groupby("method", sort=False)}
    candidates = {STUDENT: by_method[STUDENT], teacher_name: teacher_scores}
    fidelity = (fidelity_table(candidates, reference_scores, settings.top_k_fractions, settings.n_boot, settings.seed,
                               settings.top_k_tokens) if reference_scores is not None else pd.DataFrame())
    faithful = faithfulness_table(classifier, held_out, {**candidates, "saliency": by_method["saliency"]},
                                  settings.faithfulness_fractions, 2 * settings.batch_size, settings.n_boot,
                                  settings.seed)
    return fidelity, faithful, cost


def plausibility_rows(classifier, student, predictions: pd.DataFrame, rho: float, scoring: ScoringSettings,
                      layer: int, task: str) -> pd.DataFrame:
    """A task classifier's student against the task's rationale test set, scored by the folds' protocol (the same
    examples and seeded sample, the fold's matched budget `rho`, the same bootstrap): its rows in the metric
    schema (subsets all, correct, incorrect, sample), with its faithfulness on the fold's sample beside the sample
    rows. The student reads no rationale, so the protocol allows it in the held-out fold's table."""
    examples = scored_examples(predictions, scoring)
    run = explain_examples(classifier.model, classifier.tokenizer, examples,
                           {STUDENT: student_method(classifier, student, layer)}, scoring.batch_size)
    sample = expensive_sample(examples, scoring.expensive_sample_size, scoring.seed)  # the fold's own seeded sample
    rows = score_methods(run.scores, examples, rho, {}, f"{FOLD_PREFIX}{task}", task, scoring.n_boot,
                         scoring.boot_seed, sample_ids=sample)
    rows = rows[rows["method"] == STUDENT].copy()
    by_id = examples.set_index("example_id")
    sampled = run.scores[run.scores["example_id"].isin(set(sample))]
    faithful = faithfulness_rows(classifier, {STUDENT: scored(sampled, by_id["input_ids"], by_id["predicted"])},
                                 scoring.faithfulness_fractions, scoring.faithfulness_batch_size)
    on_sample = rows["subset"] == "sample"
    rows.loc[on_sample, "comprehensiveness"] = float(faithful["comprehensiveness"].mean())
    rows.loc[on_sample, "sufficiency"] = float(faithful["sufficiency"].mean())
    return rows
