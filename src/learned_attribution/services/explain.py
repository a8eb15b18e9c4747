"""Explain new text with a trained explainer: the Python API behind the CLI and the served MLflow model (no Kedro).

    from learned_attribution import FoldExplainer, StudentExplainer
    explainer = FoldExplainer.from_fold("heldout_sst2")              # data/06_models/heldout_sst2 + its classifier
    [result] = explainer.explain(["A gutsy and exhilarating movie ."], methods=["expnet_plus", "saliency"])
    result.word_scores["expnet_plus"], result.rationale["expnet_plus"], result.predicted, result.probability
    student = StudentExplainer.from_folder("data/06_models/student_sst2")   # an amortized student and its classifier

Two front doors onto one machinery (`BundleExplainer`): `FoldExplainer` applies a fold's ExpNet+ and the paper's
ExpNet (`services/bundle.py` reads the folder) to the fold's held-out task's classifier (by default), to any
sequence classifier folder of a family in `core/models/architectures.py` saved with `save_pretrained`, or to a hub name
where the hub is reachable (a served bundle carries its classifier in `classifier/`); `StudentExplainer` applies an
amortized student to the one classifier it was trained for. Every registered baseline runs beside either.

Words and scores:
- A text is split into words by the classifier tokenizer's pre-tokenizer (`core.data.words.tokenizer_words`: for BERT
  at whitespace and punctuation, so "shrugged." is "shrugged" and "."), each word the slice of the text as typed at
  its character offsets (`Explanation.offsets`); `words="whitespace"` splits at whitespace only; pass a list of words
  instead to keep your own segmentation (no offsets). Each word is tokenised into subwords (`is_split_into_words`,
  each word with its word-start marker where the tokenizer has one), `[CLS]`/`[SEP]` are added, and a text over
  `max_length` subwords is explained on its first `max_length` (`truncated`, with a warning). A text most of whose
  subwords are the tokenizer's unknown token (emoji, a script the vocabulary lacks) is explained but flagged
  (`mostly_unknown`, with a warning).
- Word scores and each method's own rationale rule: `services/explanation.py`.
"""
from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from learned_attribution.core.models.projection import project_to_subwords
from learned_attribution.core.data.classes import resolve_class
from learned_attribution.core.data.words import tokenizer_words, whitespace_words
from learned_attribution.core.errors import InputError
from learned_attribution.core.explainers import METHODS, AttributionMethod
from learned_attribution.core.explainers.apply import resolve_method, tokenizer_batch
from learned_attribution.core.explainers.passes import explain_together
from learned_attribution.core.models import artifacts
from learned_attribution.core.models.architectures import architecture
from learned_attribution.core.models.loading import TrainedClassifier, max_positions
from learned_attribution.core.models.runner import iter_batches, predict_proba, resolve_device
from learned_attribution.core.models.signals import token_vocabulary
from learned_attribution.core.explainers.learned import EXPNET_PLUS, LEARNED, STUDENT

from . import bundle as bundles
from .explanation import UNKNOWN_SHARE_THRESHOLD, WORD_SPLITS, Explanation, own_rule, word_scores

logger = logging.getLogger(__name__)


