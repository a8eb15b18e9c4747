"""A user's refit: a fold's ExpNet+ refit on their own annotated examples (`learned-attribution fit --rationales`,
`learned_attribution.fit_rationales`), with the prior and schedule the fold's few-shot choice stored for the nearest
k below their number (`choice.py`, written by the fewshot pipeline), and their examples checked against the fold's
test examples by id."""
from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from learned_attribution.core.data.classes import NO_CLASS, class_names_of
from learned_attribution.core.data.modes import EXPLAINED
from learned_attribution.core.data.rationales import no_rationale_words, read_rationale_file
from learned_attribution.core.errors import InputError
from learned_attribution.core.models import artifacts
from learned_attribution.core.models.learned.fewshot import FOLD_PRIOR, FewShotSettings, fine_tune
from learned_attribution.core.models.loading import TrainedClassifier
from learned_attribution.core.models.projection import has_rationale_token, project_to_subwords
from learned_attribution.core.models.runner import predict_proba
from learned_attribution.core.models.signals import signal_rows
from learned_attribution.core.explainers.learned import EXPNET_PLUS

from .. import bundle as bundles
from ..explain import FoldExplainer

logger = logging.getLogger(__name__)


def fit_rationales(fold: str | Path, rationales: str | Path, output: str | Path, *,
                   classifier: str | Path | TrainedClassifier | None = None,
                   models_dir: str | Path = bundles.DEFAULT_MODELS_DIR, test_ids: Sequence[str] | None = None,
                   test_check: bool = True, settings: "FewShotSettings | None" = None, max_length: int | None = None,
                   batch_size: int = 16, device: str = "auto", rationale_labels: Sequence[str] | None = None,
                   class_field: str | None = None,
                   progress: Callable[[str, float], None] | None = None) -> FoldExplainer:
    """A fold's ExpNet+ refit on your own annotated examples (`rationales`: a rationale file in evaluate_external's
    formats, docs/external_rationales.md: word-level, or character spans from span JSONL, doccano or Label Studio)
    with a cross-task fit as its prior (`core.models.learned.fewshot`), for `classifier` (default: the fold's own,
    as `FoldExplainer.from_fold`); the fold's folder with the refit ExpNet+ is written to `output` and returned as a
    `FoldExplainer`. The classifier explains the class it predicts, as every method here does. A span file's text is
    split into the classifier tokenizer's words; `rationale_labels` (the doccano / Label Studio tags counted as
    rationale) and `class_field` (the field holding the class) are passed to `read_rationale_file`, with the
    classifier's class names (`id2label`): a file's class is a name or an index of them.

    The refit is the one the fewshot pipeline measured (docs/fewshot.md): for your n examples, the fold folder's
    few-shot choice (`fewshot/`, written by `kedro run --pipeline fewshot`) at the largest k with k <= n (with fewer
    examples than every k, the smallest k, said in the log): that k's prior (the fold's own ExpNet+, or a catalogue
    variant fitted cross-task) refit with that k's schedule, seeded as the curve's first draw. A fold folder without
    a choice: the fold's own ExpNet+ with `FewShotSettings()`, said in the log and the card. `settings` replaces the
    schedule (the prior stays the choice's).

    With `test_check`, examples whose id is a test example are refused by id: those of `test_ids` (a test set you
    will score on), by default the run's own test examples of the fold's held-out task
    (`07_model_output/rationale_predictions_<task>.parquet` beside `models_dir`); where neither is there the fit is
    refused, unless `test_check=False`. The card's `fewshot` entry records the file, n, the choice used (k, prior,
    variant, schedule) and whether the test check ran. `progress(stage, fraction done)` is called as each stage
    starts (the explorer's progress bar)."""
    report = progress or (lambda stage, fraction: None)
    report("loading the fold", 0.02)
    checked = _test_ids(fold, models_dir, test_ids, test_check)
    prior = FoldExplainer.from_fold(fold, classifier, models_dir=models_dir, device=device, max_length=max_length)
    if EXPNET_PLUS in prior.incompatible:
        raise artifacts.IncompatibleClassifierError(prior.incompatible[EXPNET_PLUS])
    model, tokenizer = prior.classifier.model, prior.classifier.tokenizer
    n_classes = int(model.config.num_labels)
    report("reading the annotations", 0.15)
    examples = read_rationale_file(rationales, n_classes=n_classes,
                                   class_names=class_names_of(getattr(model.config, "id2label", None), n_classes),
                                   rationale_labels=rationale_labels, class_field=class_field, tokenizer=tokenizer)
    leaked = sorted(set(examples["example_id"].astype(str)) & {str(i) for i in checked or ()})
    if leaked:
        raise InputError(f"{rationales}: {len(leaked)} example(s) are test examples, e.g. {leaked[:3]}: an explainer "
                         "fitted on them cannot be scored on them; leave them out of the file")
    examples = examples[~no_rationale_words(examples)]
    projected = project_to_subwords(examples, tokenizer, prior.max_length)
    projected = projected[has_rationale_token(projected)]
    if projected.empty:
        raise InputError(f"{rationales}: no example keeps a rationale token within max_length={prior.max_length} "
                         "subwords: nothing to fit on")
    n_examples = len(projected)
    choice = bundles.read_fewshot_choice(prior.folder / bundles.FEWSHOT)
    if choice is not None and choice.refits:
        k, chosen = choice.refit_for(n_examples)
        if n_examples < k:
            logger.warning("%s: %d annotated examples, fewer than the smallest k of the fold's few-shot choice %s: "
                           "refit with the choice at k = %d", rationales, n_examples, sorted(choice.refits), k)
        else:
            logger.info("%s: %d annotated examples: refit with the fold's few-shot choice at k = %d (of %s)",
                        rationales, n_examples, k, sorted(choice.refits))
        prior_name, schedule = chosen.prior, chosen.schedule
        learned = prior.learned[EXPNET_PLUS] if prior_name == FOLD_PRIOR else choice.priors[prior_name]
        if prior_name != FOLD_PRIOR:
            artifacts.check_compatible(learned, model, tokenizer,
                                       where=f"{prior.folder.name}/{bundles.FEWSHOT}/{prior_name}")
    else:
        k, prior_name, schedule, learned = None, FOLD_PRIOR, FewShotSettings(), prior.learned[EXPNET_PLUS]
        logger.warning("%s: no few-shot choice in %s (run `kedro run --pipeline fewshot` to measure one): the fold's "
                       "own ExpNet+ refit on %d annotated examples with the default schedule", rationales,
                       prior.folder, n_examples)
    schedule = settings or schedule
    logger.info("%s: fitting %s (prior %s) on %d annotated examples: %s", rationales, learned.variant.name,
                prior_name, n_examples, schedule)
    report("the classifier's signals on the annotated texts", 0.3)
    projected = projected.assign(predicted=predict_proba(model, list(projected["input_ids"]), batch_size,
                                                         tokenizer.pad_token_id).argmax(1))
    # Signals of the class each rationale supports (the annotator's; the predicted one where the file gives none).
    projected[EXPLAINED] = np.where(projected["label"] != NO_CLASS, projected["label"], projected["predicted"])
    rows = pd.concat(signal_rows(model, tokenizer, projected, learned.variant.feature_sets, prior.layer, batch_size),
                     ignore_index=True)
    report("fitting", 0.55)
    tuned = fine_tune(learned, rows, schedule)
    report("writing the fold folder", 0.9)
    bundle = prior.bundle
    card = {**bundle.card, "fewshot": {
        "rationales": str(rationales), "n_examples": n_examples, "fold_folder": str(prior.folder),
        "choice": "stored" if k is not None else "none: the fewshot pipeline has not run for this fold",
        "choice_ks": sorted(choice.refits) if k is not None else [], "k": k, "prior": prior_name,
        "variant": learned.variant.name, "schedule": dataclasses.asdict(schedule),
        "schedule_given": settings is not None, "test_check": test_check}}
    bundles.write_bundle(bundles.Bundle(card, {**bundle.learned, EXPNET_PLUS: tuned}, bundle.shape_free), output)
    return FoldExplainer.from_fold(output, prior.classifier, device=device, max_length=max_length)


def _test_ids(fold: str | Path, models_dir: str | Path, test_ids: Sequence[str] | None,
              test_check: bool) -> Sequence[str] | None:
    """The ids `fit_rationales` refuses to fit on: `test_ids`, else the run's test examples of the fold's held-out
    task (`bundles.run_test_ids`); None without the check. Refused before any work where there is nothing to check
    against."""
    if not test_check:
        if test_ids:
            raise InputError("test_ids given with test_check=False: give one or the other")
        return None
    if test_ids is not None:
        return test_ids
    task = bundles.read_card(bundles.fold_folder(fold, models_dir)).get("held_out_task")
    found = bundles.run_test_ids(models_dir, task) if task else None
    if found is None:
        where = (f"{bundles.run_predictions(models_dir, task)} does not exist" if task else
                 "the fold names no held-out task")
        raise InputError(f"no test examples to check your examples against ({where}): give the models folder of the "
                         "run that trained the fold (--models-dir), or fit without the check with --no-test-check "
                         "(API: test_check=False, or test_ids=)")
    return found
