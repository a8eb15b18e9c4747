"""Which of your texts to annotate for a few-shot refit of a fold's ExpNet+ (`learned-attribution suggest`,
docs/fewshot.md, "Which examples to annotate"), and the rule the few-shot curve's `suggested` rows measure.

    from learned_attribution.core.data.rationales import write_annotation_file
    from learned_attribution.services.fewshot.suggest import suggest
    picked = suggest(explainer.classifier, texts, ids, k=32)          # a frame, in the order picked
    write_annotation_file(picked, "to_annotate.json", "label-studio")  # by the format's writer (core.data.rationales)

The predicted class is what the annotator starts from, not what the file's class is: each format's writer writes it
by name as the default of a class choice the annotator can change (the frame carries the classifier's class names in
`attrs["class_names"]`), and the reader takes the annotator's choice.

The rule (`SUGGESTION_RULE`) is the one `benchmarks/suggestion_rules.py` keeps on the held-out tasks' validation
pools (never a rationale test set): typical per cluster (TypiClust, Hacohen et al., ICML 2022: each text represented
by the classifier's last-layer [CLS] hidden state, L2-normalised; k seeded k-means clusters; from each, largest
first, its most typical text), random per cluster (a seeded random text of each cluster), or, when no rule measures
above a seeded random sample beyond its noise, that random sample (docs/fewshot.md, "Which examples to annotate").
The few-shot curve's `suggested` row (services/fewshot/curve.py) reports the kept rule on every run."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from learned_attribution.core.data.classes import class_names_of
from learned_attribution.core.data.rationales.annotation import CLASS_NAMES
from learned_attribution.core.data.words import tokenizer_words
from learned_attribution.core.errors import InputError
from learned_attribution.core.models.loading import TrainedClassifier
from learned_attribution.core.models.projection import project_batch
from learned_attribution.core.models.runner import predict_and_represent
from learned_attribution.core.picking import cluster_picks

logger = logging.getLogger(__name__)

SUGGESTION_COLUMNS = ["rank", "id", "text", "predicted", "label", "probability", "uncertainty"]
SUGGESTION_RULES = ("typical per cluster", "random per cluster", "random")
# The rule `suggest` keeps: the one chosen on the held-out tasks' validation pools, never on a rationale test set
# (benchmarks/suggestion_rules.py; its evidence, docs/record/suggestion_rules_choice.csv, holds this constant:
# tests/explain/test_suggest_choice.py). "random": no rule measured above a seeded random sample beyond its noise.
SUGGESTION_RULE = "random"


@dataclass(frozen=True)
class Candidates:
    """The examples the rule picks among: their ids, representations [n, d] (L2-normalised) and uncertainty
    (1 - the largest class probability)."""

    ids: list[str]
    features: np.ndarray
    uncertainty: np.ndarray


def uncertainty(probabilities: np.ndarray) -> np.ndarray:
    """1 - the largest class probability, per row of `probabilities` [n, C] (or of the largest probabilities [n])."""
    probabilities = np.asarray(probabilities, dtype=np.float64)
    top = probabilities.max(axis=1) if probabilities.ndim == 2 else probabilities
    return np.clip(1.0 - top, 0.0, 1.0)


def normalised(features: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (a zero row stays zero): the distance then reads the direction of the
    representation, not its norm."""
    features = np.asarray(features, dtype=np.float64)
    norms = np.linalg.norm(features, axis=1, keepdims=True)
    return features / np.where(norms > 0, norms, 1.0)


def picked_rows(features: np.ndarray, k: int, seed: int, rule: str = SUGGESTION_RULE) -> list[int]:
    """The rows of `features` [n, d] that `rule` picks, in the order picked: the most typical row of each of k
    seeded k-means clusters, a seeded random row of each, or a seeded random sample (in row order)."""
    if rule not in SUGGESTION_RULES:
        raise ValueError(f"suggestion rule {rule!r}: one of {list(SUGGESTION_RULES)}")
    if rule == "random":
        return sorted(np.random.default_rng(seed).choice(len(features), size=k, replace=False).tolist())
    return cluster_picks(features, k, seed, "typical" if rule == "typical per cluster" else "random")


