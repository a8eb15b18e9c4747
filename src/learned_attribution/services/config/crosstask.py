"""`crosstask` (the scoring protocol, the paper's ExpNet, ExpNet+), the variant catalogue `expnet_plus_variants`
and `ablation` (the ExpNet+ candidates)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from learned_attribution.core.data.modes import TrainingExamples
from learned_attribution.core.models.learned import TrainingSettings, Variant
from learned_attribution.core.models.learned.recipe import DEFAULT_NETWORK, recipe_keys

from .blocks import block, dataclass_from, positive_int
from .compute import ComputeSettings


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
    """A learned-explainer variant from its recipe (`feature_sets`, `objective`, ...: core/models/learned/recipe.py),
    its network's own settings beside them (`gating`, `encoder_blocks`, ...: that network's `Settings`)."""
    recipe = dict(recipe or {})
    block(recipe, where, (), recipe_keys(recipe.get("network", DEFAULT_NETWORK)))
    try:
        return Variant.from_record({"name": name, **recipe})
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
    for classifiers of another family or shape (recipes from the variant catalogue `expnet_plus_variants`), their
    training loop, and what they train on (`train_on`: the correct predictions or all examples, signals of the
    predicted or the gold class)."""

    variant: Variant
    shape_free: Variant
    training: TrainingSettings
    train_on: TrainingExamples = TrainingExamples()

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


@dataclass(frozen=True)
class TrainingGridSettings:
    """`ablation.training_grid`: the signed recipe and its magnitude twin the ablation's training grid trains on every
    kind of training data (`services/evaluation/training_grid.py`), with the main job's training loop."""

    recipes: tuple[Variant, ...]
    training: TrainingSettings


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
    values = block(expnet_plus, "crosstask.expnet_plus", ("recipe", "shape_free", "training", "train_on"))
    recipe = catalogue_variant(values["recipe"], catalogue, "crosstask.expnet_plus.recipe")
    shape_free = catalogue_variant(values["shape_free"], catalogue, "crosstask.expnet_plus.shape_free")
    if not shape_free.shape_free:
        raise ValueError(f"parameter crosstask.expnet_plus.shape_free: {shape_free.name!r} reads per-layer or per-head "
                         "columns; a fold keeps a shape-free variant (feature sets among core/models/signals.py "
                         "SHAPE_FREE_SETS) to explain classifiers of other shapes")
    return ExpnetPlusRecipe(recipe, shape_free,
                            training_settings(values["training"], seed, "crosstask.expnet_plus.training"),
                            training_examples(values["train_on"], "crosstask.expnet_plus.train_on"))


def training_examples(train_on: Mapping[str, Any], where: str) -> TrainingExamples:
    """`train_on: {examples: correct | all, signals: predicted | gold}` (a wrong value is named with `where`)."""
    values = block(train_on, where, ("examples", "signals"))
    try:
        return TrainingExamples(str(values["examples"]), str(values["signals"]))
    except ValueError as error:
        raise ValueError(f"parameter {where}: {error}") from None


def ablation_block(ablation: Mapping[str, Any]) -> dict[str, Any]:
    """`params:ablation` with its keys checked (the candidates' and the training grid's)."""
    return block(ablation, "ablation", ("candidates", "training", "cost_examples"), ("training_grid",))


def expnet_plus_candidates(ablation: Mapping[str, Any], catalogue: Mapping[str, Any], seed: int
                           ) -> ExpnetPlusCandidates:
    """`params:ablation`: the candidates of `candidates` (`all`: the whole catalogue), their training and
    `cost_examples`."""
    values = ablation_block(ablation)
    candidates = values["candidates"] or "all"
    names = list(catalogue) if candidates == "all" else list(candidates)
    if len(set(names)) != len(names) or len(names) < 2:
        raise ValueError(f"parameter ablation.candidates must name two or more distinct variants, got {names}")
    return ExpnetPlusCandidates(
        tuple(catalogue_variant(name, catalogue, "ablation.candidates") for name in names),
        training_settings(values["training"], seed, "ablation.training"),
        positive_int(values["cost_examples"], "ablation.cost_examples"))


def training_grid_settings(ablation: Mapping[str, Any], crosstask: Mapping[str, Any], catalogue: Mapping[str, Any],
                           seed: int) -> TrainingGridSettings:
    """`ablation.training_grid` (two recipes of the catalogue that differ only in `signs`), trained with the main
    job's loop (`crosstask.expnet_plus.training`)."""
    names = ablation_block(ablation).get("training_grid")
    where = "ablation.training_grid"
    if not isinstance(names, (list, tuple)) or len(names) != 2:
        raise ValueError(f"parameter {where} must name two recipes (signed, magnitude), got {names!r}")
    recipes = tuple(catalogue_variant(name, catalogue, where) for name in names)
    if sorted(r.signs for r in recipes) != ["magnitude", "signed"]:
        raise ValueError(f"parameter {where}: {list(names)} must be one recipe with signed inputs and one with "
                         f"magnitudes (`signs: magnitude`), got {[r.signs for r in recipes]}")
    return TrainingGridSettings(recipes, folds_expnet_plus(crosstask, catalogue, seed).training)


def folds_expnet_plus(crosstask: Mapping[str, Any], catalogue: Mapping[str, Any], seed: int) -> ExpnetPlusRecipe:
    """The folds' ExpNet+ recipe (`crosstask.expnet_plus`) read off the whole `params:crosstask` block: what the
    pipelines that reuse the main job's folds (ablation, fewshot) read of it."""
    return expnet_plus_recipe(block(crosstask, "crosstask", [*SCORING_KEYS, *FOLD_KEYS])["expnet_plus"], catalogue,
                              seed)
