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


def cap_examples(examples: pd.DataFrame, max_per_role: int | None, seed: int) -> pd.DataFrame:
    """Keep at most `max_per_role` seeded examples per role (the smoke environment's slices)."""
    if not max_per_role:
        return examples
    # Not groupby.apply: pandas 3 drops the grouping column ("role") from apply's result.
    parts = [rows.sample(n=min(len(rows), max_per_role), random_state=seed)
             for _, rows in examples.groupby("role", sort=False)]
    if not parts:
        return examples.iloc[:0]
    return pd.concat(parts).reset_index(drop=True)


REPORT_COLUMNS = ["task", "split", "role", "n_examples", "n_with_rationale", "rationale_density", "n_truncated",
                  "n_skipped"]


def data_report(*tables: pd.DataFrame) -> pd.DataFrame:
    """One row per task, split and role, from every task's tokenized table followed by every task's skipped
    records, in the same task order (`tokenized_<a>, tokenized_<b>, ..., skipped_<a>, skipped_<b>, ...`).
    `n_skipped` counts each skipped input record once, on the row it belongs to: the role the parser says it
    would have fed (e.g. a GLUE line -> classifier, a tree line -> rationale, a toxic post without rationales ->
    rationale); a record skipped before roles exist (a raw CoLA line) counts on its split's classifier row. Skips
    with no such row get a row of their own."""
    if len(tables) % 2:
        raise ValueError(f"the data report takes each task's tokenized table, then each task's skipped records: "
                         f"got {len(tables)} tables, an odd number")
    frames, skipped_tables = tables[:len(tables) // 2], tables[len(tables) // 2:]
    skipped = pd.concat(skipped_tables, ignore_index=True)
    present = {key for frame in frames for key in frame.groupby(["task", "split", "role"]).groups}
    skip_counts: dict[tuple, int] = {}
    for record in skipped.to_dict("records"):
        role = record.get("role")
        if role is None or pd.isna(role):
            classifier_roles = sorted(r for t, sp, r in present
                                      if t == record["task"] and sp == record["split"] and r.startswith("classifier"))
            role = classifier_roles[0] if classifier_roles else None
        key = (record["task"], record["split"], role)
        skip_counts[key] = skip_counts.get(key, 0) + 1
    rows = []
    for frame in frames:
        for (task, split, role), group in frame.groupby(["task", "split", "role"], sort=False):
            with_rationale = group["word_rationale"].dropna()
            marked = sum(int(sum(r)) for r in with_rationale)
            words = sum(len(r) for r in with_rationale)
            rows.append({
                "task": task, "split": split, "role": role, "n_examples": len(group),
                "n_with_rationale": int(sum(sum(r) > 0 for r in with_rationale)),
                "rationale_density": round(marked / words, 4) if words else None,
                "n_truncated": int(group["truncated"].sum()),
                "n_skipped": int(skip_counts.get((task, split, role), 0)),
            })
    # Skips whose role has no example rows (e.g. every record of a split skipped) stay visible.
    for (task, split, role), count in skip_counts.items():
        if (task, split, role) not in present:
            rows.append({"task": task, "split": split, "role": role, "n_examples": 0, "n_with_rationale": 0,
                         "rationale_density": None, "n_truncated": 0, "n_skipped": int(count)})
    return pd.DataFrame(rows, columns=REPORT_COLUMNS)
