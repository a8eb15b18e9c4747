"""Benchmark: the cost of an explanation. Every registered explainer beside a plain classification forward pass.

Run from the project root with the virtualenv active:

    python benchmarks/attribution_throughput.py            # default: 512 texts, 3 rounds
    python benchmarks/attribution_throughput.py --quick    # a tiny run (seconds)
    python benchmarks/attribution_throughput.py --no-batch1  # batched timings only (no one-text columns)
    python benchmarks/attribution_throughput.py --set lime.n_samples=1000 --set integrated_gradients.n_steps=50

In ONE process, on the same texts, batches and batch size, a plain classification forward pass
(`torch.inference_mode`, logits only) and every explainer in `learned_attribution.core.explainers.METHODS`
at its default settings (LIME and KernelSHAP 500 samples, Integrated Gradients 20 steps; `--set`
overrides) explain the classifier's predicted class. Every method is timed batch by batch, each batch
right next to a plain forward pass on the same batch (which of the two goes first alternates), in several
rounds (method order reversed every other round); the table gives the median over rounds of examples/s
and of this paired ratio to the forward pass, so background load (other jobs on the CPU) cancels.

Expensive methods (`--expensive`, default LIME, KernelSHAP, Integrated Gradients, Occlusion) run on the
first `--n-expensive` texts of the same seeded sample; throughput is per example, and their ratio is taken
against a forward pass on exactly those texts (reference `forward_subset`), so the comparison stays like
for like. A batch that takes less than `--min-seconds` is repeated until that long.

One text at a time (a served model answers requests of one or a few texts), in the same run after the batched
timings (`--no-batch1` skips it):
- `examples_per_s_batch1`, `ratio_to_forward_batch1`: every entry (the `api:` ones included) on batches of ONE
  text, each text next to a plain forward pass on that one text, on the first `--batch1-texts` texts (the
  expensive methods on the first `--n-expensive` of those; `n_examples_batch1`);
- `api_one_text_s`, `captum_one_text_s`, `api_vs_captum_one_text`: for Saliency, Input x Gradient and Integrated
  Gradients, seconds per text of what the API calls for a method, i.e. `apply.tokenizer_batch` on one text and
  the explainer's `explain(model, batch)` (the whole `FoldExplainer` needs a trained fold; its end-to-end
  batch-1 cost, tokenising and classifying included, is the `api:` rows' `examples_per_s_batch1`), each text
  next to the method's own captum call on it (`LayerGradientXActivation` / `LayerIntegratedGradients` on the
  word-embedding layer, same settings, object built once); the ratio is captum's seconds over the API's (> 1:
  the API is faster), and `captum_max_abs_difference` compares their scores;
- `batched_vs_alone`: for Integrated Gradients, seconds per text explaining each text alone over seconds per text
  in the batches (>= 1: batching costs no more per text), paired batch by batch.

Outputs: data/08_reporting/benchmarks/attribution_throughput.csv, attribution_throughput.png (log-scale
bar chart) and attribution_targets.csv (the issue's targets, checked).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd
import torch
import yaml

from learned_attribution.core.models.runner import model_device, resolve_device

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared helpers in feature_extraction.py

from feature_extraction import (PairedWorkload, Step, add_common_arguments, describe_texts,  # noqa: E402
                                length_batches, load_setup, paired_rounds, positive_int, say, set_threads, warm_up)

ATTRIBUTION_COLUMNS = ["method", "family", "n_examples", "batch_size", "examples_per_s", "reference",
                       "ratio_to_forward", "model_calls_per_example", "rounds", "threads", "settings", "error",
                       "source", "n_examples_batch1", "examples_per_s_batch1", "ratio_to_forward_batch1",
                       "api_one_text_s", "captum_one_text_s", "api_vs_captum_one_text", "captum_max_abs_difference",
                       "batched_vs_alone"]
BATCH1_COLUMNS = ATTRIBUTION_COLUMNS[ATTRIBUTION_COLUMNS.index("n_examples_batch1"):]
CAPTUM_METHODS = ("saliency", "input_x_gradient", "integrated_gradients")  # methods with a captum equivalent
# "Not slower" targets compare two nearly equal costs (the API computes what captum computes, without its Python
# overhead): a measured speed ratio this far below 1 is within the run-to-run timing noise.
TIMING_TOLERANCE = 0.98
DEFAULT_EXPENSIVE = ("lime", "kernel_shap", "integrated_gradients", "occlusion")
PAPER_EXPNET_EXAMPLES_PER_S = 13.9
# The targets: ExpNet throughput relative to the forward pass and to each baseline.
TARGETS = (("forward_all", 0.8), ("integrated_gradients", 20.0), ("lime", 200.0), ("kernel_shap", 200.0))
QUICK_SETTINGS = {"lime": {"n_samples": 16}, "kernel_shap": {"n_samples": 16}, "integrated_gradients": {"n_steps": 4}}


# ----------------------------------------------------------------------------------------------------
# Explainers and their inputs
# ----------------------------------------------------------------------------------------------------

def parse_setting(text: str) -> tuple[str, str, object]:
    """`method.key=value` (value parsed as YAML: 1000, 0.5, null, true) -> (method, key, value)."""

    head, sep, value = text.partition("=")
    method, dot, key = head.partition(".")
    if not sep or not dot or not method or not key:
        raise argparse.ArgumentTypeError(f"--set {text!r}: expected METHOD.KEY=VALUE, e.g. lime.n_samples=1000")
    return method, key, yaml.safe_load(value)


def crosstask_params() -> tuple[dict, dict]:
    """The pipeline's `crosstask` block (conf/base/parameters_crosstask.yml) and its ExpNet+ variant catalogue
    (`expnet_plus_variants`, conf/base/parameters_expnet_plus_variants.yml)."""
    crosstask = yaml.safe_load((ROOT / "conf/base/parameters_crosstask.yml").read_text())["crosstask"]
    catalogue = yaml.safe_load((ROOT / "conf/base/parameters_expnet_plus_variants.yml").read_text())
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
    else every default student variant (`AmortizeSettings`' variants and training, services/amortize/settings.py)
    with an untrained network and identity input statistics, the encoder student an untrained head on a copy of
    `model`'s encoder, the attention student untrained layers over its hidden states (the same cost: a student's
    cost is its passes and its network, not its weights)."""
    from learned_attribution.core.models.artifacts import is_complete, load_learned
    from learned_attribution.core.models.learned import InputPipeline, LearnedModel, build_text_network
    from learned_attribution.core.models.learned.recipe import TEXT_NETWORKS
    from learned_attribution.services.amortize.settings import AmortizeSettings

    if is_complete(path):
        student = load_learned(path)
        return {student.variant.name: student}, f"trained student {path}"
    defaults = AmortizeSettings(seed=seed)
    per_token = [v for v in defaults.variants if v.network not in TEXT_NETWORKS]
    students = untrained_explainers(per_token, defaults.training_settings(), model.config, seed)
    for variant in defaults.variants:
        if variant.network in TEXT_NETWORKS:
            students[variant.name] = LearnedModel(variant, InputPipeline([]),
                                                  build_text_network(variant, model, defaults.layer).eval())
    return {v.name: students[v.name] for v in defaults.variants}, f"untrained networks ({path} not found); same cost"


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


