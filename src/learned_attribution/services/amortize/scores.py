"""A student judged on held-out texts: fidelity to a reference teacher, faithfulness, cost (issue 14)."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pandas as pd

from learned_attribution.core.explainers import build_explainer

if TYPE_CHECKING:
    from . import AmortizeSettings

logger = logging.getLogger(__name__)


def _paired_scores(table: pd.DataFrame, reference: pd.DataFrame) -> list[tuple[np.ndarray, np.ndarray]]:
    """(candidate scores, reference scores) of every example of `table` (example_id, scores) the reference has."""
    reference_by_id = dict(zip(reference["example_id"], reference["scores"]))
    return [(np.asarray(s, float), np.asarray(reference_by_id[i], float))
            for i, s in zip(table["example_id"], table["scores"]) if i in reference_by_id]


def example_spearmans(pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Per-example Spearman of each (scores, reference) pair."""
    from learned_attribution.core.metrics.fidelity import example_spearman

    groups = np.concatenate([np.full(len(a), k) for k, (a, _) in enumerate(pairs)])
    return example_spearman(np.concatenate([a for a, _ in pairs]), np.concatenate([b for _, b in pairs]), groups)


def mean_example_spearman(table: pd.DataFrame, reference: pd.DataFrame) -> float:
    """Mean per-example Spearman of `table`'s token scores with `reference`'s (both: example_id, scores)."""
    return float(np.nanmean(example_spearmans(_paired_scores(table, reference))))


