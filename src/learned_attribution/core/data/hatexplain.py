"""HateXplain: posts with per-annotator labels and rationales (official `dataset.json` schema)."""
from __future__ import annotations

import json
import logging
from collections import Counter

import pandas as pd

from .schema import BadRecords, DataFormatError, RawText, check_rationale_length, make_examples_frame

logger = logging.getLogger(__name__)

TASK = "hatexplain"
# The official release's classes; "toxic" is what the rebuilt train posts carry (fine class unknown).
CLASS_SETS = {
    "binary": {"normal": 0, "toxic": 1},
    "three_class": {"normal": 0, "offensive": 1, "hatespeech": 2},
}
_TOXIC = {"hatespeech", "offensive", "toxic"}
_SPLIT_ROLES = {
    "train": ("classifier_train", "rationale_train"),
    "val": ("classifier_val", "rationale_val"),
    "test": ("classifier_test", "rationale_test"),
}


def _annotator_class(label: str, classes: str) -> str | None:
    """Map one annotator label onto the requested class set; None if it does not belong."""
    if classes == "binary":
        if label in _TOXIC:
            return "toxic"
        return "normal" if label == "normal" else None
    return label if label in CLASS_SETS["three_class"] else None


def aggregate_rationale(rationales: list[list[int]], how: str) -> list[int] | None:
    """Combine per-annotator 0/1 lists: `union` (any annotator) or `majority` (over half of them)."""
    if not rationales:
        return None
    n = len(rationales)
    if how == "union":
        return [int(any(values)) for values in zip(*rationales)]
    if how == "majority":
        return [int(sum(values) * 2 > n) for values in zip(*rationales)]
    raise ValueError(f"parameter rationale_aggregation must be 'union' or 'majority', got {how!r}")


def _malformed(record) -> str | None:
    """Why a post record does not have the official schema's field types, or None."""
    if not isinstance(record, dict):
        return f"expected a JSON object, got {type(record).__name__}"
    tokens = record.get("post_tokens")
    if tokens is None:
        return "no 'post_tokens' field"
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
        return f"'post_tokens' must be a list of strings, got {type(tokens).__name__}"
    if "annotators" not in record:
        return "no 'annotators' field (each post needs its annotators' labels)"
    annotators = record["annotators"]
    if not isinstance(annotators, list) or not annotators:
        return f"'annotators' must be a non-empty list of objects, got {annotators!r:.80}"
    for index, annotator in enumerate(annotators):
        if not isinstance(annotator, dict) or not isinstance(annotator.get("label"), str):
            return f"annotators[{index}] must be an object with a string 'label', got {annotator!r:.80}"
    rationales = record.get("rationales", [])
    if rationales is not None and (not isinstance(rationales, list)
                                   or not all(isinstance(r, list) for r in rationales)):
        return f"'rationales' must be a list of 0/1 lists, got {rationales!r:.80}"
    return None


def _read_json(raw: RawText, expected: type):
    """Parse a JSON file; a file that does not parse is an error naming the file and line."""
    try:
        value = json.loads(raw.text)
    except json.JSONDecodeError as error:
        raise DataFormatError(f"{raw.path}, line {error.lineno} column {error.colno}: not valid JSON ({error.msg})") from error
    if not isinstance(value, expected):
        raise DataFormatError(f"{raw.path}: expected a JSON {expected.__name__} at the top level, got {type(value).__name__}")
    return value


def load_hatexplain(
    dataset: RawText,
    divisions: RawText,
    classes: str = "binary",
    rationale_aggregation: str = "union",
    strict: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read HateXplain into the shared schema.

    Every post of a split becomes a classifier row; toxic posts with at least one annotator
    rationale also become a rationale row of the same split (normal posts carry no rationale,
    as in HateXplain's own evaluation). Returns the examples and the skipped records.
    """
    if classes not in CLASS_SETS:
        raise ValueError(f"parameter hatexplain.classes must be one of {sorted(CLASS_SETS)}, got {classes!r}")
    if rationale_aggregation not in ("union", "majority"):
        raise ValueError("parameter hatexplain.rationale_aggregation must be 'union' or 'majority', "
                         f"got {rationale_aggregation!r}")
    class_ids = CLASS_SETS[classes]
    records = _read_json(dataset, dict)
    split_ids = _read_json(divisions, dict)
    bad = BadRecords(TASK, strict)
    rows: list[dict] = []
    for split, (classifier_role, rationale_role) in _SPLIT_ROLES.items():
        ids = split_ids.get(split)
        if ids is None:
            raise DataFormatError(f"{divisions.path}: no {split!r} list of post ids")
        missing = 0
        for post_id in ids:
            record = records.get(post_id)
            if record is None:
                missing += 1
                continue
            where = f"post {post_id}"
            problem = _malformed(record)
            if problem:
                bad.report(split, dataset.path, where, problem, role=classifier_role)
                continue
            words = record["post_tokens"]
            if not any(word.strip() for word in words):
                bad.report(split, dataset.path, where, "empty text (no post_tokens)", role=classifier_role)
                continue
            fine = [_annotator_class(a["label"], classes) for a in record["annotators"]]
            if None in fine:
                labels = [a["label"] for a in record["annotators"]]
                hint = (" ('toxic' marks the rebuilt train posts, whose fine class is unknown: use classes: binary)"
                        if "toxic" in labels else "")
                bad.report(split, dataset.path, where,
                           f"annotator labels {labels} are not all in the {classes} classes {sorted(class_ids)}{hint}",
                           role=classifier_role)
                continue
            label_name, votes = Counter(fine).most_common(1)[0]
            if votes * 2 <= len(fine):
                # HateXplain's own "undecided" posts: well-formed, but without a class; left out and counted.
                bad.leave_out(split, dataset.path, where, f"no majority label among annotators {fine} (undecided)",
                              role=classifier_role)
                continue
            rationales = record.get("rationales") or []
            reasons = [check_rationale_length(words, r) for r in rationales]
            reason = next((r for r in reasons if r), None)
            if reason:
                bad.report(split, dataset.path, where, reason, role=classifier_role)
                continue
            label = class_ids[label_name]
            text = " ".join(words)
            base = {"example_id": post_id, "task": TASK, "split": split, "text": text, "words": list(words), "label": label}
            rows.append({**base, "role": classifier_role, "word_rationale": None})
            if label_name == "normal":
                continue
            rationale = aggregate_rationale(rationales, rationale_aggregation)
            if rationale is None:
                # A toxic post is a rationale example; without any annotator rationale it cannot be one.
                bad.leave_out(split, dataset.path, where, "toxic post without rationales: kept as a classifier "
                              "example, left out of the rationale set", role=rationale_role)
                continue
            rows.append({**base, "role": rationale_role, "word_rationale": rationale})
        if missing:
            logger.info("HateXplain %s: %d of %d split ids are not in %s (not recoverable; see data/01_raw/README.md)",
                        split, missing, len(ids), dataset.path)
    return make_examples_frame(rows), bad.frame()
