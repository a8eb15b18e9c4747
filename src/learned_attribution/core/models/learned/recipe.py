"""What a learned explainer is: its `Variant` (inputs, objective, stopping rule, the transfer ideas, and which
registered network with that network's own settings) and the `TrainingSettings` of the one training loop. The paper's
ExpNet is a variant like any other (SPEC §6: the `attention` feature set, global standardisation, focal loss, early
stopping on the pooled validation token AUROC, one seed, hidden 16, batches of tokens), declared in
`crosstask.expnet`."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping

from ..signals import KNOWN_SETS, SHAPE_FREE_SETS
from .registry import NETWORKS, SIGNALS, LearnedNetwork

STANDARDISE = ("global", "per_task")
OBJECTIVES = ("focal", "pairwise", "focal+pairwise", "listwise", "distill")
PSEUDO_RULES = ("cheap", "agreement")
SIGNS = ("signed", "magnitude")
# example_auroc: the mean per-example validation AUROC (how the explainers are judged); token_auroc: the AUROC
# over every validation token pooled, the paper's ExpNet's rule; example_spearman: the mean per-example Spearman
# correlation with real-valued targets (a student of an attribution method).
STOPPING = ("example_auroc", "token_auroc", "example_spearman")
BATCH_UNITS = ("examples", "tokens")
DEFAULT_NETWORK = "mlp"


def setting_keys(network: str) -> tuple[str, ...]:
    """The keys of registered network `network`'s own settings (none for an unknown network)."""
    kind = NETWORKS.get(network)
    return () if kind is None else tuple(f.name for f in fields(kind.Settings))


def recipe_keys(network: str) -> tuple[str, ...]:
    """The keys a recipe of a variant of network `network` may give (its name aside): the recipe's own and that
    network's settings'."""
    return (*(f.name for f in fields(Variant) if f.name not in ("name", "network_settings")), *setting_keys(network))


