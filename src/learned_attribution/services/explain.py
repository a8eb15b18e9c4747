"""Explain new text with a trained fold: the Python API behind the CLI and the served MLflow model (no Kedro).

    from learned_attribution.services.explain import FoldExplainer
    explainer = FoldExplainer.from_fold("heldout_sst2")              # data/06_models/heldout_sst2 + its classifier
    [result] = explainer.explain(["A gutsy and exhilarating movie ."], methods=["expnet_plus", "saliency"])
    result.word_scores["expnet_plus"], result.rationale["expnet_plus"], result.predicted, result.probability

A fold folder (`data/06_models/heldout_<task>/`, written by `kedro run --pipeline crosstask`) holds the paper's
ExpNet (`expnet_paper/`) and the chosen ExpNet+ (`expnet_plus/`) as safetensors + JSON (`models/artifacts.py`),
and `fold.json` (best baseline, baseline settings, budget). The classifier explained is by default the fold's
held-out task's (`data/06_models/classifier_<task>`), or any sequence classifier folder of a family in
`models/architectures.py` saved with `save_pretrained`, or a hub name where the hub is reachable; a served bundle
carries it in `classifier/`.

Words and scores:
- A text is split into words by the classifier tokenizer's pre-tokenizer (`tokenizer_words`: for BERT at whitespace
  and punctuation, so "shrugged." is "shrugged" and "."), each word the slice of the text as typed at its character
  offsets (`Explanation.offsets`); `words="whitespace"` splits at whitespace only (`whitespace_words`); pass a list
  of words instead to keep your own segmentation (no offsets). Each word is tokenised into subwords
  (`is_split_into_words`, each word with its word-start marker where the tokenizer has one), `[CLS]`/`[SEP]` are
  added, and a text over `max_length` subwords is explained on its first `max_length` (`truncated`, with a
  warning). A text most of whose subwords are the tokenizer's unknown token (emoji, a script the vocabulary lacks)
  is explained but flagged (`mostly_unknown`, with a warning).
- Every method scores the subword tokens for the class the classifier predicts. A word's score aggregates its
  subwords: the sum for signed methods (evidence for and against: IG, Input x Gradient, occlusion, LIME,
  KernelSHAP, AttCAT, whose token scores add up), the maximum otherwise (a word is as important as its
  most important piece; learned explainers output probabilities). Words without a subword (cut by
  truncation, or characters the tokenizer drops) get `None` and are never in a rationale.
- Rationale (each method's own rule, per word): learned explainers mark words whose probability reaches
  their threshold calibrated on the training tasks' validation data (at least one word); other methods mark
  the top k = round(rho x n words), rho being the fold's matched budget (the training tasks' rationale density).
"""
from __future__ import annotations

import json
import logging
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
import torch

from learned_attribution.core.data.projection import project_to_subwords
from learned_attribution.adapters.kedro_datasets import TrainedClassifier
from learned_attribution.services.evaluation import make_batch, method_explainer
from learned_attribution.core.explainers import EXPLAINERS, Explainer
from learned_attribution.core.metrics.plausibility import budget_k, threshold_mask, top_k_mask
from learned_attribution.core.models import artifacts
from learned_attribution.core.models.architectures import architecture, reserved_positions
from learned_attribution.core.models.runner import iter_batches, predict_proba, resolve_device
from learned_attribution.core.models.signals import token_vocabulary
from learned_attribution.core.tasks import FOLD_PREFIX, FOLDS, TASKS

logger = logging.getLogger(__name__)

