"""Every parameter block, parsed once into a frozen dataclass: the one place that reads Kedro parameter dicts.

Rule for defaults: a block that only the pipelines read has its values in conf/base only (each parse below requires
every key and refuses unknown ones, naming `parameter <block>.<key>`); the amortize block, which the `fit` command
reads too, has its defaults in code only (`services/amortize/settings.py`; the YAML sets what a pipeline run
changes). Each namespaced pipeline template parses its blocks in its first node, so a bad value stops the run
before any work and every other node takes the parsed block it reads.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, fields
from typing import Any, Mapping, Sequence

import torch

from learned_attribution.core.models.classifier import TrainingConfig
from learned_attribution.core.models.learned import TrainingSettings, Variant
from learned_attribution.core.models.learned.fewshot import FewShotSettings
from learned_attribution.core.models.runner import resolve_bf16, resolve_device

from .distributed import DaskSettings

logger = logging.getLogger(__name__)


def block(values: Mapping[str, Any] | None, where: str, required: Sequence[str],
          optional: Sequence[str] = ()) -> dict[str, Any]:
    """`values` as a dict, once every key of `required` is there and no key outside `required` and `optional` is;
    the error names `parameter <where>.<key>`."""
    if values is None or not isinstance(values, Mapping):
        raise ValueError(f"parameter {where} must be a mapping of {list(required)}, got {values!r}")
    values = dict(values)
    unknown = sorted(set(values) - set(required) - set(optional))
    if unknown:
        raise ValueError(f"unknown parameter(s) {', '.join(f'{where}.{k}' for k in unknown)}; expected "
                         f"{sorted([*required, *optional])}")
    missing = [key for key in required if key not in values]
    if missing:
        raise ValueError(f"parameter(s) {', '.join(f'{where}.{k}' for k in missing)} missing (conf/base)")
    return values


def positive_int(value: Any, where: str, minimum: int = 1, none: bool = False) -> int | None:
    """`value` as an int of at least `minimum` (None allowed with `none`); the error names `parameter <where>`."""
    if value is None and none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        allowed = " or null" if none else ""
        raise ValueError(f"parameter {where}={value!r}: must be an integer of at least {minimum}{allowed}")
    return int(value)


def dataclass_from(cls, values: Mapping[str, Any], where: str, **fixed):
    """`cls(**values, **fixed)` with every field of `cls` but `fixed` required in `values` (errors name the
    parameter); a value the dataclass refuses is reported under `where`."""
    names = [f.name for f in fields(cls) if f.name not in fixed]
    values = block(values, where, names)
    try:
        return cls(**values, **fixed)
    except (TypeError, ValueError) as error:
        raise ValueError(f"parameter {where}: {error}") from error


# ----------------------------------------------------------------------------------------------------
# compute, mlflow
# ----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ComputeSettings:
    """`compute`: where the torch work of a node runs (device, bf16 autocast) and the Dask cluster of the
    per-example work (None: in process)."""

    device: torch.device
    bf16: bool
    dask: DaskSettings | None = None

    def place(self, model: torch.nn.Module) -> torch.nn.Module:
        """`model` moved to the device (in place, as `nn.Module.to`)."""
        return model.to(self.device)


DASK_KEYS = ("address", "n_workers", "threads_per_worker", "methods", "batches_per_task", "retries")


def compute_settings(compute: Mapping[str, Any]) -> ComputeSettings:
    """`params:compute` (conf/base/parameters.yml): device auto | cpu | cuda | cuda:N | mps, bf16 auto | true |
    false, and the `dask` block; logs the choice and why."""
    values = block(compute, "compute", ("device", "bf16", "dask"))
    try:
        device = resolve_device(values["device"])
        bf16 = resolve_bf16(values["bf16"], device)
    except ValueError as error:
        raise ValueError(f"parameter compute: {error}") from error
    reason = "forced" if values["bf16"] != "auto" else ("native on this CPU" if bf16 else
                                                        "fp32: a GPU, or a CPU without native bf16 kernels")
    logger.info("compute: device %s, bf16 autocast %s (%s)", device, "on" if bf16 else "off", reason)
    return ComputeSettings(device, bf16, dask_settings(values["dask"], str(values["device"])))


def dask_settings(dask: Mapping[str, Any], device: str = "auto") -> DaskSettings | None:
    """`params:compute.dask`, or None when `address` is unset (everything in process)."""
    values = block(dask, "compute.dask", DASK_KEYS)
    if not values["address"]:
        return None
    address = str(values["address"])
    if address != "local" and "://" not in address:
        raise ValueError(f"parameter compute.dask.address={address!r}: expected local or a scheduler address such "
                         "as tcp://host:8786")
    counts = {key: positive_int(values[key], f"compute.dask.{key}")
              for key in ("n_workers", "threads_per_worker", "batches_per_task")}
    retries = positive_int(values["retries"], "compute.dask.retries", minimum=0)
    methods = None if values["methods"] is None else tuple(values["methods"])
    return DaskSettings(address, counts["n_workers"], counts["threads_per_worker"], methods,
                        counts["batches_per_task"], retries, device)


@dataclass(frozen=True)
class TrackingSettings:
    """`mlflow`: the one store every pipeline logs to (`MLFLOW_TRACKING_URI` wins), the crosstask experiment, and
    whether a logging failure stops the run."""

    tracking_uri: str
    experiment: str
    strict: bool


def tracking_settings(mlflow: Mapping[str, Any]) -> TrackingSettings:
    return TrackingSettings(**block(mlflow, "mlflow", ("tracking_uri", "experiment", "strict")))


# ----------------------------------------------------------------------------------------------------
# classifiers, features
# ----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ClassifierSettings:
    """`classifiers.<task>`: the fine-tuning recipe and the seeded caps on its slices."""

    training: TrainingConfig
    max_train_examples: int | None
    max_val_examples: int | None
    eval_batch_size: int


CLASSIFIER_CAPS = ("max_train_examples", "max_val_examples", "eval_batch_size")


def classifier_settings(classifier: Mapping[str, Any], seed: int, compute: ComputeSettings,
                        where: str) -> ClassifierSettings:
    values = block(classifier, where, [*CLASSIFIER_CAPS, *(f.name for f in fields(TrainingConfig)
                                                          if f.name not in ("seed", "bf16"))])
    caps = {key: values.pop(key) for key in CLASSIFIER_CAPS}
    training = dataclass_from(TrainingConfig, values, where, seed=seed, bf16=compute.bf16)
    return ClassifierSettings(training, positive_int(caps["max_train_examples"], f"{where}.max_train_examples",
                                                     none=True),
                              positive_int(caps["max_val_examples"], f"{where}.max_val_examples", none=True),
                              positive_int(caps["eval_batch_size"], f"{where}.eval_batch_size"))


@dataclass(frozen=True)
class FeatureSettings:
    """`features`: which model the attention features read (the task classifier or the frozen encoder), their batch
    and Parquet part sizes."""

    source: str
    batch_size: int
    chunk_size: int


def feature_settings(features: Mapping[str, Any]) -> FeatureSettings:
    values = block(features, "features", ("source", "batch_size", "chunk_size"))
    if values["source"] not in ("classifier", "pretrained"):
        raise ValueError(f"parameter features.source must be 'classifier' or 'pretrained', got {values['source']!r}")
    return FeatureSettings(values["source"], positive_int(values["batch_size"], "features.batch_size"),
                           positive_int(values["chunk_size"], "features.chunk_size"))


# ----------------------------------------------------------------------------------------------------
# crosstask: the scoring protocol, the paper's ExpNet, ExpNet+
# ----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ScoringSettings:
    """How a rationale test set is explained and scored (the folds, evaluate_external, transfer and the students'
    plausibility): the baselines with their settings, the expensive ones run on a seeded sample, the test-set cap,
    the bootstrap, faithfulness, the explained layer and the sampling seed."""

    baselines: dict[str, dict[str, Any]]  # name -> settings, in the order they run
    expensive: tuple[str, ...]
    expensive_sample_size: int | None
    max_test_examples: int | None
    batch_size: int
    n_boot: int
    boot_seed: int
    faithfulness_fractions: tuple[float, ...]
    faithfulness_batch_size: int
    layer: int
    seed: int


SCORING_KEYS = ("baselines", "expensive", "expensive_sample_size", "max_test_examples", "batch_size", "bootstrap",
                "faithfulness")
FOLD_KEYS = ("expnet", "expnet_plus", "n_heatmaps")


def scoring_settings(crosstask: Mapping[str, Any], layer: int, seed: int,
                     compute: ComputeSettings | None = None) -> ScoringSettings:
    """The scoring part of `params:crosstask` (every other key of the block is the folds'), the explained layer
    (`params:explained_layer`) and the seed; with `compute`, its Dask methods are checked against the baselines."""
    values = block(crosstask, "crosstask", SCORING_KEYS, FOLD_KEYS)
    baselines = {str(name): dict(settings or {}) for name, settings in values["baselines"].items()}
    expensive = tuple(values["expensive"] or ())
    unknown = set(expensive) - set(baselines)
    if unknown:
        raise ValueError(f"parameter crosstask.expensive names methods that are not in crosstask.baselines: "
                         f"{sorted(unknown)}")
    if compute is not None and compute.dask is not None and compute.dask.methods is not None:
        outside = set(compute.dask.methods) - set(baselines)
        if outside:
            raise ValueError(f"parameter compute.dask.methods names {sorted(outside)}, which are not in "
                             "crosstask.baselines (the learned explainers run in process: they cost about a forward "
                             "pass)")
    bootstrap = block(values["bootstrap"], "crosstask.bootstrap", ("n_boot", "seed"))
    faithful = block(values["faithfulness"], "crosstask.faithfulness", ("fractions", "batch_size"))
    return ScoringSettings(
        baselines=baselines, expensive=expensive,
        expensive_sample_size=positive_int(values["expensive_sample_size"], "crosstask.expensive_sample_size",
                                           none=True),
        max_test_examples=positive_int(values["max_test_examples"], "crosstask.max_test_examples", none=True),
        batch_size=positive_int(values["batch_size"], "crosstask.batch_size"),
        n_boot=positive_int(bootstrap["n_boot"], "crosstask.bootstrap.n_boot"), boot_seed=int(bootstrap["seed"]),
        faithfulness_fractions=tuple(float(f) for f in faithful["fractions"]),
        faithfulness_batch_size=positive_int(faithful["batch_size"], "crosstask.faithfulness.batch_size"),
        layer=int(layer), seed=int(seed))


def variant(name: str, recipe: Mapping[str, Any] | None, where: str) -> Variant:
    """A learned-explainer variant from its recipe (`feature_sets`, `objective`, ...: core/models/learned/recipe.py)."""
    recipe = dict(recipe or {})
    block(recipe, where, (), [f.name for f in fields(Variant) if f.name != "name"])
    if "feature_sets" in recipe:
        recipe["feature_sets"] = tuple(recipe["feature_sets"])
    try:
        return Variant(name=name, **recipe)
    except ValueError as error:
        raise ValueError(f"parameter {where}: {error}") from error


def training_settings(training: Mapping[str, Any], seed: int, where: str) -> TrainingSettings:
    """The one training loop's settings: every field of `TrainingSettings` but the seed."""
    return dataclass_from(TrainingSettings, training, where, seed=seed)


@dataclass(frozen=True)
class ExpnetRecipe:
    """`crosstask.expnet`: the paper's ExpNet as a variant of the one learned-explainer core."""

    variant: Variant
    training: TrainingSettings
    threshold: float


@dataclass(frozen=True)
class ExpnetPlusRecipe:
    """`crosstask.expnet_plus`: the main job's one ExpNet+ recipe and the shape-free variant each fold keeps beside it
    for classifiers of another family or shape (recipes from the variant catalogue `expnet_plus_variants`), and
    their training loop."""

    variant: Variant
    shape_free: Variant
    training: TrainingSettings

    @property
    def variants(self) -> tuple[Variant, ...]:
        return (self.variant,) if self.variant.name == self.shape_free.name else (self.variant, self.shape_free)


@dataclass(frozen=True)
class ExpnetPlusCandidates:
    """`ablation`: the ExpNet+ candidates the ablation validates and scores (named in `candidates`, recipes from the
    variant catalogue), their training loop, and the sample their throughput is timed on."""

    variants: tuple[Variant, ...]
    training: TrainingSettings
    cost_examples: int


def check_crosstask(crosstask: Mapping[str, Any]) -> None:
    """`params:crosstask` holds exactly the scoring keys and the folds' (an unknown or missing key is named)."""
    block(crosstask, "crosstask", [*SCORING_KEYS, *FOLD_KEYS])


def expnet_recipe(expnet: Mapping[str, Any], seed: int) -> ExpnetRecipe:
    """`crosstask.expnet`: the paper's ExpNet's variant, training loop and threshold."""
    values = block(expnet, "crosstask.expnet", ("variant", "training", "threshold"))
    return ExpnetRecipe(variant("expnet_paper", values["variant"], "crosstask.expnet.variant"),
                        training_settings(values["training"], seed, "crosstask.expnet.training"),
                        float(values["threshold"]))


def catalogue_variant(name: Any, catalogue: Mapping[str, Any], where: str) -> Variant:
    """The catalogue's recipe `name` (`params:expnet_plus_variants`), named by the parameter `where` that asks for it."""
    if not isinstance(name, str) or name not in catalogue:
        raise ValueError(f"parameter {where} names {name!r}, which is not in the variant catalogue "
                         f"expnet_plus_variants: {sorted(catalogue)}")
    return variant(name, catalogue[name], f"expnet_plus_variants.{name}")


def expnet_plus_recipe(expnet_plus: Mapping[str, Any], catalogue: Mapping[str, Any], seed: int) -> ExpnetPlusRecipe:
    """`crosstask.expnet_plus`: `recipe` and `shape_free` from the variant catalogue (conf/base/
    parameters_expnet_plus_variants.yml); the shape-free one must read no per-layer or per-head column."""
    values = block(expnet_plus, "crosstask.expnet_plus", ("recipe", "shape_free", "training"))
    recipe = catalogue_variant(values["recipe"], catalogue, "crosstask.expnet_plus.recipe")
    shape_free = catalogue_variant(values["shape_free"], catalogue, "crosstask.expnet_plus.shape_free")
    if not shape_free.shape_free:
        raise ValueError(f"parameter crosstask.expnet_plus.shape_free: {shape_free.name!r} reads per-layer or per-head "
                         "columns; a fold keeps a shape-free variant (feature sets among core/models/signals.py "
                         "SHAPE_FREE_SETS) to explain classifiers of other shapes")
    return ExpnetPlusRecipe(recipe, shape_free,
                            training_settings(values["training"], seed, "crosstask.expnet_plus.training"))


def expnet_plus_candidates(ablation: Mapping[str, Any], catalogue: Mapping[str, Any], seed: int
                           ) -> ExpnetPlusCandidates:
    """`params:ablation`: the candidates of `candidates` (`all`: the whole catalogue), their training and
    `cost_examples`."""
    values = block(ablation, "ablation", ("candidates", "training", "cost_examples"))
    candidates = values["candidates"] or "all"
    names = list(catalogue) if candidates == "all" else list(candidates)
    if len(set(names)) != len(names) or len(names) < 2:
        raise ValueError(f"parameter ablation.candidates must name two or more distinct variants, got {names}")
    return ExpnetPlusCandidates(
        tuple(catalogue_variant(name, catalogue, "ablation.candidates") for name in names),
        training_settings(values["training"], seed, "ablation.training"),
        positive_int(values["cost_examples"], "ablation.cost_examples"))


# ----------------------------------------------------------------------------------------------------
# fewshot
# ----------------------------------------------------------------------------------------------------

FEWSHOT_KEYS = ("ks", "repeats", "pool_roles", "priors", "schedule", "choice_repeats")
FIT_KEYS = ("steps", "batch_size", "step_scale", "prior_weight")


@dataclass(frozen=True)
class FewShotCurveSettings:
    """`fewshot`: the numbers of annotated examples (`ks`, 0 = the cross-task explainer itself), the seeded draws
    per k, the held-out task's roles the examples are drawn from, the catalogue variants that are candidate priors
    beside the fold's own ExpNet+ (each fitted cross-task on the fold's training tasks), the refit's schedule, and the
    draws per training task and k on which a fold compares the priors (`choose_refits`)."""

    ks: tuple[int, ...]
    repeats: int
    pool_roles: tuple[str, ...]
    priors: tuple[Variant, ...]
    schedule: FewShotSettings
    choice_repeats: int


def fewshot_settings(values: Mapping[str, Any] | None, seed: int, catalogue: Mapping[str, Any]
                     ) -> FewShotCurveSettings:
    """`params:fewshot` (conf/base/parameters_fewshot.yml), its priors named from the variant catalogue
    `catalogue` (`params:expnet_plus_variants`), a bad value named by its key."""
    values = block(values, "fewshot", FEWSHOT_KEYS)
    ks = values["ks"]
    if not isinstance(ks, list | tuple) or not ks or any(isinstance(k, bool) or not isinstance(k, int) or k < 0
                                                          for k in ks):
        raise ValueError(f"parameter fewshot.ks={ks!r} must be a list of integers of at least 0")
    names = list(values["priors"] or [])
    unknown = [name for name in names if name not in catalogue]
    if unknown:
        raise ValueError(f"parameter fewshot.priors names unknown variants {unknown}; the catalogue "
                         f"expnet_plus_variants defines {sorted(catalogue)}")
    fit = block(values["schedule"], "fewshot.schedule", FIT_KEYS)
    try:
        schedule = FewShotSettings(steps=positive_int(fit["steps"], "fewshot.schedule.steps"),
                                   batch_size=positive_int(fit["batch_size"], "fewshot.schedule.batch_size"),
                                   step_scale=float(fit["step_scale"]), prior_weight=float(fit["prior_weight"]),
                                   seed=seed)
    except ValueError as error:
        raise ValueError(f"parameter fewshot.schedule: {error}") from None
    return FewShotCurveSettings(ks=tuple(sorted(set(ks))), repeats=positive_int(values["repeats"], "fewshot.repeats"),
                                pool_roles=tuple(values["pool_roles"]),
                                priors=tuple(variant(name, catalogue[name], f"expnet_plus_variants.{name}")
                                             for name in names),
                                schedule=schedule,
                                choice_repeats=positive_int(values["choice_repeats"], "fewshot.choice_repeats"))
