"""The one token-level rationale schema shared by every task, and bad-record handling."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

import pandas as pd

logger = logging.getLogger(__name__)

EXAMPLE_COLUMNS = ["example_id", "task", "split", "role", "text", "words", "word_rationale", "label"]

# What a row is for. A sentence can hold several roles (e.g. SST test sentences are both
# classifier_test and rationale_test); it then appears once per role.
ROLES = (
    "classifier_train",
    "classifier_val",
    "classifier_test",
    "rationale_train",
    "rationale_val",
    "rationale_test",
)
RATIONALE_ROLES = ("rationale_train", "rationale_val", "rationale_test")
SKIP_COLUMNS = ["task", "split", "role", "file", "location", "reason"]


class DataFormatError(ValueError):
    """A raw record that cannot be read; the message names the file and the line or id."""


@dataclass
class RawText:
    """A raw file's text together with the path it came from (for error messages)."""

    path: str
    text: str

    def lines(self) -> list[str]:
        return self.text.splitlines()


@dataclass
class BadRecords:
    """Raise on a malformed record (strict) or record it as a counted, logged skip."""

    task: str
    strict: bool = True
    rows: list[dict] = field(default_factory=list)

    def report(self, split: str, file: str, location: str, reason: str, role: str | None = None) -> None:
        """A malformed record: an error naming file and location (strict), else a logged, counted skip.
        `role`: the example role the record would have fed (None: decided before roles, e.g. a raw line)."""
        message = f"{file}, {location}: {reason}"
        if self.strict:
            raise DataFormatError(message + " (set strict: false in parameters_data_processing.yml to skip and count)")
        logger.warning("Skipping malformed record: %s", message)
        self.rows.append({"task": self.task, "split": split, "role": role, "file": file, "location": location,
                          "reason": reason})

    def leave_out(self, split: str, file: str, location: str, reason: str, role: str | None = None) -> None:
        """Record a well-formed record that the task's rules exclude (never raises): logged and counted."""
        logger.info("Leaving out record: %s, %s: %s", file, location, reason)
        self.rows.append({"task": self.task, "split": split, "role": role, "file": file, "location": location,
                          "reason": reason})

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=SKIP_COLUMNS)


def make_examples_frame(rows: list[dict]) -> pd.DataFrame:
    """Build the schema frame with stable column order and dtypes."""
    frame = pd.DataFrame(rows, columns=EXAMPLE_COLUMNS)
    frame["label"] = frame["label"].astype("int64")
    unknown = set(frame["role"]) - set(ROLES)
    if unknown:
        raise ValueError(f"Unknown roles {sorted(unknown)}; expected one of {ROLES}")
    return frame.reset_index(drop=True)


def check_rationale_length(words: list[str], rationale: list[int] | None) -> str | None:
    """Return a reason string when a rationale does not fit its words, else None."""
    if rationale is None:
        return None
    if len(rationale) != len(words):
        return f"rationale has {len(rationale)} entries but the text has {len(words)} words"
    if any(value not in (0, 1) for value in rationale):
        return "rationale entries must be 0 or 1"
    return None
