"""The explorer's one service (`learned-attribution explore`): a data folder's folds to browse (`FoldView`), the
folds' explainers (`FoldExplainer`, the code the registered model serves) for typed text, and the annotate ->
refit loop (`Workspace`, `RefitJobs`, `fit_rationales`). The web adapter (adapters/explorer) only translates
requests to these calls."""
from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Sequence

import pandas as pd

from learned_attribution.core.errors import InputError
from learned_attribution.core.explainers.learned import EXPNET_PLUS
from learned_attribution.core.models.learned.fewshot import FOLD_PRIOR, FewShotSettings
from learned_attribution.core.tasks import FOLDS, held_out_task

from .. import bundle as bundles
from ..explain import FoldExplainer
from ..explanation import Explanation
from ..fewshot.choice import describe
from ..fewshot.refit import fit_rationales
from .fold_view import FoldView, MissingFoldOutputs, check_fold, load_fold_view, missing_outputs
from .workspace import ANNOTATIONS, RefitJob, RefitJobs, Workspace

logger = logging.getLogger(__name__)

FEWSHOT_SUMMARY = Path("08_reporting") / "fewshot_summary.csv"


class Explorer:
    """Everything the explorer's pages read and do, for one data folder."""

    def __init__(self, data_root: str | Path, device: str = "auto"):
        self.data_root = Path(data_root).resolve()
        if not self.data_root.is_dir():
            raise InputError(f"data folder {data_root} does not exist (working directory {Path.cwd()}): run from "
                             "the project root or give the folder with --data")
        self.models_dir = self.data_root / "06_models"
        self.device = device
        self.workspace = Workspace(self.data_root)
        self.jobs = RefitJobs()
        self._views: dict[str, FoldView] = {}
        self._explainers: dict[Path, FoldExplainer] = {}
        self._comparisons: dict[Path, list[tuple[Explanation, Explanation]]] = {}  # refit folder -> before/after
        self._loading = threading.Lock()

    # -- browsing ------------------------------------------------------------------------------------------------
    def folds(self) -> list[dict]:
        """Each fold with its held-out task and, where its outputs are missing, what writes them."""
        return [{"fold": fold, "task": held_out_task(fold), "problem": missing_outputs(self.data_root, fold)}
                for fold in FOLDS]

    def view(self, fold: str) -> FoldView:
        check_fold(fold)
        with self._loading:
            if fold not in self._views:
                self._views[fold] = load_fold_view(self.data_root, fold)
            return self._views[fold]

    def preload(self) -> None:
        """Load every fold with outputs (a fold page then opens without reading files)."""
        for fold in FOLDS:
            if missing_outputs(self.data_root, fold) is None:
                self.view(fold)

    # -- explaining ----------------------------------------------------------------------------------------------
    def explainer(self, fold: str, folder: Path | None = None) -> FoldExplainer:
        """A fold's own explainer, or a refit's (`folder`), loaded once."""
        check_fold(fold)
        key = folder or self.models_dir / fold
        with self._loading:
            if key not in self._explainers:
                if folder is None and not (self.models_dir / fold / bundles.CARD).is_file():
                    raise MissingFoldOutputs(f"no trained fold at {self.models_dir / fold}: `kedro run --pipeline "
                                             "crosstask` writes it")
                self._explainers[key] = FoldExplainer.from_fold(key if folder else fold, models_dir=self.models_dir,
                                                                device=self.device)
            return self._explainers[key]

    def explain(self, fold: str, texts: Sequence[str], methods: Sequence[str] | None = None,
                target: str | None = None, contrast: str | None = None) -> list[Explanation]:
        """`FoldExplainer.explain` of the fold's own explainer (the served model's call)."""
        return self.explainer(fold).explain(list(texts), methods=methods or None, target=target or None,
                                            contrast=contrast or None)

    # -- annotating and refitting --------------------------------------------------------------------------------
    def start_session(self, fold: str, filename: str, content: str, k: int) -> str:
        path = self.workspace.save_texts(fold, filename, content)
        return self.workspace.new_session(fold, path, self.explainer(fold), k)

    def fewshot_plan(self, fold: str, n_examples: int) -> dict:
        """What a refit on `n_examples` annotated texts uses (the fold's stored few-shot choice at the nearest k
        below, or the documented default) and what the few-shot curve measured at that k, in words and numbers."""
        choice = bundles.read_fewshot_choice(self.models_dir / check_fold(fold) / bundles.FEWSHOT)
        if choice is None or not choice.refits:
            return {"stored": False, "k": None,
                    "choice": "no few-shot choice stored for this fold (`kedro run --pipeline fewshot` measures "
                              f"one): the refit uses the documented default, the fold's own ExpNet+ with "
                              f"{describe(FewShotSettings())}",
                    "expected": None}
        k, chosen = choice.refit_for(max(n_examples, 1))
        prior = "the fold's own ExpNet+" if chosen.prior == FOLD_PRIOR else f"the catalogue variant {chosen.prior}"
        plan = {"stored": True, "k": k, "expected": None,
                "choice": f"the fold's few-shot choice at k = {k} (of {sorted(choice.refits)}): {prior} refit with "
                          f"{describe(chosen.schedule)}"}
        summary = self.data_root / FEWSHOT_SUMMARY
        if summary.is_file():
            rows = pd.read_csv(summary)
            row = rows[(rows["fold"] == fold) & (rows["k"] == k)]
            if len(row):
                row = row.iloc[0]
                plan["expected"] = {key: float(row[key]) for key in ("auroc", "auroc_low", "auroc_high",
                                                                     "baseline_auroc") if key in row}
                plan["expected"]["k"], plan["expected"]["draws"] = int(row["k"]), int(row.get("draws", 0))
                plan["expected"]["baseline"] = str(row.get("best_baseline", ""))
        return plan

    def refit(self, fold: str, session: str) -> RefitJob:
        """Start the refit of `fold`'s ExpNet+ on the session's saved annotations (one per fold at a time): a
        new fold folder in the session, which becomes its explainer once complete."""
        annotations = self.workspace.session_folder(fold, session) / ANNOTATIONS
        if not annotations.is_file():
            raise InputError(f"session {session}: no annotations saved yet; mark words of the suggested texts and "
                             "save them first")

        def run(job: RefitJob, progress) -> dict:
            output = self.workspace.next_refit_folder(fold, session)
            # Its own copy of the classifier: explaining hooks a model's modules, and pages explain meanwhile.
            refit = fit_rationales(fold, annotations, output, models_dir=self.models_dir, device=self.device,
                                   progress=progress)
            self.workspace.point_to(fold, session, output)
            kept = set(self.workspace.current_refit(fold, session))
            with self._loading:  # the session's older refits leave memory (each holds a classifier)
                self._explainers[output] = refit
                for key in [k for k in self._explainers if k.parent == output.parent and k not in kept]:
                    del self._explainers[key]
            return {"refit": output.name, "fewshot": refit.card.get("fewshot", {}).get("choice")}

        return self.jobs.start(fold, session, run)

    def comparison(self, fold: str, session: str) -> dict | None:
        """The session's suggested texts explained by ExpNet+ before the latest refit and after it (None before
        any refit)."""
        current, previous = self.workspace.current_refit(fold, session)
        if current is None:
            return None
        if current not in self._comparisons:  # a refit's folder never changes: explained once, not per page load
            texts = [item["text"] for item in self.workspace.suggested(fold, session)["items"]]
            before = self.explainer(fold, previous).explain(texts, methods=[EXPNET_PLUS])
            after = self.explainer(fold, current).explain(texts, methods=[EXPNET_PLUS])
            self._comparisons[current] = list(zip(before, after))
        return {"current": current.name, "previous": previous.name if previous else f"{fold} (the fold's own)",
                "pairs": self._comparisons[current]}
