"""A fold's held-out examples as the explorer shows them: each example's subword tokens, the human rationale, every
method's token scores in both modes (`predicted`, `gold`: core/data/modes.py), and the per-example AUROC of each
method, read from a run's outputs in a data folder; filtered, sorted and paged (`FoldView.query`).

The tokens are the ones the protocol scores (the rationale test examples' non-special subwords), so a row's colours
and its AUROC read the same numbers."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from learned_attribution.core.data.classes import class_names_of
from learned_attribution.core.errors import InputError
from learned_attribution.core.explainers import METHODS
from learned_attribution.core.metrics.fidelity import example_spearmans
from learned_attribution.core.metrics.plausibility import bootstrap_ci, example_aurocs
from learned_attribution.core.tasks import FOLDS, held_out_task

MODES = ("predicted", "gold")
FILTERS = ("all", "mispredicted", "correct")
SORTS = ("id", "auroc", "disagreement")
PAGE_SIZE = 20


class MissingFoldOutputs(InputError):
    """A data folder lacks a fold's outputs; the message names the files and the command that writes them."""


def check_fold(fold: str) -> str:
    """`fold` when it is one of the project's folds (the only names the explorer turns into paths)."""
    if fold not in FOLDS:
        raise InputError(f"unknown fold {fold!r}; the folds are {list(FOLDS)}")
    return fold


def fold_outputs(data_root: Path, fold: str) -> dict[str, Path]:
    """The files a fold's view reads, by role."""
    task = held_out_task(check_fold(fold))
    return {"card": data_root / "06_models" / fold / "fold.json",
            "predicted": data_root / "07_model_output" / f"token_scores_{task}.parquet",
            "gold": data_root / "07_model_output" / f"gold_token_scores_{task}.parquet",
            "examples": data_root / "07_model_output" / f"rationale_predictions_{task}.parquet",
            "classifier": data_root / "06_models" / f"classifier_{task}"}


def missing_outputs(data_root: Path, fold: str) -> str | None:
    """What is missing for `fold` in `data_root` and which command writes it, or None when the view can open."""
    missing = [str(path.relative_to(data_root)) for path in fold_outputs(data_root, fold).values() if not path.exists()]
    if not missing:
        return None
    return (f"{data_root} has no outputs of fold {fold} (missing {', '.join(missing)}): `kedro run --pipeline "
            f"crosstask` writes them (from the project root; the explorer's --data names another data folder)")


@dataclass
class Page:
    """One page of a query: its examples (dicts for the template), the total matching and the page count."""

    examples: list[dict]
    total: int
    page: int
    pages: int