@dataclass(frozen=True)
class Variant:
    """One recipe (see the package docstring for what each idea does)."""

    name: str
    feature_sets: tuple[str, ...] = ("attention",)
    standardise: str = "global"
    objective: str = "focal"
    balance: bool = False
    self_training: bool = False
    example_z: bool = False
    anchor: str | None = None  # a signal column the learned residual is added to (rank-normalised per example)
    anchor_weight: float = 1.0  # weight of the residual at prediction (0: the anchor alone)
    # A registered network (`registry.NETWORKS`): mlp, ExpNet's 2-layer network; simplex, a convex stack of
    # rank-normalised inputs; encoder and attention, the text students (`encoder.py`, `attention_student.py`).
    network: str = DEFAULT_NETWORK
    network_settings: Any = None  # that network's own `Settings` (None: its defaults)
    pseudo: str = "cheap"  # self-training's pseudo-rationale rule (see pseudo.pseudo_labels)
    signs: str = "signed"  # magnitude: signed columns enter as absolute values
    learning_rate: float | None = None  # Adam's step for this variant (None: TrainingSettings.learning_rate)
    stopping: str = "example_auroc"

    def __post_init__(self) -> None:
        where = f"learned-explainer variant {self.name!r}"
        for field_name, allowed in (("network", tuple(NETWORKS)), ("pseudo", PSEUDO_RULES), ("signs", SIGNS),
                                    ("standardise", STANDARDISE), ("objective", OBJECTIVES), ("stopping", STOPPING)):
            if getattr(self, field_name) not in allowed:
                raise ValueError(f"{where}: {field_name}={getattr(self, field_name)!r}, expected one of {allowed}")
        kind = self.network_class
        if self.network_settings is None:
            object.__setattr__(self, "network_settings", kind.Settings())
        elif not isinstance(self.network_settings, kind.Settings):
            raise ValueError(f"{where}: network_settings {self.network_settings!r} are not a {self.network} "
                             f"network's ({kind.Settings.__name__})")
        kind.check(self, where)
        if self.anchor is None and self.anchor_weight != 1.0:
            raise ValueError(f"{where}: anchor_weight needs an anchor column")
        if self.learning_rate is not None and not float(self.learning_rate) > 0:
            raise ValueError(f"{where}: learning_rate={self.learning_rate!r} must be positive")
        if not 0.0 <= float(self.anchor_weight) <= 1.0:
            raise ValueError(f"{where}: anchor_weight={self.anchor_weight!r} must be in [0, 1]")
        unknown = set(self.feature_sets) - set(KNOWN_SETS)
        if (not self.feature_sets and not self.reads_text) or unknown:
            raise ValueError(f"{where}: feature_sets {list(self.feature_sets)} must be a non-empty subset of "
                             f"{list(KNOWN_SETS)}")
        if (self.objective == "distill") != (self.stopping == "example_spearman"):
            raise ValueError(f"{where}: objective distill (real-valued targets) goes with stopping example_spearman, "
                             "and only with it")

    @property
    def network_class(self) -> type[LearnedNetwork]:
        """Its registered network."""
        return NETWORKS[self.network]

    @property
    def reads_text(self) -> bool:
        """A text student: it reads the text itself (token ids, or the classifier's hidden states), not signal
        columns, and is trained by the text students' loop."""
        return self.network_class.reads != SIGNALS

    @property
    def shape_free(self) -> bool:
        """Its input columns do not depend on the classifier's number of layers or heads: it reads
        any supported classifier."""
        return not self.reads_text and set(self.feature_sets) <= set(SHAPE_FREE_SETS)

    @property
    def reads_whole_examples(self) -> bool:
        """Its inputs are transformed within each example (so prediction needs the example of every row)."""
        return bool(self.example_z or self.anchor or self.network_class.ranks_inputs)

    def record(self) -> dict[str, Any]:
        """JSON-ready and flat, as a recipe gives it: the recipe's keys and its network's settings side by side."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "network_settings"}
        own = {f.name: getattr(self.network_settings, f.name) for f in fields(self.network_settings)}
        return {**values, "feature_sets": list(self.feature_sets), **own}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> "Variant":
        """A variant from its flat `record()` (name included): the keys of its network's settings go to them."""
        values = dict(record)
        network = values.get("network", DEFAULT_NETWORK)
        own = {key: values.pop(key) for key in setting_keys(network) if key in values}
        if "feature_sets" in values:
            values["feature_sets"] = tuple(values["feature_sets"])
        kind = NETWORKS.get(network)  # an unknown one is refused by name in __post_init__
        return cls(**values, network_settings=None if kind is None else kind.Settings(**own))

    def describe(self) -> str:
        kind, settings = self.network_class, self.network_settings
        rate = f", learning rate {self.learning_rate:g}" if self.learning_rate else ""
        own = kind.describe(settings)
        if self.reads_text:
            return f"{own}, {self.objective}{rate}, stops on the {self.stopping.replace('_', ' ')}"
        inputs = "within-example ranks" if kind.ranks_inputs else f"{self.standardise} z"
        parts = ["+".join(self.feature_sets), inputs, self.objective, *([own] if own else [])]
        parts += [flag for flag in ("example_z", "balance") if getattr(self, flag)]
        parts += [*kind.switches(settings), *(["self_training"] if self.self_training else [])]
        if self.self_training and self.pseudo != "cheap":
            parts.append(f"{self.pseudo} pseudo-rationales")
        if self.signs == "magnitude":
            parts.append("signed inputs as magnitudes")
        if self.anchor:
            parts.append(f"anchored on {self.anchor} + {self.anchor_weight:g} x residual")
        if self.learning_rate:
            parts.append(f"learning rate {self.learning_rate:g}")
        if self.stopping != "example_auroc":
            parts.append(f"stops on the {self.stopping.replace('_', ' ')}")
        if self.shape_free:
            parts.append("shape-free")
        return ", ".join(parts)


@dataclass(frozen=True)
class TrainingSettings:
    """The one training loop's settings (`crosstask.expnet.training`, `crosstask.expnet_plus.training`, a student's
    `training`): every field is given, by the YAML or by the student's code defaults."""

    hidden: int  # hidden units of each seed's network
    alpha: float  # focal loss: weight of the positive class
    gamma: float  # focal loss: focusing exponent
    learning_rate: float
    batch_size: int
    batch_unit: str  # a batch of whole examples (ranking losses need them) or of single tokens
    max_epochs: int
    patience: int
    gate_l1: float  # the L1 pull of the per-head gates towards 0
    pseudo_weight: float  # weight of the pseudo-labelled task relative to a real training task
    seeds: int  # networks trained side by side from different initialisations (the explainer is their ensemble)
    seed: int

    def __post_init__(self) -> None:
        if int(self.seeds) < 1:
            raise ValueError(f"training setting seeds={self.seeds!r} must be at least 1")
        if self.batch_unit not in BATCH_UNITS:
            raise ValueError(f"training setting batch_unit={self.batch_unit!r}, expected one of {BATCH_UNITS}")
        if int(self.batch_size) < 1:
            raise ValueError(f"training setting batch_size={self.batch_size!r} must be at least 1")