def fidelity_table(candidates: dict[str, pd.DataFrame], reference: pd.DataFrame,
                   fractions: Sequence[float] = (0.1, 0.2), n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Each candidate's token scores (example_id, scores) against the `reference`'s on the examples both have:
    mean per-example Spearman and top-k overlap (k = each fraction of the tokens), with bootstrap 95% intervals."""
    from learned_attribution.core.metrics.fidelity import top_k_overlap
    from learned_attribution.core.metrics.plausibility import bootstrap_ci

    rows = []
    for name, table in candidates.items():
        pairs = _paired_scores(table, reference)
        row: dict[str, Any] = {"method": name, "n_examples": len(pairs)}
        if pairs:
            metrics = {"spearman": example_spearmans(pairs)}
            for fraction in fractions:
                metrics[f"top{round(100 * fraction)}"] = np.array([top_k_overlap(a, b, fraction) for a, b in pairs])
            for metric, values in metrics.items():
                row[metric] = float(np.nanmean(values)) if np.isfinite(values).any() else float("nan")
                row[f"{metric}_low"], row[f"{metric}_high"] = bootstrap_ci(values, n_boot, seed)
        rows.append(row)
    return pd.DataFrame(rows)


def student_explainer(classifier, student, layer: int = -1):
    """The `student` explainer of a trained student, for `classifier` (the one it is bound to)."""
    from learned_attribution.core.models.signals import token_vocabulary

    return build_explainer("student", model=student, layer=layer, vocabulary=token_vocabulary(classifier.tokenizer))


def scores_of(classifier, examples: pd.DataFrame, explainers: dict, batch_size: int = 16):
    """Token scores (example_id, method, scores) of in-process explainers, and each one's seconds."""
    from learned_attribution.services.evaluation import explain_examples

    run = explain_examples(classifier.model, classifier.tokenizer, examples, explainers, batch_size)
    return run.scores, run.seconds


def faithfulness_table(classifier, examples: pd.DataFrame, scores: dict[str, pd.DataFrame],
                       fractions: Sequence[float], batch_size: int = 32, n_boot: int = 1000,
                       seed: int = 0) -> pd.DataFrame:
    """ERASER comprehensiveness and sufficiency (AOPC) of each method's scores on `examples` (for the predicted
    class), mean with bootstrap 95% intervals."""
    from learned_attribution.core.metrics.faithfulness import faithfulness
    from learned_attribution.core.metrics.plausibility import bootstrap_ci

    by_id = examples.set_index("example_id")
    rows = []
    for name, table in scores.items():
        ids = [i for i in table["example_id"] if i in by_id.index]
        if not ids:
            continue
        values = dict(zip(table["example_id"], table["scores"]))
        result = faithfulness(classifier.model, [list(by_id.at[i, "input_ids"]) for i in ids],
                              [np.asarray(values[i], float) for i in ids], [int(by_id.at[i, "predicted"]) for i in ids],
                              fractions=tuple(fractions), batch_size=batch_size,
                              pad_token_id=classifier.tokenizer.pad_token_id)
        row: dict[str, Any] = {"method": name, "n_examples": len(ids)}
        for metric in ("comprehensiveness", "sufficiency"):
            row[metric] = float(result[metric].mean())
            row[f"{metric}_low"], row[f"{metric}_high"] = bootstrap_ci(result[metric].to_numpy(), n_boot, seed)
        rows.append(row)
    return pd.DataFrame(rows)



def evaluate_student(classifier, student, held_out: pd.DataFrame, teacher_scores: pd.DataFrame,
                     reference_scores: pd.DataFrame | None, settings: AmortizeSettings,
                     ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Fidelity (student and teacher against the reference; empty without one), faithfulness (student, teacher,
    saliency) and cost on the held-out texts: examples per second of the student and saliency on every held-out
    text and of the teacher on the first `cost_texts` of them, each beside a plain forward pass over the same texts
    (`ratio_to_forward`), all timed in this call, in process."""
    from learned_attribution.services.evaluation import FORWARD, timed_forward

    teacher_name = f"teacher ({settings.teacher.describe()})"
    explainers = {"student": student_explainer(classifier, student, settings.layer),
                  "saliency": build_explainer("saliency")}
    timed_forward(classifier, held_out.head(settings.batch_size), settings.batch_size)  # warm-up
    scores, seconds = scores_of(classifier, held_out, explainers, settings.batch_size)
    sample = held_out.head(settings.cost_texts)
    _, teacher_seconds = scores_of(classifier, sample, {teacher_name: settings.teacher.explainer()},
                                   settings.batch_size)
    forward = {len(held_out): timed_forward(classifier, held_out, settings.batch_size),
               len(sample): timed_forward(classifier, sample, settings.batch_size)}
    rows = [{"method": FORWARD, "n_examples": len(held_out), "seconds": forward[len(held_out)]}]
    rows += [{"method": name, "n_examples": len(held_out), "seconds": seconds[name]} for name in explainers]
    rows.append({"method": teacher_name, "n_examples": len(sample), "seconds": teacher_seconds[teacher_name]})
    cost = pd.DataFrame(rows)
    cost["examples_per_second"] = cost["n_examples"] / cost["seconds"]
    cost["ratio_to_forward"] = cost["n_examples"].map(forward) / cost["seconds"]

    by_method = {name: rows for name, rows in scores.groupby("method", sort=False)}
    candidates = {"student": by_method["student"], teacher_name: teacher_scores}
    fidelity = (fidelity_table(candidates, reference_scores, settings.top_k_fractions, settings.n_boot, settings.seed)
                if reference_scores is not None else pd.DataFrame())
    faithful = faithfulness_table(classifier, held_out, {**candidates, "saliency": by_method["saliency"]},
                                  settings.faithfulness_fractions, 2 * settings.batch_size, settings.n_boot,
                                  settings.seed)
    return fidelity, faithful, cost


def learning_curve(classifier, signals: pd.DataFrame, teacher_scores: pd.DataFrame, held_out: pd.DataFrame,
                   reference_scores: pd.DataFrame, settings: AmortizeSettings,
                   fractions: Sequence[float] = (0.125, 0.25, 0.5, 1.0)) -> pd.DataFrame:
    """Does the student lack texts? It is refit, as `fit_student` trains it (every variant, the best on validation
    kept), on nested seeded shares `fractions` of its teacher's texts, and each fit is scored against the reference
    on the held-out texts through the `student` explainer, as `evaluate_student` scores it. One row per share:
    fraction, n_texts, the selected variant, its Spearman on its own training texts and on its validation texts, the
    held-out Spearman with its interval and the top-k overlaps."""
    from .student import fit_student

    bad = [f for f in fractions if not 0 < f <= 1]
    if bad or not fractions:
        raise ValueError(f"learning-curve fractions {list(fractions)} must be in (0, 1]")
    order = np.random.default_rng(settings.seed).permutation(len(teacher_scores))
    rows = []
    for fraction in sorted(fractions):
        n_texts = max(2, int(round(fraction * len(teacher_scores))))
        subset = teacher_scores.iloc[np.sort(order[:n_texts])]
        student, variants = fit_student(classifier, signals, subset, settings.student_variants(),
                                        settings.training_settings(), settings.val_fraction, settings.seed)
        scores, _ = scores_of(classifier, held_out, {"student": student_explainer(classifier, student, settings.layer)},
                              settings.batch_size)
        fidelity = fidelity_table({"student": scores}, reference_scores, settings.top_k_fractions, settings.n_boot,
                                  settings.seed).iloc[0]
        selected = variants.iloc[0]
        rows.append({"fraction": fraction, "n_texts": n_texts, "variant": selected["variant"],
                     "train_spearman": selected["train_spearman"], "val_spearman": selected["val_spearman"],
                     **fidelity.drop(["method"]).to_dict()})
    return pd.DataFrame(rows)
