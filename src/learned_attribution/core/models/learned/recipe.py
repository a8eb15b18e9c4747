"""What a learned explainer is: its `Variant` (inputs, objective, stopping rule, the transfer ideas) and the
`TrainingSettings` of the one training loop. The paper's ExpNet is a variant like any other (SPEC §6: the
`attention` feature set, global standardisation, focal loss, early stopping on the pooled validation token
AUROC, one seed, hidden 16, batches of tokens), declared in `crosstask.expnet`."""
from __future__ import annotations

from dataclasses import dataclass

from ..signals import KNOWN_SETS, SHAPE_FREE_SETS

STANDARDISE = ("global", "per_task")
OBJECTIVES = ("focal", "pairwise", "focal+pairwise", "listwise", "distill")
NETWORKS = ("mlp", "simplex", "encoder", "attention")
# The students that read the text itself (its token ids, or the classifier's hidden states), not signal columns.
TEXT_NETWORKS = ("encoder", "attention")
PSEUDO_RULES = ("cheap", "agreement")
SIGNS = ("signed", "magnitude")
# example_auroc: the mean per-example validation AUROC (how the explainers are judged); token_auroc: the AUROC
# over every validation token pooled, the paper's ExpNet's rule; example_spearman: the mean per-example Spearman
# correlation with real-valued targets (a student of an attribution method).
STOPPING = ("example_auroc", "token_auroc", "example_spearman")
BATCH_UNITS = ("examples", "tokens")


@dataclass(frozen=True)
class Variant:
    """One recipe (see the package docstring for what each idea does)."""

    name: str
    feature_sets: tuple[str, ...] = ("attention",)
    standardise: str = "global"
    objective: str = "focal"
    balance: bool = False
    gating: bool = False
    self_training: bool = False
    example_z: bool = False
    anchor: str | None = None  # a signal column the learned residual is added to (rank-normalised per example)
    anchor_weight: float = 1.0  # weight of the residual at prediction (0: the anchor alone)
    # mlp: ExpNet's 2-layer network; simplex: a convex stack of rank-normalised inputs; encoder: a copy of the
    # classifier's encoder with a token head, reading the text itself (a student: `encoder.py`); attention: new
    # self-attention layers and a token head over the classifier's frozen hidden states (`attention_student.py`)
    network: str = "mlp"
    encoder_blocks: int = 4  # network encoder: its top blocks that train (the rest stay the classifier's)
    attention_layers: int = 2  # network attention: the new self-attention layers over the hidden states
    pseudo: str = "cheap"  # self-training's pseudo-rationale rule (see pseudo.pseudo_labels)
    signs: str = "signed"  # magnitude: signed columns enter as absolute values
    learning_rate: float | None = None  # Adam's step for this variant (None: TrainingSettings.learning_rate)
    stopping: str = "example_auroc"

    def __post_init__(self) -> None:
        where = f"learned-explainer variant {self.name!r}"
        for field_name, allowed in (("network", NETWORKS), ("pseudo", PSEUDO_RULES), ("signs", SIGNS),
                                    ("standardise", STANDARDISE), ("objective", OBJECTIVES), ("stopping", STOPPING)):
            if getattr(self, field_name) not in allowed:
                raise ValueError(f"{where}: {field_name}={getattr(self, field_name)!r}, expected one of {allowed}")
        if self.network == "simplex":
            conflicting = [flag for flag in ("example_z", "gating", "anchor") if getattr(self, flag)]
            if conflicting or self.standardise != "global":
                raise ValueError(f"{where}: a simplex stack rank-normalises its inputs within the example, so it "
                                 f"takes no {conflicting or ['standardise: ' + self.standardise]}")
        if self.network in TEXT_NETWORKS:
            conflicting = [flag for flag in ("example_z", "gating", "anchor", "balance", "self_training")
                           if getattr(self, flag)]
            if self.feature_sets or conflicting or self.objective != "distill" or self.standardise != "global":
                raise ValueError(f"{where}: an {self.network} student reads the text itself (feature_sets: []) and "
                                 f"is trained on a teacher's scores (objective: distill), with no "
                                 f"{conflicting or 'input transforms'}")
            depth = "encoder_blocks" if self.network == "encoder" else "attention_layers"
            value = getattr(self, depth)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{where}: {depth}={value!r} must be a positive integer")
        if self.anchor is None and self.anchor_weight != 1.0:
            raise ValueError(f"{where}: anchor_weight needs an anchor column")
        if self.learning_rate is not None and not float(self.learning_rate) > 0:
            raise ValueError(f"{where}: learning_rate={self.learning_rate!r} must be positive")
        if not 0.0 <= float(self.anchor_weight) <= 1.0:
            raise ValueError(f"{where}: anchor_weight={self.anchor_weight!r} must be in [0, 1]")
        unknown = set(self.feature_sets) - set(KNOWN_SETS)
        if (not self.feature_sets and self.network not in TEXT_NETWORKS) or unknown:
            raise ValueError(f"{where}: feature_sets {list(self.feature_sets)} must be a non-empty subset of "
                             f"{list(KNOWN_SETS)}")
        if (self.objective == "distill") != (self.stopping == "example_spearman"):
            raise ValueError(f"{where}: objective distill (real-valued targets) goes with stopping example_spearman, "
                             "and only with it")
        if self.gating and self.shape_free:
            raise ValueError(f"{where}: gating weighs attention heads, and a shape-free input set has no per-head "
                             "columns")

    @property
    def shape_free(self) -> bool:
        """Its input columns do not depend on the classifier's number of layers or heads: it reads
        any supported classifier."""
        return self.network not in TEXT_NETWORKS and set(self.feature_sets) <= set(SHAPE_FREE_SETS)

    @property
    def reads_whole_examples(self) -> bool:
        """Its inputs are transformed within each example (so prediction needs the example of every row)."""
        return bool(self.example_z or self.anchor or self.network == "simplex")

    def describe(self) -> str:
        rate = f", learning rate {self.learning_rate:g}" if self.learning_rate else ""
        if self.network == "encoder":
            return (f"a copy of the classifier's encoder, its top {self.encoder_blocks} blocks and a token head "
                    f"trained, distill{rate}, stops on the example spearman")
        if self.network == "attention":
            return (f"the classifier's frozen hidden states, {self.attention_layers} new attention layers and a token "
                    f"head trained, distill{rate}, stops on the example spearman")
        inputs = "within-example ranks" if self.network == "simplex" else f"{self.standardise} z"
        parts = ["+".join(self.feature_sets), inputs, self.objective]
        if self.network == "simplex":
            parts.append("convex stack")
        parts += [flag for flag in ("example_z", "balance", "gating", "self_training") if getattr(self, flag)]
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
