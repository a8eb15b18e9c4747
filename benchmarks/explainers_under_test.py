"""What the cost benchmark (attribution_throughput.py) times, and gpu_check.py compares across devices: every
registered explainer at its settings, the learned ones with their models (the pipeline's trained ones when present,
else networks of the same shape and cost), and the public API's `FoldExplainer` over them.

A learned explainer's cost is its signal pass and its network, not its weights: where the pipeline has not trained
one, an untrained network with identity input statistics (or, for the paper's ExpNet, one trained for two epochs on
random features) costs the same, and the table says which was timed.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, is_dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import torch
import yaml

from learned_attribution.core.models.runner import model_device

from harness import PROJECT_ROOT


def crosstask_params() -> tuple[dict, dict]:
    """The pipeline's `crosstask` block (conf/base/parameters_crosstask.yml) and its ExpNet+ variant catalogue
    (`expnet_plus_variants`, conf/base/parameters_expnet_plus_variants.yml)."""
    crosstask = yaml.safe_load((PROJECT_ROOT / "conf/base/parameters_crosstask.yml").read_text())["crosstask"]
    catalogue = yaml.safe_load((PROJECT_ROOT / "conf/base/parameters_expnet_plus_variants.yml").read_text())
    return crosstask, catalogue["expnet_plus_variants"]


def paper_expnet_spec(seed: int = 13) -> tuple[object, object]:
    """The paper's ExpNet as the pipeline declares it (`crosstask.expnet`, parsed as the pipeline parses it): its
    variant of the one learned-explainer core and its training settings."""
    from learned_attribution.services.config import expnet_recipe

    recipe = expnet_recipe(crosstask_params()[0]["expnet"], seed)
    return recipe.variant, recipe.training


def quick_expnet(n_features: int, seed: int):
    """The paper's ExpNet (its declared variant and settings) trained for two epochs on random attention features
    of the right width: its cost is what matters."""
    from dataclasses import replace

    from learned_attribution.core.models.features import feature_names
    from learned_attribution.core.models.learned import fit_variant

    variant, training = paper_expnet_spec(seed)
    columns = feature_names(n_features // 2)
    rng = np.random.default_rng(seed)
    table = pd.DataFrame(rng.random((2000, len(columns))).astype(np.float32), columns=columns)
    table["token_label"] = (rng.random(2000) < 0.3).astype(np.float32)
    table["example_id"] = np.arange(2000) // 20  # examples of 20 tokens
    table["task"] = "random"
    return fit_variant(variant, table.iloc[:1600], table.iloc[1600:], target=None, stats_tables={}, columns=columns,
                       rho=0.3, settings=replace(training, max_epochs=2, seed=seed))


def load_expnet(path: Path, n_features: int, seed: int) -> tuple[object, str]:
    """The pipeline's trained ExpNet (a `heldout_<task>/expnet_paper` folder) when present, readable (an artifact
    of an older format, from a run before an upgrade, is not) and of the right width, else a quick one (and why)."""
    from learned_attribution.core.models.artifacts import is_complete, load_learned, read_config

    readable, note = is_complete(path), f"{path} not found"
    if readable:
        try:
            read_config(path)
        except ValueError as error:
            readable, note = False, str(error)
    if readable:
        training = load_learned(path)
        if tuple(training.variant.feature_sets) != ("attention",):
            raise TypeError(f"--expnet {path}: expected the paper's ExpNet (a variant over the attention set), found "
                            f"variant {training.variant.name!r} over {list(training.variant.feature_sets)}")
        if len(training.columns) == n_features:
            return training, f"trained ExpNet {path}"
        note = f"{path} reads {len(training.columns)} features, the model gives {n_features}"
    return quick_expnet(n_features, seed), f"ExpNet trained for 2 epochs on random features ({note}); same cost"


def expnet_plus_models(path: Path, config, seed: int) -> tuple[dict, str]:
    """{variant name: ExpNet+}: the ablation's retrained candidates when present (`fold_training/heldout_<task>/
    expnet_plus_variants`, `kedro run --pipeline ablation`) and readable, else the main job's recipe and its
    shape-free variant (`crosstask.expnet_plus`, recipes from the variant catalogue, parsed as the pipeline parses
    them) with an untrained network and identity input statistics (same cost)."""
    from learned_attribution.core.models.artifacts import load_learned_collection
    from learned_attribution.services.config import expnet_plus_recipe

    why = f"{path} not found"
    if path.is_dir():
        try:
            return load_learned_collection(path), f"trained variants {path}"
        except ValueError as error:  # an older artifact format
            why = str(error)
    crosstask, catalogue = crosstask_params()
    recipe = expnet_plus_recipe(crosstask["expnet_plus"], catalogue, seed)
    return untrained_explainers(recipe.variants, recipe.training, config, seed), \
        f"untrained networks ({why}); same cost"


def untrained_explainers(variants, training, config, seed: int) -> dict:
    """{variant name: LearnedModel} with a seeded untrained network and identity input statistics: a learned
    explainer's cost is its signal pass and its network, not its weights (`config`: the classifier's)."""
    from learned_attribution.core.models.learned import InputPipeline, LearnedModel, build_variant_network
    from learned_attribution.core.models.signals import model_columns

    torch.manual_seed(seed)
    models = {}
    for variant in variants:
        columns = model_columns(variant.feature_sets, config)
        inputs = InputPipeline.for_variant(variant, columns)
        inputs.mean, inputs.std = np.zeros(len(columns), np.float32), np.ones(len(columns), np.float32)
        models[variant.name] = LearnedModel(variant, inputs, build_variant_network(variant, columns, training).eval())
    return models


def student_models(path: Path, model, seed: int) -> tuple[dict, str]:
    """{variant name: student}: the amortize pipeline's student when present (`student_<task>/student`),
    else every default student variant (`AmortizeSettings`' variants and training, services/config/amortize.py)
    with an untrained network and identity input statistics, the encoder student an untrained head on a copy of
    `model`'s encoder, the attention student untrained layers over its hidden states (the same cost: a student's
    cost is its passes and its network, not its weights)."""
    from learned_attribution.core.models.artifacts import is_complete, load_learned
    from learned_attribution.core.models.learned import InputPipeline, LearnedModel, build_text_network
    from learned_attribution.services.config import AmortizeSettings

    if is_complete(path):
        student = load_learned(path)
        return {student.variant.name: student}, f"trained student {path}"
    defaults = AmortizeSettings(seed=seed)
    per_token = [v for v in defaults.variants if not v.reads_text]
    students = untrained_explainers(per_token, defaults.training_settings(), model.config, seed)
    for variant in defaults.variants:
        if variant.reads_text:
            students[variant.name] = LearnedModel(variant, InputPipeline([]),
                                                  build_text_network(variant, model, defaults.layer).eval())
    return {v.name: students[v.name] for v in defaults.variants}, f"untrained networks ({path} not found); same cost"


@dataclass
class LearnedModels:
    """The models of the learned explainers and, per explainer, where they came from in words."""

    expnet_paper: object | None = None  # the paper's ExpNet (a LearnedModel)
    expnet_plus: dict = field(default_factory=dict)  # variant name -> ExpNet+
    students: dict = field(default_factory=dict)  # variant name -> student
    notes: dict[str, str] = field(default_factory=dict)  # explainer name -> where its models came from


def learned_models(names: Sequence[str], model: torch.nn.Module, task: str, data_root: Path, seed: int,
                   expnet_path: Path | None = None) -> LearnedModels:
    """The models of the learned explainers among `names` (`expnet_paper`, `expnet_plus`, `student`): the
    pipeline's under `data_root/06_models` where present (`expnet_path`: the paper's ExpNet's folder instead), else
    ones of the same cost for `model`, the task's classifier."""
    models, found = data_root / "06_models", LearnedModels()
    if "expnet_paper" in names:
        found.expnet_paper, found.notes["expnet_paper"] = load_expnet(
            expnet_path or models / f"heldout_{task}" / "expnet_paper", 2 * model.config.num_attention_heads, seed)
    if "expnet_plus" in names:
        found.expnet_plus, found.notes["expnet_plus"] = expnet_plus_models(
            models / "fold_training" / f"heldout_{task}" / "expnet_plus_variants", model.config, seed)
    if "student" in names:
        found.students, found.notes["student"] = student_models(models / f"student_{task}" / "student", model, seed)
    return found


def build_explainers(names: Sequence[str], overrides: dict[str, dict], learned: LearnedModels, layer: int,
                     tokenizer) -> dict:
    """Every requested explainer at its default settings plus `overrides`; `expnet_plus` and `student` become
    one entry per variant (`expnet_plus:<variant>`, `student:<variant>`)."""
    from learned_attribution.core.explainers import build_method
    from learned_attribution.core.models.signals import token_vocabulary

    explainers = {}
    for name in names:
        settings = dict(overrides.get(name, {}))
        if name == "expnet_paper":
            explainers[name] = build_method(name, **{"model": learned.expnet_paper, "layer": layer,
                                                        "vocabulary": token_vocabulary(tokenizer), **settings})
        elif name in ("expnet_plus", "student"):
            vocabulary = token_vocabulary(tokenizer)
            for variant, model in (learned.expnet_plus if name == "expnet_plus" else learned.students).items():
                explainers[f"{name}:{variant}"] = build_method(
                    name, **{"model": model, "layer": layer, "vocabulary": vocabulary, **settings})
        else:
            explainers[name] = build_method(name, **settings)
    return explainers


def explainer_settings(explainer) -> str:
    """The explainer's effective settings, for the table."""
    if is_dataclass(explainer):
        return " ".join(f"{k}={v}" for k, v in asdict(explainer).items())
    if hasattr(explainer, "layer"):
        return f"layer={explainer.layer}"
    return ""


def api_explainer(setup, expnet_training, expnet_plus: dict, layer: int, folder: Path):
    """A `FoldExplainer` (the public API) over the benchmark's classifier and explainers, from a fold folder
    written to `folder` as the crosstask pipeline writes one (`services/bundle.py`; the API only reads folders)."""
    from learned_attribution.core.models.artifacts import explainer_context
    from learned_attribution.core.models.loading import TrainedClassifier
    from learned_attribution.services.bundle import Bundle, fold_card, write_bundle
    from learned_attribution.services.explain import FoldExplainer

    fold = f"heldout_{setup.task}"
    context = explainer_context(setup.model, setup.tokenizer, fold=fold, held_out_task=setup.task,
                                training_tasks=[], encoder="benchmark", layer=layer, rho=0.3, max_length=512)
    first = next(iter(expnet_plus.values()))
    for explainer in (expnet_training, first):
        explainer.context = context
    card = fold_card(fold=fold, best_baseline="saliency", best_baseline_auroc=None, baselines={}, rho=0.3, layer=layer)
    write_bundle(Bundle(card, {"expnet_plus": first, "expnet_paper": expnet_training}), folder)
    return FoldExplainer(folder, TrainedClassifier(setup.model, setup.tokenizer), device=str(model_device(setup.model)))