class BundleExplainer:
    """A bundle's learned explainers and every registered baseline, applied to one classifier."""

    def __init__(self, folder: str | Path, classifier: TrainedClassifier, device: str = "auto",
                 max_length: int | None = None):
        self.folder = Path(folder)
        self.bundle = bundle = bundles.read_bundle(self.folder)  # as read: `learned` below may swap in shape_free
        self.card = bundle.card
        self.learned = dict(bundle.learned)
        architecture(classifier.model)  # an unsupported family stops here, naming the supported ones
        # A learned explainer reads a fixed number of layers and heads unless it is shape-free; a classifier of
        # another shape can still be explained by every baseline, so the check applies to the learned methods asked
        # for, not to the bundle. A fold's `expnet_plus` falls back to its best shape-free variant.
        self._incompatible: dict[str, str] = {}
        for name, learned in list(self.learned.items()):
            try:
                artifacts.check_compatible(learned, classifier.model, classifier.tokenizer,
                                           where=f"{self.folder.name}/{name}")
            except artifacts.IncompatibleClassifierError as error:
                if name == EXPNET_PLUS and bundle.shape_free is not None:
                    self.learned[name] = bundle.shape_free
                    logger.info("%s: the chosen ExpNet+ variant %r cannot read this classifier (%s); its shape-free "
                                "variant %r explains it", self.folder.name, learned.variant.name, error,
                                bundle.shape_free.variant.name)
                else:
                    self._incompatible[name] = str(error)
        self.classifier = classifier
        self.device = resolve_device(device)
        classifier.model.to(self.device).eval()
        context = next(iter(self.learned.values())).context
        self.max_length = self._checked_max_length(max_length, int(context.get("max_length", 128)))
        self.rho = float(self.card["rho"])
        self.layer = int(self.card.get("layer", context.get("layer", -1)))
        self._methods: dict[str, AttributionMethod] = {}
        self._vocabulary = token_vocabulary(classifier.tokenizer)  # a scan of the vocabulary: once
        # Explaining hooks the one classifier's modules and toggles its weights' requires_grad (core/models/signals.py,
        # core/explainers/attention.py): two explanations at once would see each other's hooks and flags. Calls from
        # several threads (a served model answers requests on parallel threads) therefore take turns; torch
        # already spreads one batch over the cores, so little throughput is lost (benchmarks/serving_load.py measures it).
        self._model_lock = threading.Lock()

    def _checked_max_length(self, max_length: int | None, default: int) -> int:
        """`max_length` (or the bundle's `default`), refused before any work when the classifier cannot read that
        many tokens: beyond its position embeddings it would fail inside the model."""
        value = default if max_length is None else max_length
        given = "max_length" if max_length is not None else "the fold's max_length"
        if isinstance(value, bool) or not isinstance(value, int) or value < 3:
            raise InputError(f"{given}={value!r}: must be an integer of at least 3 ([CLS], a token, [SEP])")
        maximum = max_positions(self.classifier.model, self.classifier.tokenizer)
        if maximum is not None and value > maximum:
            raise InputError(f"{given}={value} is more than the classifier accepts: at most {maximum} subword "
                             f"tokens, [CLS] and [SEP] included (its position embeddings and tokenizer); "
                             f"use --max-length {maximum} or less (API: max_length=)")
        return value

    @property
    def methods(self) -> list[str]:
        """Every method this bundle can apply: its learned explainers (a fold's two, or a student) and every
        registered baseline."""
        trained = set(LEARNED)
        return [*self.learned, *sorted(n for n in METHODS if n not in trained)]

    @property
    def default_methods(self) -> list[str]:
        """The bundle's first learned explainer (a fold's ExpNet+, a student) and its best baseline (a fold's by
        AUROC on its held-out task; a student's teacher); the baseline alone for a classifier that the learned one
        cannot read (a fold saved without a shape-free variant: `incompatible`)."""
        first = bundles.STUDENT if bundles.STUDENT in self.learned else EXPNET_PLUS
        return [m for m in (first, self.card["best_baseline"]) if m not in self._incompatible]

    @property
    def incompatible(self) -> dict[str, str]:
        """The learned methods this classifier cannot be explained with, each with what differs."""
        return dict(self._incompatible)

    def is_signed(self, method: str) -> bool:
        return METHODS[method].signed

    def method(self, name: str) -> AttributionMethod:
        """The attribution method `name` as this bundle applies it (a learned one reads the bundle's layer)."""
        if name not in self.methods:
            raise InputError(f"unknown method {name!r}; available: {self.methods}")
        if name in self._incompatible:
            usable = [m for m in self.methods if m not in self._incompatible]
            raise artifacts.IncompatibleClassifierError(
                f"{self._incompatible[name]}. The other methods run on this classifier: {usable}")
        if name not in self._methods:
            self._methods[name] = resolve_method(name, learned=self.learned, layer=self.layer,
                                                 vocabulary=self._vocabulary,
                                                 settings=self.card.get("baselines", {}).get(name))
        return self._methods[name]

    def threshold(self, method: str) -> float | None:
        return self.learned[method].own_threshold if method in self.learned else None

    @property
    def classes(self) -> list[str]:
        """The classifier's class names in index order (its config's `id2label`)."""
        config = self.classifier.model.config
        id2label = getattr(config, "id2label", None) or {}
        return [str(id2label.get(index, f"LABEL_{index}")) for index in range(int(config.num_labels))]

    def _per_text(self, value, n_texts: int, name: str) -> list[int] | None:
        """`target` or `contrast` as one class index per text (None: not given): one class for every text, or a
        sequence of one per text, each a class name or index (`core.data.classes.resolve_class`)."""
        if value is None:
            return None
        if isinstance(value, (str, int, np.integer)):
            return [resolve_class(value, self.classes, name)] * n_texts
        values = list(value)
        if len(values) != n_texts:
            raise InputError(f"{name}: {len(values)} classes for {n_texts} texts; give one class, or one per text")
        empty = [index for index, v in enumerate(values) if v is None or (isinstance(v, str) and not v.strip())]
        if empty:
            raise InputError(f"{name}[{empty[0]}] is empty: give a class name or index for every text")
        return [resolve_class(v, self.classes, f"{name}[{index}]") for index, v in enumerate(values)]

    def _check_classes(self, targets: list[int] | None, contrasts: list[int] | None, methods: list[str]) -> None:
        """A contrast needs a target, never equals it, and a student explains its predicted class only; a method
        whose scores cannot depend on the class is said once per call."""
        if targets is None and contrasts is None:
            return
        if contrasts is not None and targets is None:
            raise InputError("contrast needs a target: the margin of which class over it (target=...)")
        for index, (target, foil) in enumerate(zip(targets, contrasts or [None] * len(targets))):
            if target == foil:
                raise InputError(f"text {index}: the target {self.classes[target]!r} is also its contrast; give "
                                 "another contrast")
        if STUDENT in methods:
            raise InputError(f"{STUDENT} explains the predicted class only (it learned its teacher's scores for "
                             "that class): leave target and contrast unset, or explain with the baselines")
        agnostic = [m for m in methods if self.method(m).class_agnostic]
        if agnostic:
            logger.warning("%s: class-agnostic (their scores cannot depend on the class): the same maps for every "
                           "target", ", ".join(agnostic))

    def explain(self, texts: str | Sequence[str | Sequence[str]], methods: Sequence[str] | None = None,
                batch_size: int = 16, ids: str | Sequence[str] | None = None, progress=None,
                words: str = "tokenizer", target=None, contrast=None) -> list[Explanation]:
        """One `Explanation` per text, in input order. A text is a string (split into words by the tokenizer's
        pre-tokenizer, or at whitespace with `words="whitespace"`) or a list of words; a single string is one text.

        `target`: the class to explain (a name or index of the classifier's `classes`, one for every text or one
        per text; default: the class each text is predicted as); `contrast`: a foil class, the scores then explain
        the target's margin over it (`core/explainers/objective.py`). `methods` default to `default_methods`;
        `progress` (e.g. a tqdm bar) is updated per explained text."""
        if isinstance(texts, str):  # one text, not a sequence of one-character texts
            texts = [texts]
        if isinstance(ids, str):
            ids = [ids]
        if words not in WORD_SPLITS:
            raise InputError(f"words={words!r}: must be 'tokenizer' or 'whitespace'")
        methods = list(self.default_methods if methods is None else dict.fromkeys(methods))
        for method in methods:
            self.method(method)  # unknown names fail before any work
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InputError(f"batch_size={batch_size!r}: must be a positive integer")
        segmented = [self._words(text, index, words) for index, text in enumerate(texts)]
        if ids is not None and len(ids) != len(segmented):
            raise InputError(f"{len(ids)} ids for {len(segmented)} texts")
        targets = self._per_text(target, len(segmented), "target")
        contrasts = self._per_text(contrast, len(segmented), "contrast")
        self._check_classes(targets, contrasts, methods)
        tokenized = self._tokenize([w for w, _ in segmented])
        tokenized["text"] = [text if isinstance(text, str) else " ".join(w) for text, (w, _) in zip(texts, segmented)]
        tokenized["offsets"] = pd.Series([o for _, o in segmented], index=tokenized.index, dtype=object)
        results: list[Explanation | None] = [None] * len(segmented)
        input_ids = list(tokenized["input_ids"])
        for batch in iter_batches(input_ids, batch_size):
            with self._model_lock:
                explained = self._explain_batch(tokenized.iloc[batch], methods,
                                                None if targets is None else [targets[i] for i in batch],
                                                None if contrasts is None else [contrasts[i] for i in batch])
            for index, explanation in zip(batch, explained):
                explanation.id = None if ids is None else str(ids[index])
                results[index] = explanation
            if progress is not None:
                progress.update(len(batch))
        return results

    def _words(self, text: str | Sequence[str], index: int, split: str
               ) -> tuple[list[str], list[tuple[int, int]] | None]:
        """A text's words and their offsets (None for a list of words: the user's segmentation wins)."""
        if isinstance(text, str):
            words, offsets = (tokenizer_words(self.classifier.tokenizer, text) if split == "tokenizer"
                              else whitespace_words(text))
        else:
            words, offsets = [str(w) for w in text], None
        if not words or not any(w.strip() for w in words):
            raise InputError(f"text {index} is empty or whitespace only")
        return words, offsets

    def _tokenize(self, words: list[list[str]]) -> pd.DataFrame:
        tokenizer = self.classifier.tokenizer
        frame = pd.DataFrame({"words": words, "word_rationale": [None] * len(words)})
        tokenized = project_to_subwords(frame, tokenizer, self.max_length)
        shares = []
        for index, (row_words, word_ids, input_ids, truncated) in enumerate(
                zip(words, tokenized["word_ids"], tokenized["input_ids"], tokenized["truncated"])):
            if len(word_ids) <= 2:
                raise InputError(f"text {index} gives no subword tokens: {' '.join(row_words)[:80]!r}")
            if truncated:
                logger.warning("text %d is longer than max_length=%d subwords: explained on its first %d "
                               "(truncated: true)", index, self.max_length, self.max_length)
            inner = input_ids[1:-1]  # [CLS]/[SEP] excluded, as in the explanation's tokens
            n_unknown = sum(i == tokenizer.unk_token_id for i in inner) if tokenizer.unk_token_id is not None else 0
            shares.append(n_unknown / len(inner))
            if shares[-1] > UNKNOWN_SHARE_THRESHOLD:
                logger.warning("text %d: %d of its %d subword tokens (%.0f%%) are the tokenizer's unknown token %s "
                               "(emoji, a script its vocabulary lacks?): the classifier cannot read most of the text, "
                               "so its prediction and explanation mean little (mostly_unknown: true)", index,
                               n_unknown, len(inner), 100 * shares[-1], tokenizer.unk_token)
        return tokenized.assign(unknown_share=shares).reset_index(drop=True)

    def _explain_batch(self, rows: pd.DataFrame, methods: list[str], targets: list[int] | None = None,
                       contrasts: list[int] | None = None) -> list[Explanation]:
        model, tokenizer = self.classifier.model, self.classifier.tokenizer
        token_scores: dict[str, np.ndarray] = {}
        probabilities = None  # class probabilities [B, C] of the explained classifier
        # A method that classifies and explains in one pass (`AttributionMethod.classifies`: the learned explainers and the
        # gradient methods) goes first, so its logits decide the class and no separate classification pass is run.
        # The baselines that read one pass of the classifier share it (`explainers.passes.explain_together`).
        ordered = sorted(methods, key=lambda m: not self.method(m).classifies)
        batch = tokenizer_batch(list(rows["input_ids"]), targets, tokenizer, contrast=contrasts).to(self.device)
        if not self.method(ordered[0]).classifies:
            probabilities = predict_proba(model, list(rows["input_ids"]), len(rows), tokenizer.pad_token_id)
            if targets is None:
                batch.target = torch.as_tensor(probabilities.argmax(-1)).to(self.device)
        # The model is in eval mode (__init__).
        attributions = explain_together(model, batch, {method: self.method(method) for method in ordered})
        if probabilities is None:
            logits = next(a.logits for a in attributions.values() if a.logits is not None)
            probabilities = torch.softmax(logits.float(), dim=-1).cpu().numpy()
        for method, attribution in attributions.items():
            token_scores[method] = attribution.scores.detach().float().cpu().numpy()
        keep = ~batch.special_mask.cpu().numpy()
        id2label = getattr(model.config, "id2label", {}) or {}
        agnostic = [m for m in methods if self.method(m).class_agnostic]
        explanations = []
        for row, record in enumerate(rows.itertuples(index=False)):
            positions = np.nonzero(keep[row])[0]
            token_words = [record.word_ids[p] for p in positions]
            predicted = int(probabilities[row].argmax())
            explanation = Explanation(
                text=record.text, words=list(record.words),
                tokens=tokenizer.convert_ids_to_tokens([record.input_ids[p] for p in positions]),
                token_words=token_words, predicted=predicted, label=str(id2label.get(predicted, predicted)),
                probability=float(probabilities[row, predicted]), truncated=bool(record.truncated),
                offsets=None if record.offsets is None else [tuple(o) for o in record.offsets],
                unknown_share=float(record.unknown_share))
            explanation.variants = {m: self.learned[m].variant.name for m in methods if m in self.learned}
            explained = predicted if targets is None else targets[row]
            explanation.explained, explanation.explained_label = explained, str(id2label.get(explained, explained))
            if contrasts is not None:
                explanation.contrast = contrasts[row]
                explanation.contrast_label = str(id2label.get(contrasts[row], contrasts[row]))
            explanation.class_agnostic = agnostic
            for method in methods:
                scores = token_scores[method][row, positions]
                explanation.token_scores[method] = scores.tolist()
                per_word = word_scores(scores, token_words, len(record.words), self.is_signed(method))
                explanation.word_scores[method] = per_word
                explanation.rationale[method] = own_rule(per_word, self.threshold(method), self.rho)
            explanations.append(explanation)
        return explanations


