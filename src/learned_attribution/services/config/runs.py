"""What the MLflow hooks read of a run's parameters (`adapters/hooks/`): each kind of run's experiment, title and
logged parameters, from the same parsed settings its pipeline's first node parses, so a run is named and logged
by the values the run computes with."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from .afn import afn_tracking
from .amortize import AmortizeSettings, amortize_experiment, amortize_settings
from .classifiers import encoder_name
from .compute import TrackingSettings, tracking_settings
from .external import ExternalSettings, external_settings

# What a fold run (and its parent) computes from, logged as its parameters as written.
FOLD_BLOCKS = ("encoder", "features", "crosstask", "expnet_plus_variants", "classifiers", "explained_layer",
               "max_length", "seed")
# The protocol's keys an evaluation of a rationale file is scored with, logged beside the file's settings.
EXTERNAL_SCORING_KEYS = ("baselines", "expensive", "expensive_sample_size", "bootstrap")


@dataclass(frozen=True)
class RunParameters:
    """A `kedro run`'s parameters as the tracking hooks read them: each block parsed where a run needs it (a bad
    value is named as the pipeline's own parse names it), and the blocks a run logs as written."""

    params: Mapping[str, Any]

    def blocks(self, *names: str) -> dict[str, Any]:
        """The blocks `names` as written (None where absent): what a run logs as its parameters."""
        return {name: self.params.get(name) for name in names}

    @property
    def encoder(self) -> str | None:
        """`encoder.name_or_path` (None: no encoder block)."""
        encoder = self.params.get("encoder")
        return None if encoder is None else encoder_name(encoder)

    @property
    def tracking(self) -> TrackingSettings:
        return tracking_settings(self.params.get("mlflow"))

    @property
    def layer(self) -> int:
        """The explained layer (`explained_layer`, -1 = the last)."""
        return int(self.params.get("explained_layer", -1))

    @property
    def amortize(self) -> AmortizeSettings:
        return amortize_settings(self.params.get("amortize"), self.layer)

    @property
    def amortize_experiment(self) -> str:
        """`amortize.mlflow.experiment` (default: amortize): where the students' runs go."""
        return amortize_experiment(self.params.get("amortize"))

    @property
    def external(self) -> ExternalSettings:
        return external_settings(self.params.get("evaluate_external"))

    def external_parameters(self) -> dict[str, Any]:
        """What an evaluation of a rationale file computes from: the file (as given and resolved), the classifier's
        task, the fold (and whether the classifier is the fold's held-out one), the cap, max_length, the protocol's
        baselines, expensive methods, sample size and bootstrap, and the explained layer."""
        settings = self.external
        crosstask = self.params.get("crosstask") or {}
        return {"file": settings.file, "file_resolved": str(Path(settings.file).resolve()),
                "classifier_task": settings.classifier_task, "expnet_fold": settings.expnet_fold,
                "fold_held_out_task": settings.held_out_task,
                "classifier_is_folds_held_out": settings.classifier_task == settings.held_out_task,
                "max_length": self.params.get("max_length"), "max_examples": settings.max_examples,
                "crosstask": {key: crosstask.get(key) for key in EXTERNAL_SCORING_KEYS},
                "explained_layer": self.params.get("explained_layer")}

    @property
    def afn_tracking(self) -> tuple[str, str | None]:
        """The AFN run's experiment and artifact location (`afn.mlflow`)."""
        return afn_tracking(self.params.get("afn"))

    def afn_parameters(self) -> dict[str, Any]:
        """What the AFN analysis computes from: the shared encoder, max_length and seed, and its block without the
        tracking keys."""
        return {**self.blocks("encoder", "max_length", "seed"),
                "afn": {key: value for key, value in (self.params.get("afn") or {}).items() if key != "mlflow"}}