def words_of(input_ids: Sequence[int], tokenizer) -> list[str]:
    """The words an id sequence spells, its frame tokens ([CLS]/[SEP], <s>/</s>, padding) dropped: its pieces
    grouped into words by the tokenizer's own word-boundary convention (`architectures.token_convention`: WordPiece's
    `##` continues a word, byte-level BPE's `Ġ` and SentencePiece's `▁` start one; the first piece always starts
    one, a special token such as [UNK] is a word of its own), each word the tokenizer's own string of its pieces.
    Given as a word list, the API re-tokenises them into the same ids (every word with its word-start marker, as
    the pipeline tokenises its word lists), so its entries explain the same tokens as the others."""
    from learned_attribution.core.models.architectures import token_convention
    from learned_attribution.core.models.features import frame_token_ids

    convention = token_convention(tokenizer)
    special = set(getattr(tokenizer, "all_special_tokens", []))
    frame = set(frame_token_ids(tokenizer))
    groups: list[list[str]] = []
    for index, token in zip(input_ids, tokenizer.convert_ids_to_tokens(list(input_ids))):
        if index in frame:
            continue
        starts = not groups or token in special or groups[-1][-1] in special or not convention.read(token).continues
        if starts:
            groups.append([token])
        else:
            groups[-1].append(token)
    words = [tokenizer.convert_tokens_to_string(group).strip() for group in groups]
    return [word for word in words if word]


def api_steps(explainer, method: str, variant, examples: pd.DataFrame, batch_indices, tokenizer) -> list[Step]:
    """Per batch: the public API end to end (tokenise the words, classify, explain, aggregate to words) for
    one method; for `expnet_plus`, with `variant` as the fold's ExpNet+."""
    word_lists = [words_of(ids, tokenizer) for ids in examples["input_ids"]]

    def step_for(indices) -> Step:
        def run() -> int:
            if variant is not None:  # the fold's ExpNet+ explainer, applying this variant's network
                explainer.learned["expnet_plus"] = explainer.method("expnet_plus").model = variant
            explainer.explain([word_lists[i] for i in indices], methods=[method], batch_size=len(indices))
            synchronize(explainer.classifier.model)
            return len(indices)
        return run

    return [step_for(indices) for indices in batch_indices]


def build_explainers(names: Sequence[str], overrides: dict[str, dict], expnet_training, expnet_plus: dict,
                     layer: int, tokenizer, students: dict | None = None) -> dict:
    """Every requested explainer at its default settings plus `overrides`; `expnet_plus` and `student` become
    one entry per variant (`expnet_plus:<variant>`, `student:<variant>`)."""
    from learned_attribution.core.explainers import build_method
    from learned_attribution.core.models.signals import token_vocabulary

    explainers = {}
    for name in names:
        settings = dict(overrides.get(name, {}))
        if name == "expnet_paper":
            explainers[name] = build_method(name, **{"model": expnet_training, "layer": layer,
                                                        "vocabulary": token_vocabulary(tokenizer), **settings})
        elif name in ("expnet_plus", "student"):
            vocabulary = token_vocabulary(tokenizer)
            for variant, model in (expnet_plus if name == "expnet_plus" else students or {}).items():
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