class FoldExplainer(BundleExplainer):
    """A trained fold: its ExpNet+ (the chosen variant, or its shape-free variant for a classifier of another
    shape) and the paper's ExpNet, beside every baseline."""

    @classmethod
    def from_fold(cls, fold: str | Path, classifier: str | Path | TrainedClassifier | None = None,
                  models_dir: str | Path = bundles.DEFAULT_MODELS_DIR, device: str = "auto",
                  max_length: int | None = None) -> "FoldExplainer":
        """Load fold `fold` (`heldout_<task>`, or a fold folder) and a classifier (default: the classifier
        bundled with the folder, else the fold's held-out task's)."""
        folder = bundles.fold_folder(fold, models_dir)
        if not isinstance(classifier, TrainedClassifier):
            if classifier is None and (folder / bundles.CLASSIFIER / "config.json").is_file():
                classifier = folder / bundles.CLASSIFIER
            card = bundles.read_card(folder)
            classifier = bundles.task_classifier(classifier, models_dir, default_task=card.get("held_out_task"))
        return cls(folder, classifier, device=device, max_length=max_length)


class StudentExplainer(BundleExplainer):
    """An amortized student (`learned-attribution fit`, `kedro run --pipeline amortize`) on the one classifier it
    was trained for, beside every baseline (its teacher by default)."""

    @classmethod
    def from_folder(cls, folder: str | Path, classifier: str | Path | TrainedClassifier | None = None,
                    device: str = "auto", max_length: int | None = None) -> "StudentExplainer":
        """Load a student's folder (`learned-attribution fit --output DIR`, or the `amortize` pipeline's
        `data/06_models/student_<task>`) and its classifier (default: the one it was trained for, as recorded in
        its card; a student explains only that classifier)."""
        folder = Path(folder)
        if not (folder / bundles.CARD).is_file() or not artifacts.is_complete(folder / bundles.STUDENT):
            raise InputError(f"{folder} is not a student folder (needs {bundles.CARD} and {bundles.STUDENT}/): train "
                             "one with `learned-attribution fit` or `kedro run --pipeline amortize`")
        if not isinstance(classifier, TrainedClassifier):
            if classifier is None and (folder / bundles.CLASSIFIER / "config.json").is_file():
                classifier = folder / bundles.CLASSIFIER
            card = bundles.read_card(folder)
            classifier = bundles.task_classifier(classifier if classifier is not None else card.get("classifier"))
        return cls(folder, classifier, device=device, max_length=max_length)


def open_explainer(folder: str | Path, device: str = "auto") -> BundleExplainer:
    """The explainer of a bundle folder by its card's kind (a fold or a student), with the classifier it carries or
    names (the served model's loader)."""
    if bundles.is_student(folder):
        return StudentExplainer.from_folder(folder, device=device)
    return FoldExplainer.from_fold(folder, device=device)