def pick(candidates: Candidates, k: int, seed: int = 0) -> list[str]:
    """The ids of the k candidates the rule picks (`SUGGESTION_RULE`, seeded), in the order picked."""
    return [candidates.ids[i] for i in picked_rows(candidates.features, k, seed)]


def represent(classifier: TrainedClassifier, input_ids: Sequence[Sequence[int]], batch_size: int = 16
              ) -> tuple[np.ndarray, np.ndarray]:
    """Class probabilities [n, C] and L2-normalised [CLS] representations [n, d] of tokenised texts, in one pass of
    the classifier (on its device)."""
    probabilities, states = predict_and_represent(classifier.model, list(input_ids), batch_size,
                                                  classifier.tokenizer.pad_token_id)
    return probabilities, normalised(states)


def pool_candidates(classifier: TrainedClassifier, pool: pd.DataFrame, batch_size: int = 16) -> Candidates:
    """Candidates of a few-shot pool (rows with `example_id`, `input_ids` and the run's predicted-class
    `probability`): the uncertainty from the run's predictions, the representations from one pass."""
    _, features = represent(classifier, list(pool["input_ids"]), batch_size)
    return Candidates([str(i) for i in pool["example_id"]], features, uncertainty(pool["probability"].to_numpy()))


def suggest(classifier: TrainedClassifier, texts: Sequence[str | Sequence[str]], ids: Sequence[str], k: int, *,
            max_length: int = 128, batch_size: int = 16, seed: int = 0, source: str = "the texts") -> pd.DataFrame:
    """The k of `texts` to annotate (`SUGGESTION_COLUMNS`, in the order picked): each text (a string, split into
    the tokenizer's words, or a list of words) tokenised as the explainer reads it (its first `max_length`
    subwords), its predicted class (`predicted`, its name `label`) and probability, and its uncertainty (1 - the
    probability; the rule does not read it); `seed` seeds the rule's k-means. The frame's `attrs["class_names"]`
    are the classifier's classes in index order (`id2label`; LABEL_<n> where it names none), which the annotation
    file's writer offers the annotator. Fewer texts than k is an `InputError` naming `source` and both counts."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InputError(f"k={k!r}: must be a positive integer")
    if len(texts) < k:
        raise InputError(f"{source}: {len(texts)} text{'s' * (len(texts) != 1)}, fewer than k={k} to pick from; "
                         f"ask for at most {len(texts)}")
    if len(ids) != len(texts):
        raise InputError(f"{len(ids)} ids for {len(texts)} texts")
    tokenizer = classifier.tokenizer
    words = [tokenizer_words(tokenizer, text)[0] if isinstance(text, str) else [str(w) for w in text]
             for text in texts]
    input_ids = project_batch(words, [None] * len(words), tokenizer, max_length)["input_ids"]
    probabilities, features = represent(classifier, input_ids, batch_size)
    candidates = Candidates([str(i) for i in ids], features, uncertainty(probabilities))
    order = picked_rows(candidates.features, k, seed)
    n_classes = probabilities.shape[1]
    names = class_names_of(getattr(classifier.model.config, "id2label", None), n_classes) \
        or tuple(f"LABEL_{index}" for index in range(n_classes))
    rows = []
    for rank, index in enumerate(order, start=1):
        predicted = int(probabilities[index].argmax())
        text = texts[index]
        rows.append({"rank": rank, "id": candidates.ids[index],
                     "text": text if isinstance(text, str) else " ".join(str(w) for w in text),
                     "predicted": predicted, "label": names[predicted],
                     "probability": float(probabilities[index, predicted]),
                     "uncertainty": float(candidates.uncertainty[index])})
    how = ("a seeded random sample: no rule measured above one on the validation pools, docs/fewshot.md"
           if SUGGESTION_RULE == "random" else SUGGESTION_RULE)
    logger.info("%s: picked %d of %d texts (%s); mean uncertainty %.3f against %.3f over all", source, k, len(texts),
                how, np.mean([r["uncertainty"] for r in rows]), candidates.uncertainty.mean())
    picked = pd.DataFrame(rows, columns=SUGGESTION_COLUMNS)
    picked.attrs[CLASS_NAMES] = list(names)
    return picked