@torch.inference_mode()
def predicted_classes(model: torch.nn.Module, batches) -> dict[int, int]:
    """{row index in the sample: predicted class}: explanations are of the predicted class."""
    predicted = {}
    for indices, batch in batches:
        logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
        predicted.update(zip(indices, logits.argmax(-1).tolist()))
    return predicted


def make_batches(examples: pd.DataFrame, batch_size: int, tokenizer, targets: dict[int, int] | None = None,
                 device: torch.device | None = None):
    """[(row indices, Batch)] in the pipeline's length-sorted order, on `device`; targets default to class 0."""
    from learned_attribution.core.explainers.apply import tokenizer_batch

    ids = list(examples["input_ids"])
    out = []
    for indices in length_batches(examples, batch_size):
        target = [targets[i] if targets else 0 for i in indices]
        batch = tokenizer_batch([ids[i] for i in indices], target, tokenizer)
        out.append((indices, batch if device is None else batch.to(device)))
    return out


def synchronize(model: torch.nn.Module) -> None:
    """Wait for the GPU's queued kernels, so a step's time is its whole work (a no-op on the CPU)."""
    device = model_device(model)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# ----------------------------------------------------------------------------------------------------
# Workloads
# ----------------------------------------------------------------------------------------------------

def forward_steps(model: torch.nn.Module, batches) -> list[Step]:
    """Per batch: the plain classification forward pass (logits, no attentions) under inference mode."""

    def step_for(indices, batch) -> Step:
        def run() -> int:
            with torch.inference_mode():
                model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
            synchronize(model)
            return len(indices)
        return run

    return [step_for(indices, batch) for indices, batch in batches]


class ModelCallTally:
    """Model calls per example reported by an explainer's `Attribution`s, over every batch it explained."""

    def __init__(self) -> None:
        self.calls, self.rows = 0, 0

    @property
    def per_example(self) -> float:
        return self.calls / self.rows if self.rows else float("nan")


def explainer_steps(model: torch.nn.Module, explainer, batches, tally: ModelCallTally) -> list[Step]:
    """Per batch: `explainer.explain` (scores for the predicted class); non-finite scores are an error."""

    def step_for(indices, batch) -> Step:
        def run() -> int:
            attribution = explainer.explain(model, batch)
            synchronize(model)
            if not torch.isfinite(attribution.scores[~batch.special_mask]).all():
                raise FloatingPointError(f"{explainer.name}: non-finite scores in the batch of examples {indices}")
            tally.calls += attribution.model_calls * len(indices)
            tally.rows += len(indices)
            return len(indices)
        return run

    return [step_for(indices, batch) for indices, batch in batches]


def captum_call(model: torch.nn.Module, name: str, explainer) -> Callable[[object], torch.Tensor] | None:
    """`batch -> scores [B, T]`: the method's own captum call on the word-embedding layer at the explainer's
    settings (the captum object built once, here), or None for a method without a captum equivalent."""
    from captum.attr import LayerGradientXActivation, LayerIntegratedGradients

    from learned_attribution.core.explainers.gradient import logits_function, pad_baseline_ids

    layer, forward = model.get_input_embeddings(), logits_function(model)
    if name in ("saliency", "input_x_gradient"):
        gradient_x_activation = LayerGradientXActivation(forward, layer, multiply_by_inputs=name == "input_x_gradient")

        def gradients(batch) -> torch.Tensor:
            with torch.enable_grad():
                values = gradient_x_activation.attribute(batch.input_ids, target=batch.target,
                                                         additional_forward_args=(batch.attention_mask,))
            return values.norm(dim=-1) if name == "saliency" else values.sum(dim=-1)
        return gradients
    if name == "integrated_gradients":
        integrated = LayerIntegratedGradients(forward, layer)

        def integrated_gradients(batch) -> torch.Tensor:
            with torch.enable_grad():
                values, _ = integrated.attribute(
                    batch.input_ids, baselines=pad_baseline_ids(batch), target=batch.target,
                    additional_forward_args=(batch.attention_mask,), n_steps=explainer.n_steps,
                    method=explainer.method, internal_batch_size=explainer.internal_batch_size,
                    return_convergence_delta=True)  # as the explainer, which reports it too
            return values.sum(dim=-1)
        return integrated_gradients
    return None


