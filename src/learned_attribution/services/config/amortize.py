"""One amortization's settings (`AmortizeSettings`): the `fit` command's and the `amortize` pipeline's. Their defaults
live here only; conf/base/parameters_amortize.yml sets what a pipeline run changes, merged onto them."""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Mapping

from learned_attribution.core.explainers.teacher import Teacher
from learned_attribution.core.models.learned import TrainingSettings, Variant

from .blocks import block, dataclass_from
from .crosstask import variant

# The student variants: one over forward-pass signals only (about a forward pass in cost), one that adds the gradient
# sets (one backward pass), and each of the two with the tokens' last hidden states (`hidden_state`: the token in its
# context; globally standardised, since z-scores within the example would remove the text's shared representation);
# the encoder student, a copy of the classifier's encoder whose top four blocks and token head are trained (a
# second forward pass; it reads how the tokens interact, which a per-token network cannot); and the attention
# student, two new attention layers and a token head over the classifier's frozen hidden states (the classifier's own
# pass, so one pass in all; only the small layers train, on hidden states computed once).
_FORWARD_SETS = ("attention", "raw_attention_layers", "afn_norm", "position", "token_kind")
_GRADIENT_SETS = ("attention", "attention_x_gradient", "layer_gradient", "saliency", "raw_attention_layers",
                  "afn_norm", "position", "token_kind")
DEFAULT_VARIANTS: dict[str, dict[str, Any]] = {
    "student_forward": {"feature_sets": _FORWARD_SETS, "example_z": True},
    "student_gradient": {"feature_sets": _GRADIENT_SETS, "example_z": True},
    "student_forward_hidden": {"feature_sets": (*_FORWARD_SETS, "hidden_state")},
    "student_gradient_hidden": {"feature_sets": (*_GRADIENT_SETS, "hidden_state")},
    "student_encoder": {"feature_sets": (), "network": "encoder", "learning_rate": 1.0e-4},
    # 3e-4, not the encoder's 1e-4: its layers start from random weights, not from the classifier's, so they need the
    # larger step usual for training small pre-norm Transformers from scratch with AdamW.
    "student_attention": {"feature_sets": (), "network": "attention", "attention_layers": 2, "learning_rate": 3.0e-4},
}
# Two named sizes of the texts and the reference (`amortize.sizes`, `fit --sizes`); a run's own max_texts,
# held_out_texts or reference_factor win over its size's. `quick`, the default, is sized so that the three task
# classifiers' students finish within 90 minutes on a 2-core CPU (the teacher is most of the cost; docs/choices.md,
# "Amortized students", says on what it was chosen); `full` is the long configuration, for a GPU, Dask or stages.
SIZES: dict[str, dict[str, int]] = {
    "quick": {"max_texts": 800, "held_out_texts": 100, "reference_factor": 5},
    "full": {"max_texts": 4000, "held_out_texts": 200, "reference_factor": 10},
}
DEFAULT_TRAINING: dict[str, Any] = {"hidden": 32, "alpha": 0.25, "gamma": 2.0, "learning_rate": 2.0e-3,
                                    "batch_size": 32, "batch_unit": "examples", "max_epochs": 60, "patience": 6,
                                    "gate_l1": 0.01, "pseudo_weight": 0.5, "seeds": 3}
# A student learns real-valued attributions: the distillation objective, stopping on the per-example Spearman.
DISTILL = {"objective": "distill", "stopping": "example_spearman"}


def sized(sizes: str, values: Mapping[str, Any], where: str = "amortize.sizes") -> dict[str, Any]:
    """`values` (AmortizeSettings fields) over the named size's max_texts, held_out_texts and reference_factor."""
    if sizes not in SIZES:
        raise ValueError(f"parameter {where}={sizes!r}: must be one of {', '.join(SIZES)}")
    return {**SIZES[sizes], **values}


def student_variants(recipes: Mapping[str, Mapping[str, Any] | None], where: str = "amortize.student.variants"
                     ) -> tuple[Variant, ...]:
    """The student `Variant`s of a recipe block (each with the distillation objective)."""
    built = tuple(variant(name, {**DISTILL, **(recipe or {})}, f"{where}.{name}") for name, recipe in recipes.items())
    if not built:
        raise ValueError(f"parameter {where} is empty: name at least one student variant")
    return built