DEFAULT_MODELS_DIR = Path("data/06_models")
LEARNED = ("expnet_plus", "expnet_paper")  # a fold's learned explainers (a card without `learned` has these)
STUDENT = "student"  # an amortized student's folder (issue 14, `amortize.py`)
SHAPE_FREE_FOLDER = "expnet_plus_shape_free"  # the fold's best shape-free variant (issue 12)
FOLD_CARD = "fold.json"
BUNDLED_CLASSIFIER = "classifier"
WORD_SPLITS = ("tokenizer", "whitespace")
# A text is `mostly_unknown` when MORE than this share of its subword tokens is the tokenizer's unknown token: the
# classifier then reads mostly one and the same embedding, and its prediction (often confident) says little about
# the text. Half is the point where the unknown token outweighs everything the model can read; a single emoji in a
# sentence stays well below it.
UNKNOWN_SHARE_THRESHOLD = 0.5
# Tokenizers saved without a length limit report transformers' VERY_LARGE_INTEGER (1e30) as model_max_length.
NO_TOKENIZER_LIMIT = 10 ** 9
# A hub id is `name` or `org/name` of these characters; anything else can only be meant as a folder.
HUB_ID = re.compile(r"[\w.-]+(/[\w.-]+)?")


class ExplainInputError(ValueError):
    """Bad input to the API or CLI: the message names the text (or file and line), fold, method or parameter."""


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
                "mostly_unknown": self.mostly_unknown, "variants": self.variants, "scores": self.word_scores,
                "rationale": self.rationale}


def split_words(text: str) -> list[str]:
    """Whitespace segmentation (punctuation stays attached to its word; the tokenizer splits it into subwords)."""
    return text.split()