@dataclass
class FoldView:
    """A fold's scored held-out examples with every method's token scores and per-example AUROC, in both modes."""

    fold: str
    task: str
    classes: list[str]
    methods: list[str]
    examples: pd.DataFrame  # one row per example: example_id, text, tokens, gold, label, predicted, correct
    scores: dict[str, dict[str, dict[str, list[float]]]]  # mode -> method -> example_id -> token scores
    aurocs: dict[str, pd.DataFrame]  # mode -> [example_id x method] per-example AUROC
    best_baseline: str | None = None
    _disagreements: dict[tuple[str, str, str], pd.Series] = field(default_factory=dict, repr=False)
    _summaries: dict[tuple, list[dict]] = field(default_factory=dict, repr=False)

    def class_name(self, index: int) -> str:
        return self.classes[index] if 0 <= index < len(self.classes) else str(index)

    def disagreement(self, mode: str, first: str, second: str) -> pd.Series:
        """1 - Spearman correlation of two methods' token scores, per example (NaN where either is constant or
        missing): 0 when they rank the tokens alike, 2 when in reverse."""
        key = (mode, first, second)
        if key not in self._disagreements:
            a, b = self.scores[mode].get(first, {}), self.scores[mode].get(second, {})
            both = [i for i in self.examples["example_id"] if i in a and i in b]
            rho = example_spearmans([(np.asarray(a[i]), np.asarray(b[i])) for i in both]) if both else []
            self._disagreements[key] = pd.Series(1.0 - np.asarray(rho, dtype=float), index=both,
                                                 dtype=float).reindex(self.examples["example_id"])
        return self._disagreements[key]

    def query(self, mode: str = "predicted", subset: str = "all", label: int | None = None, sort: str = "id",
              method: str | None = None, versus: str | None = None, descending: bool = False, page: int = 1,
              page_size: int = PAGE_SIZE) -> Page:
        """The examples of a mode (each with its scores, AUROCs and the disagreement of the sorted pair),
        filtered to the mispredicted or correct ones and/or one gold class, sorted by id, by a method's AUROC or
        by the disagreement of `method` and `versus`, one page of them."""
        _check(mode, MODES, "mode")
        _check(sort, SORTS, "sort")
        rows = self._matching(subset, label)
        key = None
        if sort == "auroc":
            self._check_method(method, "method")
            key = rows["example_id"].map(self.aurocs[mode][method])
        elif sort == "disagreement":
            self._check_method(method, "method")
            self._check_method(versus, "versus")
            key = rows["example_id"].map(self.disagreement(mode, method, versus))
        if key is not None:  # undefined values (NaN) last either way
            order = key.sort_values(ascending=not descending, na_position="last", kind="stable").index
            rows = rows.loc[order]
        total = len(rows)
        pages = max(1, math.ceil(total / page_size))
        page = min(max(1, page), pages)
        chosen = rows.iloc[(page - 1) * page_size: page * page_size]
        return Page([self.example(row.example_id, mode, method, versus) for row in chosen.itertuples()],
                    total, page, pages)

    def summary(self, mode: str = "predicted", subset: str = "all", label: int | None = None,
                n_boot: int = 1000) -> list[dict]:
        """Per method, over the matching examples it scored: their number and the mean per-example AUROC with its
        bootstrap 95% interval (`core.metrics.bootstrap_ci`, seeded); what sets the correct and the mispredicted
        examples apart at a glance. The floor, random scores, is 0.5 in expectation."""
        _check(mode, MODES, "mode")
        key = (mode, subset, label)
        if key not in self._summaries:
            ids = self._matching(subset, label)["example_id"]
            rows = []
            for method in self.methods:
                values = self.aurocs[mode][method].reindex(ids).dropna().to_numpy()
                low, high = bootstrap_ci(values, n_boot=n_boot) if len(values) else (np.nan, np.nan)
                rows.append({"method": method, "n": len(values), "mean": _finite(values.mean()) if len(values)
                             else None, "low": _finite(low), "high": _finite(high)})
            self._summaries[key] = rows
        return self._summaries[key]

    def _matching(self, subset: str, label: int | None) -> pd.DataFrame:
        """The examples of a filter (all, mispredicted, correct) and, with `label`, of one gold class."""
        _check(subset, FILTERS, "filter")
        rows = self.examples
        if subset != "all":
            rows = rows[~rows["correct"]] if subset == "mispredicted" else rows[rows["correct"]]
        if label is not None:
            if not 0 <= label < len(self.classes):
                raise InputError(f"class={label}: the classes are 0..{len(self.classes) - 1} ({self.classes})")
            rows = rows[rows["label"] == label]
        return rows

    def example(self, example_id: str, mode: str = "predicted", method: str | None = None,
                versus: str | None = None) -> dict:
        """One example as the template shows it."""
        _check(mode, MODES, "mode")
        found = self.examples[self.examples["example_id"] == example_id]
        if found.empty:
            raise InputError(f"example {example_id!r} is not a held-out example of {self.fold}")
        row = found.iloc[0]
        methods = [m for m in self.methods if example_id in self.scores[mode].get(m, {})]
        aurocs = self.aurocs[mode].loc[example_id] if example_id in self.aurocs[mode].index else pd.Series(dtype=float)
        return {"example_id": example_id, "text": row["text"], "tokens": row["tokens"], "gold": row["gold"],
                "label": int(row["label"]), "predicted": int(row["predicted"]), "correct": bool(row["correct"]),
                "label_name": self.class_name(int(row["label"])),
                "predicted_name": self.class_name(int(row["predicted"])),
                "explained_name": self.class_name(int(row["label"] if mode == "gold" else row["predicted"])),
                "rows": [{"method": m, "scores": self.scores[mode][m][example_id], "signed": _signed(m),
                          "auroc": _finite(aurocs.get(m))} for m in methods],
                "disagreement": (_finite(self.disagreement(mode, method, versus).get(example_id))
                                 if method and versus else None)}

    def _check_method(self, name: str | None, what: str) -> None:
        if name not in self.methods:
            raise InputError(f"{what}={name!r}: the fold's methods are {self.methods}")