def one_text_steps(model: torch.nn.Module, tokenizer, examples: pd.DataFrame, targets: dict[int, int],
                   device: torch.device, run: Callable[[object], torch.Tensor], make: bool) -> list[Step]:
    """Per text of `examples`: `run` on a batch of that one text. With `make`, the step makes the batch itself
    (`apply.tokenizer_batch` and the move to the device: what the API does per request); else it is made once."""
    from learned_attribution.core.explainers.apply import tokenizer_batch

    def step_for(row: int, ids: list[int]) -> Step:
        premade = tokenizer_batch([ids], [targets[row]], tokenizer).to(device)

        def run_one() -> int:
            run(tokenizer_batch([ids], [targets[row]], tokenizer).to(device) if make else premade)
            synchronize(model)
            return 1
        return run_one

    return [step_for(row, list(ids)) for row, ids in enumerate(examples["input_ids"])]


def alone_steps(model: torch.nn.Module, explainer, batches, tokenizer, examples: pd.DataFrame,
                targets: dict[int, int], device: torch.device) -> list[Step]:
    """Per batch of `batches`: the explainer on each of the batch's texts alone (one-text batches made once),
    the reference that the batched calls on the same texts are timed beside."""
    from learned_attribution.core.explainers.apply import tokenizer_batch

    ids = list(examples["input_ids"])

    def step_for(indices) -> Step:
        singles = [tokenizer_batch([ids[i]], [targets[i]], tokenizer).to(device) for i in indices]

        def run() -> int:
            for batch in singles:
                explainer.explain(model, batch)
            synchronize(model)
            return len(singles)
        return run

    return [step_for(indices) for indices, _ in batches]