def whitespace_words(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """`split_words` with each word's character offsets in `text`."""
    spans = [match.span() for match in re.finditer(r"\S+", text)]
    return [text[start:end] for start, end in spans], spans


def tokenizer_words(tokenizer, text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """The words of the tokenizer's pre-tokenizer (BERT: whitespace and punctuation) with their character offsets
    in `text`; whitespace words when the tokenizer has none.

    The words are slices of `text` as typed: the pre-tokenizer runs on the raw text, without the normalizer
    (lowercasing, accent stripping), and its offsets point into the raw text."""
    pre_tokenizer = getattr(getattr(tokenizer, "backend_tokenizer", None), "pre_tokenizer", None)
    if pre_tokenizer is None:
        return whitespace_words(text)
    spans: list[tuple[int, int]] = []
    for _, (start, end) in pre_tokenizer.pre_tokenize_str(text):
        # Byte-level and Metaspace pieces carry the space before them ("Ġworld", "▁world"): trim to the word.
        piece = text[start:end]
        if not piece.strip():
            continue
        start += len(piece) - len(piece.lstrip())
        spans.append((start, start + len(piece.strip())))
    ordered = all(0 <= s < e <= len(text) for s, e in spans) and all(
        previous[1] <= current[0] for previous, current in zip(spans, spans[1:]))
    if not ordered:  # offsets that do not index the text (an unusual pre-tokenizer): never show wrong words
        logger.debug("pre-tokenizer offsets do not index the text; splitting %r at whitespace", text[:40])
        return whitespace_words(text)
    return [text[start:end] for start, end in spans], spans


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


# ----------------------------------------------------------------------------------------------------
# Loading a fold and a classifier
# ----------------------------------------------------------------------------------------------------

def trained_folds(models_dir: str | Path) -> list[str]:
    models_dir = Path(models_dir)
    return sorted(p.name for p in models_dir.glob(f"{FOLD_PREFIX}*") if (p / FOLD_CARD).is_file()) \
        if models_dir.is_dir() else []


def missing_models_dir(models_dir: str | Path) -> str | None:
    """The problem when `models_dir` does not exist (typically: run outside the project root), else None."""
    if Path(models_dir).is_dir():
        return None
    return (f"models folder {models_dir} does not exist (working directory {Path.cwd()}): run from the project root "
            "or give the folder of the trained folds and classifiers with --models-dir (API: models_dir=...)")


def looks_like_path(spec: str) -> bool:
    """Whether a classifier or fold given by name is meant as a folder: it starts with ./ ../ / or ~, holds a
    backslash or more than one /, is not a possible hub id, or is relative under a folder that exists here
    (`models/x`). Only `name` or `org/name` whose first part is no local folder may be a hub id."""
    if spec.startswith(("./", "../", "/", "~")) or spec in (".", "..") or "\\" in spec:  # "\\": a Windows path
        return True
    if spec.count("/") > 1 or not HUB_ID.fullmatch(spec):
        return True
    return "/" in spec and Path(spec.split("/")[0]).is_dir()


def fold_folder(fold: str | Path, models_dir: str | Path = DEFAULT_MODELS_DIR) -> Path:
    """The folder of a trained fold: a fold name under `models_dir`, or a folder path (a served bundle, a student's
    folder)."""
    path = Path(fold).expanduser()
    if path.is_dir():
        folder = path
    elif str(fold) in FOLDS:
        folder = Path(models_dir) / str(fold)
        problem = missing_models_dir(models_dir)
        if problem:  # not "retrain": the folds are most likely elsewhere
            raise ExplainInputError(f"fold {fold}: {problem}")
    elif isinstance(fold, Path) or looks_like_path(str(fold)):
        raise ExplainInputError(f"fold folder {fold} does not exist (working directory {Path.cwd()}); or give a "
                                f"fold name: {list(FOLDS)}")
    else:
        trained = missing_models_dir(models_dir) or f"trained in {models_dir}: {trained_folds(models_dir) or 'none'}"
        raise ExplainInputError(f"unknown fold {str(fold)!r}; the folds are {list(FOLDS)} ({trained})")
    learned = json.loads((folder / FOLD_CARD).read_text()).get("learned", LEARNED) if (folder / FOLD_CARD).is_file() \
        else LEARNED  # a fold's two learned explainers, or a student's folder (issue 14)
    missing = [name for name in (FOLD_CARD, *learned)
               if not (folder / name).exists() or (name != FOLD_CARD and not artifacts.is_complete(folder / name))]
    if missing:
        raise ExplainInputError(
            f"no trained fold at {folder} (missing {', '.join(missing)}): run `kedro run --pipeline crosstask` "
            "in the project (or `kedro run --pipeline folds` once the classifiers are trained)")
    return folder


def load_classifier(spec: str | Path | None, models_dir: str | Path = DEFAULT_MODELS_DIR,
                    default_task: str | None = None) -> TrainedClassifier:
    """A sequence classifier with its tokenizer (eager attention, eval mode): a task name (the project's
    fine-tuned `classifier_<task>`), a folder saved with `save_pretrained`, or a hub name."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    spec = default_task if spec is None else spec
    if spec is None:
        raise ExplainInputError("no classifier given and the fold names no held-out task")
    if str(spec) in TASKS:
        path = Path(models_dir) / f"classifier_{spec}"
        if not (path / "config.json").is_file():
            problem = missing_models_dir(models_dir)
            raise ExplainInputError(f"classifier {spec}: {problem}" if problem else
                                    f"no trained {spec} classifier at {path}: run `kedro run --pipeline classifiers`")
    else:
        path = Path(spec).expanduser()
        if not path.exists() and (isinstance(spec, Path) or looks_like_path(str(spec))):
            # Checked here: transformers would take the path for a hub id and answer with a hub error.
            resolved = f" ({path.resolve()})" if str(path.resolve()) != str(spec) else ""
            raise ExplainInputError(f"classifier folder {spec} does not exist{resolved}; give a task "
                                    f"({', '.join(TASKS)}), a folder saved with save_pretrained, or a hub name")
        if path.exists() and not (path / "config.json").is_file():
            raise ExplainInputError(f"classifier folder {spec} has no config.json: save the model and its tokenizer "
                                    "there with save_pretrained" if path.is_dir() else
                                    f"classifier {spec} is a file, not a folder saved with save_pretrained")
    source = str(path) if path.exists() else str(spec)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForSequenceClassification.from_pretrained(source, attn_implementation="eager")
    except (OSError, ValueError) as error:
        where = "" if path.exists() else f"; it is no folder here (working directory {Path.cwd()})"
        raise ExplainInputError(
            f"classifier {str(spec)!r} could not be loaded ({type(error).__name__}: {str(error).splitlines()[0]})"
            f"{where}. Give a task ({', '.join(TASKS)}), a folder saved with save_pretrained, or a hub name where "
            "the hub is reachable.") from error
    if not getattr(tokenizer, "is_fast", False):
        raise ExplainInputError(f"classifier {str(spec)!r}: its tokenizer has no fast version (word_ids are needed)")
    return TrainedClassifier(model.eval(), tokenizer, path if path.exists() else None)


def max_positions(model, tokenizer) -> int | None:
    """The most subword tokens (special ones included) the classifier reads: its position embeddings, less the
    rows RoBERTa-style models reserve (their position ids start after the padding index:
    `architectures.reserved_positions`), and the tokenizer's `model_max_length` when it sets one. None when neither
    says."""
    limits = []
    positions = getattr(model.config, "max_position_embeddings", None)
    if isinstance(positions, int) and positions > 0:
        limits.append(positions - reserved_positions(model))
    model_max_length = getattr(tokenizer, "model_max_length", None)
    if isinstance(model_max_length, int) and 0 < model_max_length < NO_TOKENIZER_LIMIT:
        limits.append(model_max_length)
    return min(limits) if limits else None


# ----------------------------------------------------------------------------------------------------
# The explainer of one fold
# ----------------------------------------------------------------------------------------------------

class FoldExplainer:
    """A trained fold's learned explainers and every registered baseline, applied to one classifier."""

    def __init__(self, folder: str | Path, classifier: TrainedClassifier, device: str = "auto",
                 max_length: int | None = None):
        folder = Path(folder)
        self.folder = folder
        self.card = json.loads((folder / FOLD_CARD).read_text())
        self.learned = {name: artifacts.load_explainer(folder / name) for name in self.card.get("learned", LEARNED)}
        architecture(classifier.model)  # an unsupported family stops here, naming the supported ones
        # A learned explainer reads a fixed number of layers and heads unless it is shape-free; a classifier of
        # another shape can still be explained by every baseline, so the check applies to the learned methods asked
        # for, not to the fold. `expnet_plus` falls back to the fold's best shape-free variant (issue 12).
        self._incompatible: dict[str, str] = {}
        for name, learned in list(self.learned.items()):
            try:
                artifacts.check_compatible(learned, classifier.model, classifier.tokenizer,
                                           where=f"{folder.name}/{name}")
            except artifacts.IncompatibleClassifierError as error:
                fallback = folder / SHAPE_FREE_FOLDER
                if name == "expnet_plus" and artifacts.is_complete(fallback):
                    self.learned[name] = artifacts.load_explainer(fallback)
                    logger.info("%s: the chosen ExpNet+ variant %r cannot read this classifier (%s); its shape-free "
                                "variant %r explains it", folder.name, learned.variant.name, error,
                                self.learned[name].variant.name)
                else:
                    self._incompatible[name] = str(error)
        self.classifier = classifier
        self.device = resolve_device(device)
        classifier.model.to(self.device).eval()
        context = next(iter(self.learned.values())).context
        self.max_length = self._checked_max_length(max_length, int(context.get("max_length", 128)))
        self.rho = float(self.card["rho"])
        self.layer = int(self.card.get("layer", context.get("layer", -1)))
        self._explainers: dict[str, Explainer] = {}
        self._vocabulary = token_vocabulary(classifier.tokenizer)  # a scan of the vocabulary: once
        # Explaining hooks the one classifier's modules and toggles its weights' requires_grad (models/signals.py,
        # explainers/attention.py): two explanations at once would see each other's hooks and flags. Calls from
        # several threads (a served model answers requests on parallel threads) therefore take turns; torch
        # already spreads one batch over the cores, so little throughput is lost (benchmarks/README.md).
        self._model_lock = threading.Lock()

    def _checked_max_length(self, max_length: int | None, default: int) -> int:
        """`max_length` (or the fold's `default`), refused before any work when the classifier cannot read that
        many tokens: beyond its position embeddings it would fail inside the model."""
        value = default if max_length is None else max_length
        given = "max_length" if max_length is not None else "the fold's max_length"
        if isinstance(value, bool) or not isinstance(value, int) or value < 3:
            raise ExplainInputError(f"{given}={value!r}: must be an integer of at least 3 ([CLS], a token, [SEP])")
        maximum = max_positions(self.classifier.model, self.classifier.tokenizer)
        if maximum is not None and value > maximum:
            raise ExplainInputError(f"{given}={value} is more than the classifier accepts: at most {maximum} subword "
                                    f"tokens, [CLS] and [SEP] included (its position embeddings and tokenizer); "
                                    f"use --max-length {maximum} or less (API: max_length=)")
        return value

    @classmethod
    def from_student(cls, folder: str | Path, classifier: str | Path | TrainedClassifier | None = None,
                     device: str = "auto", max_length: int | None = None) -> "FoldExplainer":
        """Load an amortized student's folder (`learned-attribution fit --output DIR`, or the `amortize` pipeline's
        `data/06_models/student_<task>`) and its classifier (default: the one it was trained for, as recorded in
        its card; a student explains only that classifier)."""
        folder = Path(folder)
        if not (folder / FOLD_CARD).is_file() or not artifacts.is_complete(folder / STUDENT):
            raise ExplainInputError(f"{folder} is not a student folder (needs {FOLD_CARD} and {STUDENT}/): train one "
                                    "with `learned-attribution fit` or `kedro run --pipeline amortize`")
        if not isinstance(classifier, TrainedClassifier):
            card = json.loads((folder / FOLD_CARD).read_text())
            classifier = load_classifier(classifier if classifier is not None else card.get("classifier"))
        return cls(folder, classifier, device=device, max_length=max_length)

    @classmethod
    def from_fold(cls, fold: str | Path, classifier: str | Path | TrainedClassifier | None = None,
                  models_dir: str | Path = DEFAULT_MODELS_DIR, device: str = "auto",
                  max_length: int | None = None) -> "FoldExplainer":
        """Load fold `fold` (`heldout_<task>`, or a fold folder) and a classifier (default: the classifier
        bundled with the folder, else the fold's held-out task's)."""
        folder = fold_folder(fold, models_dir)
        if not isinstance(classifier, TrainedClassifier):
            if classifier is None and (folder / BUNDLED_CLASSIFIER / "config.json").is_file():
                classifier = folder / BUNDLED_CLASSIFIER
            card = json.loads((folder / FOLD_CARD).read_text())
            classifier = load_classifier(classifier, models_dir, default_task=card.get("held_out_task"))
        return cls(folder, classifier, device=device, max_length=max_length)

    @property
    def methods(self) -> list[str]:
        """Every method this folder can apply: its learned explainers (a fold's two, or a student) and every
        registered baseline."""
        trained = {*LEARNED, STUDENT}
        return [*self.learned, *sorted(n for n in EXPLAINERS if n not in trained)]

    @property
    def default_methods(self) -> list[str]:
        """A fold's ExpNet+ (a student folder's student) and the best baseline (by AUROC on the fold's held-out
        task; a student's teacher); the baseline alone for a classifier that the learned one cannot read (a fold
        saved without a shape-free variant: `incompatible`)."""
        first = STUDENT if STUDENT in self.learned else "expnet_plus"
        return [m for m in (first, self.card["best_baseline"]) if m not in self._incompatible]

    @property
    def incompatible(self) -> dict[str, str]:
        """The learned methods this classifier cannot be explained with, each with what differs."""
        return dict(self._incompatible)

    def is_signed(self, method: str) -> bool:
        return EXPLAINERS[method].signed

    def explainer(self, method: str) -> Explainer:
        if method not in self.methods:
            raise ExplainInputError(f"unknown method {method!r}; available: {self.methods}")
        if method in self._incompatible:
            usable = [m for m in self.methods if m not in self._incompatible]
            raise artifacts.IncompatibleClassifierError(
                f"{self._incompatible[method]}. The other methods run on this classifier: {usable}")
        if method not in self._explainers:
            self._explainers[method] = method_explainer(
                method, learned=self.learned, layer=self.layer, vocabulary=self._vocabulary,
                settings=self.card.get("baselines", {}).get(method))
        return self._explainers[method]

    def threshold(self, method: str) -> float | None:
        return self.learned[method].own_threshold if method in self.learned else None

    def explain(self, texts: str | Sequence[str | Sequence[str]], methods: Sequence[str] | None = None,
                batch_size: int = 16, ids: str | Sequence[str] | None = None, progress=None,
                words: str = "tokenizer") -> list[Explanation]:
        """One `Explanation` per text, in input order. A text is a string (split into words by the tokenizer's
        pre-tokenizer, or at whitespace with `words="whitespace"`) or a list of words; a single string is one text.

        `methods` default to `default_methods`; `progress` (e.g. a tqdm bar) is updated per explained text."""
        if isinstance(texts, str):  # one text, not a sequence of one-character texts
            texts = [texts]
        if isinstance(ids, str):
            ids = [ids]
        if words not in WORD_SPLITS:
            raise ExplainInputError(f"words={words!r}: must be 'tokenizer' or 'whitespace'")
        methods = list(self.default_methods if methods is None else dict.fromkeys(methods))
        for method in methods:
            self.explainer(method)  # unknown names fail before any work
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ExplainInputError(f"batch_size={batch_size!r}: must be a positive integer")
        segmented = [self._words(text, index, words) for index, text in enumerate(texts)]
        if ids is not None and len(ids) != len(segmented):
            raise ExplainInputError(f"{len(ids)} ids for {len(segmented)} texts")
        tokenized = self._tokenize([w for w, _ in segmented])
        tokenized["text"] = [text if isinstance(text, str) else " ".join(w) for text, (w, _) in zip(texts, segmented)]
        tokenized["offsets"] = pd.Series([o for _, o in segmented], index=tokenized.index, dtype=object)
        results: list[Explanation | None] = [None] * len(segmented)
        input_ids = list(tokenized["input_ids"])
        for batch in iter_batches(input_ids, batch_size):
            with self._model_lock:
                explained = self._explain_batch(tokenized.iloc[batch], methods)
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
            raise ExplainInputError(f"text {index} is empty or whitespace only")
        return words, offsets

    def _tokenize(self, words: list[list[str]]) -> pd.DataFrame:
        tokenizer = self.classifier.tokenizer
        frame = pd.DataFrame({"words": words, "word_rationale": [None] * len(words)})
        tokenized = project_to_subwords(frame, tokenizer, self.max_length)
        shares = []
        for index, (row_words, word_ids, input_ids, truncated) in enumerate(
                zip(words, tokenized["word_ids"], tokenized["input_ids"], tokenized["truncated"])):
            if len(word_ids) <= 2:
                raise ExplainInputError(f"text {index} gives no subword tokens: {' '.join(row_words)[:80]!r}")
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

    def _explain_batch(self, rows: pd.DataFrame, methods: list[str]) -> list[Explanation]:
        model, tokenizer = self.classifier.model, self.classifier.tokenizer
        token_scores: dict[str, np.ndarray] = {}
        probabilities = None  # class probabilities [B, C] of the explained classifier
        # A method that classifies and explains in one pass (`Explainer.classifies`: the learned explainers and the
        # gradient methods) goes first, so its logits decide the class and no separate classification pass is run.
        ordered = sorted(methods, key=lambda m: not self.explainer(m).classifies)
        batch = make_batch(list(rows["input_ids"]), None, tokenizer).to(self.device)
        for method in ordered:
            if batch.target is None and not self.explainer(method).classifies:
                probabilities = predict_proba(model, list(rows["input_ids"]), len(rows), tokenizer.pad_token_id)
                batch.target = torch.as_tensor(probabilities.argmax(-1)).to(self.device)
            attribution = self.explainer(method).explain(model, batch)  # the model is in eval mode (__init__)
            if batch.target is None:
                probabilities = torch.softmax(attribution.logits.float(), dim=-1).cpu().numpy()
                batch.target = torch.as_tensor(probabilities.argmax(-1)).to(self.device)
            token_scores[method] = attribution.scores.detach().float().cpu().numpy()
        keep = ~batch.special_mask.cpu().numpy()
        id2label = getattr(model.config, "id2label", {}) or {}
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
            for method in methods:
                scores = token_scores[method][row, positions]
                explanation.token_scores[method] = scores.tolist()
                per_word = word_scores(scores, token_words, len(record.words), self.is_signed(method))
                explanation.word_scores[method] = per_word
                explanation.rationale[method] = own_rule(per_word, self.threshold(method), self.rho)
            explanations.append(explanation)
        return explanations