def load_fold_view(data_root: str | Path, fold: str) -> FoldView:
    """The view of `fold` from the outputs of the run in `data_root` (a `MissingFoldOutputs` naming the command
    that writes them where they are absent)."""
    from transformers import AutoTokenizer  # the fold's own tokenizer: display tokens of the scored input ids

    data_root = Path(data_root)
    problem = missing_outputs(data_root, fold)
    if problem:
        raise MissingFoldOutputs(problem)
    paths = fold_outputs(data_root, fold)
    card = json.loads(paths["card"].read_text())
    tokenizer = AutoTokenizer.from_pretrained(paths["classifier"])
    config = json.loads((paths["classifier"] / "config.json").read_text())
    n_classes = int(config.get("num_labels") or len(config.get("id2label") or {}) or 2)
    classes = list(class_names_of(config.get("id2label"), n_classes) or (f"LABEL_{i}" for i in range(n_classes)))
    frames = {mode: pd.read_parquet(paths[mode], columns=["example_id", "method", "scores", "gold"])
              for mode in MODES}
    scored = set(frames["predicted"]["example_id"])
    predictions = pd.read_parquet(paths["examples"], columns=["example_id", "text", "input_ids", "token_labels",
                                                               "label", "predicted", "correct"])
    predictions = predictions[predictions["example_id"].isin(scored)].drop_duplicates("example_id")
    rows = []
    for record in predictions.itertuples():
        labels = np.asarray(record.token_labels)
        keep = labels != -100
        tokens = tokenizer.convert_ids_to_tokens(np.asarray(record.input_ids)[keep].tolist())
        rows.append({"example_id": str(record.example_id), "text": record.text, "tokens": list(tokens),
                     "gold": [int(v > 0.5) for v in labels[keep]], "label": int(record.label),
                     "predicted": int(record.predicted), "correct": bool(record.correct)})
    examples = pd.DataFrame(rows).sort_values("example_id", kind="stable").reset_index(drop=True)
    methods = list(dict.fromkeys(frames["predicted"]["method"]))
    scores, aurocs = {}, {}
    for mode, frame in frames.items():
        scores[mode] = {m: dict(zip(part["example_id"].astype(str), (list(map(float, s)) for s in part["scores"])))
                        for m, part in frame.groupby("method", sort=False)}
        aurocs[mode] = _aurocs(frame)
    return FoldView(fold, held_out_task(fold), classes, methods, examples, scores, aurocs, card.get("best_baseline"))


def _aurocs(frame: pd.DataFrame) -> pd.DataFrame:
    """Per example and method, the AUROC of its token scores against the human rationale (the protocol's one
    AUROC, `example_aurocs`)."""
    columns = {}
    for method, part in frame.groupby("method", sort=False):
        lengths = part["scores"].map(len).to_numpy()
        groups = np.repeat(part["example_id"].astype(str).to_numpy(), lengths)
        values = example_aurocs(np.concatenate(part["scores"].to_numpy()), np.concatenate(part["gold"].to_numpy()),
                                groups)
        columns[method] = pd.Series(values, index=np.unique(groups))
    return pd.DataFrame(columns)


def _signed(method: str) -> bool:
    return method in METHODS and METHODS[method].signed


def _finite(value) -> float | None:
    return float(value) if value is not None and np.isfinite(value) else None


def _check(value: str, allowed: tuple[str, ...], name: str) -> None:
    if value not in allowed:
        raise InputError(f"{name}={value!r}: one of {list(allowed)}")
