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
            words = record.get("post_tokens") or []
            if not any(str(word).strip() for word in words):
                bad.report(split, dataset.path, where, "empty text (no post_tokens)")
                continue
            fine = [_annotator_class(a.get("label"), classes) for a in record.get("annotators", [])]
            if not fine or None in fine:
                labels = [a.get("label") for a in record.get("annotators", [])]
                hint = (" ('toxic' marks the rebuilt train posts, whose fine class is unknown: use classes: binary)"
                        if "toxic" in labels else "")
                bad.report(split, dataset.path, where,
                           f"annotator labels {labels} are not all in the {classes} classes {sorted(class_ids)}{hint}")
                continue
            label_name, votes = Counter(fine).most_common(1)[0]
            if votes * 2 <= len(fine):
                # HateXplain's own "undecided" posts: well-formed, but without a class; left out and counted.
                bad.leave_out(split, dataset.path, where, f"no majority label among annotators {fine} (undecided)")
                continue
            reasons = [check_rationale_length(words, r) for r in record.get("rationales", [])]
            reason = next((r for r in reasons if r), None)
            if reason:
                bad.report(split, dataset.path, where, reason)
                continue
            label = class_ids[label_name]
            text = " ".join(words)
            base = {"example_id": post_id, "task": TASK, "split": split, "text": text, "words": list(words), "label": label}
            rows.append({**base, "role": classifier_role, "word_rationale": None})
            rationale = aggregate_rationale(record.get("rationales", []), rationale_aggregation)
            if label_name != "normal" and rationale is not None:
                rows.append({**base, "role": rationale_role, "word_rationale": rationale})
        if missing:
            logger.info("HateXplain %s: %d of %d split ids are not in %s (not recoverable; see data/01_raw/README.md)",
                        split, missing, len(ids), dataset.path)
    return make_examples_frame(rows), bad.frame()