def paired_medians(timings: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Per method: medians over rounds of its examples/s, its reference's examples/s and their paired ratio."""
    return {method: {"examples_per_s": float(group["examples_per_s"].median()),
                     "reference_examples_per_s": float(group["reference_examples_per_s"].median()),
                     "ratio": float(group["ratio"].median())}
            for method, group in timings.groupby("method", sort=False)}


def batch1_columns(args, setup, explainers: dict, workload_names: Sequence[str], api_entries: dict, fold,
                   predicted: dict[int, int], device: torch.device) -> dict[str, dict]:
    """The one-text-at-a-time columns (module docstring) per table row name: every entry of `workload_names`
    at batch 1 beside a forward pass at batch 1, the API's one-text call beside captum's own call, and
    Integrated Gradients alone beside batched."""
    from learned_attribution.core.explainers.apply import tokenizer_batch

    examples = setup.examples
    texts = {"forward_all": examples.iloc[:min(args.batch1_texts, len(examples))],
             "forward_subset": examples.iloc[:min(args.batch1_texts, args.n_expensive, len(examples))]}
    singles = {ref: make_batches(rows, 1, setup.tokenizer, predicted, device) for ref, rows in texts.items()}
    forward = {ref: forward_steps(setup.model, batches) for ref, batches in singles.items()}
    workloads: dict[str, PairedWorkload] = {}
    references: dict[str, str] = {}
    for name in workload_names:
        reference = "forward_subset" if name in args.expensive else "forward_all"
        if name in api_entries:
            method, variant = api_entries[name]
            steps = api_steps(fold, method, variant, texts[reference], [i for i, _ in singles[reference]],
                              setup.tokenizer)
        else:
            steps = explainer_steps(setup.model, explainers[name], singles[reference], ModelCallTally())
        steps[0]()  # warm-up at this shape
        workloads[name], references[name] = PairedWorkload(steps, forward[reference]), reference
    say(f"timing {len(workloads)} methods one text at a time x {args.rounds} rounds, each text beside a plain forward "
        f"pass on that text ({len(texts['forward_all'])} texts; expensive methods {len(texts['forward_subset'])})")
    summary = summarise(paired_rounds(workloads, args.rounds, args.min_seconds_batch1, label="batch 1 "), references)
    columns: dict[str, dict] = {}
    for record in summary.to_dict("records"):
        columns[record["method"]] = {"n_examples_batch1": len(texts[record["reference"]]),
                                     "examples_per_s_batch1": record["examples_per_s"],
                                     "ratio_to_forward_batch1": record["ratio_to_forward"]}

    pairs: dict[str, PairedWorkload] = {}
    differences: dict[str, float] = {}
    for name in (n for n in CAPTUM_METHODS if n in workload_names):
        reference = "forward_subset" if name in args.expensive else "forward_all"
        rows, explainer = texts[reference], explainers[name]
        captum = captum_call(setup.model, name, explainer)
        ours = one_text_steps(setup.model, setup.tokenizer, rows, predicted, device,
                              lambda batch, e=explainer: e.explain(setup.model, batch).scores, make=True)
        theirs = one_text_steps(setup.model, setup.tokenizer, rows, predicted, device, captum, make=False)
        first = tokenizer_batch([list(rows["input_ids"].iloc[0])], [predicted[0]], setup.tokenizer).to(device)
        differences[name] = float((explainer.explain(setup.model, first).scores - captum(first)).abs().max().detach())
        pairs[name] = PairedWorkload(ours, theirs)
    if "integrated_gradients" in pairs:
        explainer = explainers["integrated_gradients"]
        batches = make_batches(texts["forward_subset"], args.batch_size, setup.tokenizer, predicted, device)
        pairs["integrated_gradients:batched"] = PairedWorkload(
            explainer_steps(setup.model, explainer, batches, ModelCallTally()),
            alone_steps(setup.model, explainer, batches, setup.tokenizer, texts["forward_subset"], predicted, device))
    if pairs:
        say(f"timing the API's one-text call beside captum's own ({', '.join(differences)}), and Integrated Gradients "
            "batched beside alone")
        warm_up(list(pairs.values()), skip=False)
        medians = paired_medians(paired_rounds(pairs, args.rounds, args.min_seconds_batch1, label="one text "))
        for name, difference in differences.items():
            columns.setdefault(name, {}).update(
                api_one_text_s=1 / medians[name]["examples_per_s"],
                captum_one_text_s=1 / medians[name]["reference_examples_per_s"],
                api_vs_captum_one_text=medians[name]["ratio"], captum_max_abs_difference=difference)
        if "integrated_gradients:batched" in medians:
            columns["integrated_gradients"]["batched_vs_alone"] = medians["integrated_gradients:batched"]["ratio"]
    return columns


# ----------------------------------------------------------------------------------------------------
# Report
# ----------------------------------------------------------------------------------------------------

def summarise(timings: pd.DataFrame, references: dict[str, str]) -> pd.DataFrame:
    """Per method: median over rounds of examples/s and of its paired ratio to the forward pass on the same
    batches. Each forward pass's own row pools, per round, all its timings beside the methods it paired with."""
    rows = []
    timings = timings.assign(reference=timings["method"].map(references))
    for reference, group in timings.groupby("reference", sort=False):
        pooled = group.groupby("round")[["reference_examples", "reference_seconds"]].sum()
        rows.append({"method": reference,
                     "examples_per_s": float((pooled["reference_examples"] / pooled["reference_seconds"]).median()),
                     "reference": reference, "ratio_to_forward": 1.0, "rounds": len(pooled)})
    for method, group in timings.groupby("method", sort=False):
        rows.append({"method": method, "examples_per_s": float(group["examples_per_s"].median()),
                     "reference": references[method], "ratio_to_forward": float(group["ratio"].median()),
                     "rounds": len(group)})
    return pd.DataFrame(rows)


def one_text_targets(by_method: pd.DataFrame) -> list[dict]:
    """Fast single requests: the API's batch-1 cost of a method at most its own captum call on one text, and
    Integrated Gradients batched at least as fast per text as alone (both as speed ratios, `TIMING_TOLERANCE`)."""
    rows = []
    for method in CAPTUM_METHODS:
        if method in by_method.index and np.isfinite(by_method.at[method, "api_vs_captum_one_text"]):
            value = float(by_method.at[method, "api_vs_captum_one_text"])
            rows.append({"target": f"{method} batch-1 cost <= captum's own one-text call (captum s / API s)",
                         "measured": value, "required": TIMING_TOLERANCE, "met": bool(value >= TIMING_TOLERANCE)})
    if "integrated_gradients" in by_method.index and np.isfinite(by_method.at["integrated_gradients",
                                                                              "batched_vs_alone"]):
        value = float(by_method.at["integrated_gradients", "batched_vs_alone"])
        rows.append({"target": "integrated_gradients batched per text <= alone per text (alone s / batched s)",
                     "measured": value, "required": TIMING_TOLERANCE, "met": bool(value >= TIMING_TOLERANCE)})
    return rows


def targets_table(table: pd.DataFrame) -> pd.DataFrame:
    """The issue's targets for ExpNet. Against a baseline the speed-up is the ratio of the two methods'
    ratios to the forward pass on their own texts (like for like when they ran on different numbers of texts)."""
    by_method = table.set_index("method")
    rows = []
    from learned_attribution.core.models.signals import GRADIENT_SETS

    for method, record in by_method.iterrows():
        if method.startswith("api:") and np.isfinite(record["ratio_to_forward"]):
            # through the public API, non-gradient learned explainers >= 0.8x a forward pass, and
            # the ExpNet+ variants that read the saliency gradient within 10% of the saliency baseline.
            if "saliency" in record["settings"].split(" (")[0] and "saliency" in by_method.index:
                value = record["ratio_to_forward"] / by_method.at["saliency", "ratio_to_forward"]
                rows.append({"target": f"{method} / saliency baseline", "measured": value, "required": 0.9,
                             "met": bool(value >= 0.9)})
            elif not any(s in record["settings"] for s in GRADIENT_SETS) and method != "api:saliency":
                rows.append({"target": f"{method} / plain forward pass (no gradients, end to end)",
                             "measured": record["ratio_to_forward"], "required": 0.8,
                             "met": bool(record["ratio_to_forward"] >= 0.8)})
        if method.startswith("expnet_plus:") and np.isfinite(record["ratio_to_forward"]):
            gradients = any(s in record["settings"] for s in GRADIENT_SETS)
            required = 0.5 if gradients else 0.8  # with / without a backward pass
            rows.append({"target": f"{method} / plain forward pass ({'gradients' if gradients else 'no gradients'})",
                         "measured": record["ratio_to_forward"], "required": required,
                         "met": bool(record["ratio_to_forward"] >= required)})
        if method.startswith("student:") and np.isfinite(record["ratio_to_forward"]):
            # a student over forward-pass signals >= 0.9x a forward pass; one that reads gradients, or runs layers
            # beyond the classifier's pass (a second forward pass through its copy of the encoder, or its own new
            # attention layers), at least the saliency baseline's own ratio
            second_pass = any(s in record["settings"] for s in (*GRADIENT_SETS, "encoder", "attention layers"))
            if second_pass and "saliency" in by_method.index:
                required, what = by_method.at["saliency", "ratio_to_forward"], "saliency's own ratio"
            else:
                required, what = 0.9, "no gradients"
            rows.append({"target": f"{method} / plain forward pass ({what})", "measured": record["ratio_to_forward"],
                         "required": required, "met": bool(record["ratio_to_forward"] >= required)})
    rows.extend(one_text_targets(by_method))
    if "expnet_paper" not in by_method.index or not np.isfinite(by_method.at["expnet_paper", "ratio_to_forward"]):
        return pd.DataFrame(rows)
    expnet_relative = by_method.at["expnet_paper", "ratio_to_forward"]
    for other, target in TARGETS:
        if other not in by_method.index:
            continue
        if other == "forward_all":
            value, what = expnet_relative, "ExpNet / plain forward pass"
        else:
            value, what = expnet_relative / by_method.at[other, "ratio_to_forward"], f"ExpNet / {other}"
        rows.append({"target": what, "measured": value, "required": target, "met": bool(value >= target)})
    rows.append({"target": "ExpNet examples/s (paper: 13.9 on its hardware)",
                 "measured": by_method.at["expnet_paper", "examples_per_s"], "required": PAPER_EXPNET_EXAMPLES_PER_S,
                 "met": bool(by_method.at["expnet_paper", "examples_per_s"] >= PAPER_EXPNET_EXAMPLES_PER_S)})
    return pd.DataFrame(rows)


def save_chart(table: pd.DataFrame, path: Path, subtitle: str) -> None:
    """Log-scale horizontal bars of examples/s, coloured by family, with the forward pass as a line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = table[np.isfinite(table["examples_per_s"])].sort_values("examples_per_s")
    families = list(dict.fromkeys(shown["family"]))
    colours = dict(zip(families, plt.get_cmap("tab10").colors))
    figure, axis = plt.subplots(figsize=(8, 0.38 * len(shown) + 1.6))
    labels = [f"{m} (n={n})" for m, n in zip(shown["method"], shown["n_examples"])]
    axis.barh(labels, shown["examples_per_s"], color=[colours[f] for f in shown["family"]])
    for y, (value, ratio) in enumerate(zip(shown["examples_per_s"], shown["ratio_to_forward"])):
        axis.text(value * 1.08, y, f"{value:.3g}/s  ({ratio:.2g}x fwd)", va="center", fontsize=7)
    forward = table.loc[table["method"] == "forward_all", "examples_per_s"]
    if len(forward):
        axis.axvline(float(forward.iloc[0]), color="black", linestyle="--", linewidth=0.8)
    axis.set_xscale("log")
    axis.set_xlim(shown["examples_per_s"].min() / 2, shown["examples_per_s"].max() * 20)
    axis.set_xlabel("examples per second (log scale; dashed: plain forward pass)")
    axis.set_title(f"Cost of an explanation\n{subtitle}", fontsize=9)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[f]) for f in families]
    axis.legend(handles, families, fontsize=7, loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


# ----------------------------------------------------------------------------------------------------
# Main
# ----------------------------------------------------------------------------------------------------

def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_common_arguments(parser)
    parser.set_defaults(rounds=3)
    parser.add_argument("--batch-size", type=positive_int, default=16,
                        help="explanation batch size for every method (the pipeline's crosstask.batch_size)")
    parser.add_argument("--methods", nargs="+", default=None,
                        help="explainers to run; every registered one when not given")
    parser.add_argument("--expensive", nargs="*", default=list(DEFAULT_EXPENSIVE),
                        help="methods measured on the first --n-expensive texts only")
    parser.add_argument("--n-expensive", type=positive_int, default=8, help="texts for the expensive methods")
    parser.add_argument("--set", dest="settings", type=parse_setting, action="append", default=[],
                        metavar="METHOD.KEY=VALUE", help="override an explainer setting (repeatable)")
    parser.add_argument("--expnet", type=Path, default=None,
                        help="the paper's ExpNet folder (default: data/06_models/heldout_<task>/expnet_paper; a quick one is "
                             "trained on random features if missing)")
    parser.add_argument("--no-api", dest="api", action="store_false",
                        help="skip the entries through the public API (api:expnet_paper, api:expnet_plus:<variant>, "
                             "api:saliency)")
    parser.add_argument("--device", default="cpu",
                        help="auto, cpu, cuda, cuda:N or mps: where the classifier and every method run")
    parser.add_argument("--min-seconds", type=float, default=0.25,
                        help="a batch that takes less is repeated until this long (method and forward pass alike)")
    parser.add_argument("--no-batch1", dest="batch1", action="store_false",
                        help="skip the one-text-at-a-time columns (batch 1, the captum one-text reference, IG alone)")
    parser.add_argument("--batch1-texts", type=positive_int, default=None,
                        help="texts (the first of the sample) explained one at a time; the expensive methods use "
                             "the first --n-expensive of them (default 32; 1 with --quick)")
    parser.add_argument("--min-seconds-batch1", type=float, default=0.0,
                        help="as --min-seconds, for the one-text timings (a text takes tens of milliseconds or more)")
    args = parser.parse_args(argv)
    if args.quick:
        args.n_texts, args.n_expensive, args.rounds, args.batch_size, args.min_seconds = 8, 2, 1, 4, 0.0
    if args.batch1_texts is None:
        args.batch1_texts = 1 if args.quick else 32
    return args


def main(argv: Sequence[str] | None = None) -> pd.DataFrame:
    """Run the benchmark, print the tables, save CSVs and the chart; returns the throughput table."""
    from learned_attribution.core.explainers import METHODS

    args = parse_args(argv)
    threads = set_threads(args.threads)
    names = list(args.methods or METHODS)
    unknown = [n for n in names + list(args.expensive) + [m for m, _, _ in args.settings] if n not in METHODS]
    if unknown:
        raise SystemExit(f"unknown explainer(s) {sorted(set(unknown))}; registered: {sorted(METHODS)}")
    overrides: dict[str, dict] = {}
    if args.quick:
        for method, settings in QUICK_SETTINGS.items():
            overrides.setdefault(method, {}).update(settings)
    for method, key, value in args.settings:
        overrides.setdefault(method, {})[key] = value

    say(f"torch {torch.__version__}, {threads} intra-op threads")
    setup = load_setup(args.task, args.n_texts, args.seed, args.source, args.data_root)
    device = resolve_device(args.device)
    setup.model.to(device)
    say(f"device: {device}" + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""))
    examples = setup.examples
    subset = examples.iloc[:min(args.n_expensive, len(examples))]
    source = f"{setup.model_source}; {setup.text_source}"
    say(f"model: {setup.model_source}\ntexts: {setup.text_source}; {describe_texts(examples)}; "
        f"expensive methods ({', '.join(n for n in names if n in args.expensive)}) on the first {len(subset)} "
        f"({describe_texts(subset)})")

    all_batches = make_batches(examples, args.batch_size, setup.tokenizer, device=device)
    predicted = predicted_classes(setup.model, all_batches)
    all_batches = make_batches(examples, args.batch_size, setup.tokenizer, predicted, device)
    subset_batches = make_batches(subset, args.batch_size, setup.tokenizer, predicted, device)

    n_features = 2 * setup.model.config.num_attention_heads
    expnet_training, expnet_note, expnet_plus, expnet_plus_note = None, "", {}, ""
    if "expnet_paper" in names:
        expnet_path = args.expnet or args.data_root / "06_models" / f"heldout_{setup.task}" / "expnet_paper"
        expnet_training, expnet_note = load_expnet(expnet_path, n_features, args.seed)
        say(f"expnet_paper: {expnet_note}")
    if "expnet_plus" in names:
        config = setup.model.config
        variants = args.data_root / "06_models" / "fold_training" / f"heldout_{setup.task}" / "expnet_plus_variants"
        expnet_plus, expnet_plus_note = expnet_plus_models(variants, config, args.seed)
        say(f"expnet_plus: {expnet_plus_note}")
    students, student_note = {}, ""
    if "student" in names:
        students, student_note = student_models(args.data_root / "06_models" / f"student_{setup.task}" / "student",
                                                setup.model, args.seed)
        say(f"student: {student_note}")
    explainers = build_explainers(names, overrides, expnet_training, expnet_plus, args.layer, setup.tokenizer,
                                  students)

    forward = {"forward_all": forward_steps(setup.model, all_batches),
               "forward_subset": forward_steps(setup.model, subset_batches)}
    workloads: dict[str, PairedWorkload] = {}
    tallies: dict[str, ModelCallTally] = {}
    references: dict[str, str] = {}
    errors: dict[str, str] = {}
    api_settings: dict[str, str] = {}
    say("warm-up: every method and the forward pass on their shortest batch")
    for step in forward.values():
        step[0]()
    for name, explainer in explainers.items():
        reference = "forward_subset" if name in args.expensive else "forward_all"
        batches = subset_batches if reference == "forward_subset" else all_batches
        try:
            explainer_steps(setup.model, explainer, batches[:1], ModelCallTally())[0]()
        except Exception as error:  # noqa: BLE001 - one failing method must not stop the benchmark
            errors[name] = f"{type(error).__name__}: {error}"
            say(f"  {name} FAILED on warm-up: {errors[name]}")
            continue
        tallies[name] = ModelCallTally()
        workloads[name] = PairedWorkload(explainer_steps(setup.model, explainer, batches, tallies[name]),
                                         forward[reference])
        references[name] = reference

    api_folder = tempfile.TemporaryDirectory()
    fold, entries = None, {}
    if args.api and expnet_training is not None and expnet_plus:
        fold = api_explainer(setup, expnet_training, expnet_plus, args.layer, Path(api_folder.name) / "fold")
        batch_indices = [indices for indices, _ in all_batches]
        entries = {"api:expnet_paper": ("expnet_paper", None), "api:saliency": ("saliency", None),
                   **{f"api:expnet_plus:{v}": ("expnet_plus", m) for v, m in expnet_plus.items()}}
        for name, (method, variant) in entries.items():
            steps = api_steps(fold, method, variant, examples, batch_indices, setup.tokenizer)
            steps[0]()
            workloads[name] = PairedWorkload(steps, forward["forward_all"])
            references[name] = "forward_all"
            tallies[name] = ModelCallTally()
            api_settings[name] = (f"{variant.variant.describe()} " if variant is not None else "") + \
                "(public API: tokenise, classify, explain, words)"

    say(f"timing {len(workloads)} methods x {args.rounds} rounds, each batch beside a plain forward pass on the "
        f"same batch (batch size {args.batch_size})")
    timings = paired_rounds(workloads, args.rounds, args.min_seconds)
    summary = summarise(timings, references)
    one_text = batch1_columns(args, setup, explainers, list(workloads), entries, fold, predicted, device) \
        if args.batch1 else {}
    rows = []
    for record in summary.to_dict("records"):
        name = record["method"]
        is_forward = name.startswith("forward")
        explainer = explainers.get(name)
        if name in api_settings:
            # A learned explainer classifies in its own pass; a baseline needs a classification pass first.
            calls = 2.0 if name == "api:saliency" else 1.0
            rows.append({**record, "family": "api", "n_examples": len(examples), "batch_size": args.batch_size,
                         "model_calls_per_example": calls, "threads": threads,
                         "settings": api_settings[name], "error": "", "source": source})
            continue
        rows.append({**record, "family": "reference" if is_forward else explainer.family,
                     "n_examples": len(subset) if record["reference"] == "forward_subset" else len(examples),
                     "batch_size": args.batch_size,
                     "model_calls_per_example": 1.0 if is_forward else tallies[name].per_example,
                     "threads": threads, "settings": "" if is_forward else explainer_settings(explainer),
                     "error": "", "source": source})
    for name, error in errors.items():
        rows.append({"method": name, "family": explainers[name].family, "n_examples": 0,
                     "batch_size": args.batch_size, "examples_per_s": float("nan"), "reference": "",
                     "ratio_to_forward": float("nan"), "model_calls_per_example": float("nan"), "rounds": 0,
                     "threads": threads, "settings": explainer_settings(explainers[name]), "error": error,
                     "source": source})
    for row in rows:
        row.update(one_text.get(row["method"], {}))
    table = pd.DataFrame(rows).reindex(columns=ATTRIBUTION_COLUMNS)
    table = table.sort_values("examples_per_s", ascending=False, na_position="last").reset_index(drop=True)
    if expnet_note and "expnet_paper" in set(table["method"]):
        table.loc[table["method"] == "expnet_paper", "settings"] += f" ({expnet_note})"
    for prefix, note in (("expnet_plus:", expnet_plus_note), ("student:", student_note)):
        rows_of = table["method"].str.startswith(prefix)
        table.loc[rows_of, "settings"] = [f"{explainers[m].model.variant.describe()} ({note})"
                                          for m in table.loc[rows_of, "method"]]
    api_folder.cleanup()

    args.output_dir.mkdir(parents=True, exist_ok=True)
    csv_path = args.output_dir / "attribution_throughput.csv"
    table.to_csv(csv_path, index=False)
    targets = targets_table(table)
    targets.to_csv(args.output_dir / "attribution_targets.csv", index=False)
    chart_path = args.output_dir / "attribution_throughput.png"
    save_chart(table, chart_path, f"{setup.model_source}; batch {args.batch_size}; {threads} thread(s)")

    say(f"\nThroughput (median of {args.rounds} rounds; ratio = median over rounds of the ratio to a forward pass "
        f"timed beside it, batch by batch;\nexpensive methods ran on {len(subset)} of the {len(examples)} texts: "
        "throughput is per example, their reference is forward_subset)")
    say(table[["method", "family", "n_examples", "examples_per_s", "ratio_to_forward", "model_calls_per_example"]]
        .to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    if one_text:
        say("\nOne text at a time (batch 1; ratio_to_forward_batch1 = beside a forward pass on the same one text; "
            "api/captum_one_text_s = seconds per text of tokenizer_batch + explain and of captum's own call, timed side "
            "by side; batched_vs_alone = IG's seconds per text alone / batched)")
        shown = table[table[BATCH1_COLUMNS[1]].notna()]
        say(shown[["method", *BATCH1_COLUMNS]].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    if errors:
        say(f"FAILED: {errors}")
    if len(targets):
        say("\nTargets (ExpNet vs a baseline = ratio of their ratios to the forward pass on their own texts)")
        say(targets.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    say(f"saved {csv_path}, {chart_path}, {args.output_dir / 'attribution_targets.csv'}")
    return table


if __name__ == "__main__":
    main()