@dataclass(frozen=True)
class AmortizeSettings:
    """One amortization: the teacher, the student variants and their training, how many texts, the held-out
    evaluation, and the student's rationale share."""

    teacher: Teacher = field(default_factory=Teacher.default)
    variants: tuple[Variant, ...] = field(default_factory=lambda: student_variants(DEFAULT_VARIANTS))
    training: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULT_TRAINING))
    # texts the teacher explains for training (a seeded sample of them when more)
    max_texts: int | None = SIZES["quick"]["max_texts"]
    # further texts, never trained on, on which fidelity, faithfulness and cost are measured
    held_out_texts: int = SIZES["quick"]["held_out_texts"]
    cost_texts: int = 24  # of the held-out texts: those the teacher's own throughput is timed on
    # the reference teacher's budget, as a multiple of the training budget (0: none)
    reference_factor: int = SIZES["quick"]["reference_factor"]
    val_fraction: float = 0.15  # of the training texts: the student's early-stopping slice
    part_size: int = 64  # texts per resumable teacher part
    batch_size: int = 16
    max_length: int = 128
    layer: int = -1
    rho: float = 0.2  # the top-k share of the words a student's (and its teacher's) rationale marks in `explain`
    faithfulness_fractions: tuple[float, ...] = (0.01, 0.05, 0.1, 0.2, 0.5)
    top_k_fractions: tuple[float, ...] = (0.1, 0.2)
    top_k_tokens: tuple[int, ...] = (5,)  # fidelity's top-k agreement at k tokens (`top5_tokens`)
    n_boot: int = 1000
    seed: int = 0
    # The teacher's wall-clock minutes per invocation (null: no limit): once spent, no further part is started, the
    # parts computed are kept and the run stops with `TeacherUnfinished`; the same command run again continues.
    teacher_minutes: float | None = None

    def __post_init__(self) -> None:
        # Training settings merge onto the defaults, so that a caller names only what it changes.
        object.__setattr__(self, "training", {**DEFAULT_TRAINING, **self.training})
        for key in ("held_out_texts", "cost_texts", "reference_factor", "part_size", "batch_size", "max_length"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if key == "reference_factor" else 1):
                raise ValueError(f"parameter amortize.{key}={value!r}: must be a positive integer")
        if self.max_texts is not None and (not isinstance(self.max_texts, int) or self.max_texts < 2):
            raise ValueError(f"parameter amortize.max_texts={self.max_texts!r}: must be null or an integer of 2 or more")
        if not 0 < self.rho <= 1:
            raise ValueError(f"parameter amortize.rho={self.rho!r}: must be in (0, 1]")
        if self.teacher_minutes is not None and (isinstance(self.teacher_minutes, bool) or not isinstance(
                self.teacher_minutes, (int, float)) or not self.teacher_minutes > 0):
            raise ValueError(f"parameter amortize.teacher_minutes={self.teacher_minutes!r}: must be null or a "
                             "positive number of minutes")
        if any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in self.top_k_tokens):
            raise ValueError(f"parameter amortize.top_k_tokens={list(self.top_k_tokens)!r}: must be positive integers")
        self.training_settings()

    def training_settings(self) -> TrainingSettings:
        return dataclass_from(TrainingSettings, self.training, "amortize.student.training", seed=self.seed)

    def as_params(self) -> dict[str, Any]:
        """Every setting, the defaults included, in the shape of `params:amortize`: what a run logs as its
        parameters."""
        def plain(value):
            return list(value) if isinstance(value, tuple) else value

        variants = {v.name: {key: plain(value) for key, value in v.record().items() if key != "name"}
                    for v in self.variants}
        return {**{key: plain(getattr(self, key)) for key in SETTING_KEYS},
                "teacher": {"method": self.teacher.method, "settings": dict(self.teacher.settings)},
                "student": {"training": dict(self.training), "variants": variants}}

    @property
    def feature_sets(self) -> list[str]:
        """Every feature set a student variant reads (one signal pass computes them all)."""
        return list(dict.fromkeys(s for v in self.variants for s in v.feature_sets))


SETTING_KEYS = tuple(f.name for f in fields(AmortizeSettings) if f.name not in ("teacher", "variants", "training"))


def amortize_settings(amortize: Mapping[str, Any] | None, layer: int) -> AmortizeSettings:
    """`params:amortize` merged onto the defaults, reading the explained layer (`params:explained_layer`); its
    `mlflow` block is where a pipeline run logs (the tracking hook), not how a student is made."""
    if "layer" in (amortize or {}):
        raise ValueError("parameter amortize.layer: the layer a student reads is the project's explained_layer "
                         "(conf/base/parameters.yml); remove amortize.layer")
    values = block(amortize or {}, "amortize", (), (*SETTING_KEYS, "sizes", "teacher", "student", "mlflow"))
    values.pop("mlflow", None)
    values = sized(str(values.pop("sizes", None) or "quick"), values)
    teacher = values.pop("teacher", None)
    student = block(values.pop("student", None) or {}, "amortize.student", (), ("variants", "training"))
    settings = AmortizeSettings(**{key: tuple(v) if isinstance(v, list) else v for key, v in values.items()},
                                layer=int(layer))
    if teacher is not None:
        teacher = block(teacher, "amortize.teacher", ("method",), ("settings",))
        settings = replace(settings, teacher=Teacher(teacher["method"], dict(teacher.get("settings") or {})))
    if student.get("variants") is not None:
        settings = replace(settings, variants=student_variants(student["variants"]))
    if student.get("training") is not None:
        settings = replace(settings, training=student["training"])
    return settings


def amortize_experiment(amortize: Mapping[str, Any] | None) -> str:
    """`amortize.mlflow.experiment` (default: amortize): where a pipeline run logs its students."""
    values = block(amortize or {}, "amortize", (), (*SETTING_KEYS, "sizes", "teacher", "student", "mlflow"))
    mlflow = block(values.get("mlflow") or {}, "amortize.mlflow", (), ("experiment",))
    return str(mlflow.get("experiment") or "amortize")
