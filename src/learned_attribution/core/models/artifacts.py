"""Trained learned explainers as folders, without pickles: `model.safetensors` (the network's state_dict)
plus `config.json` (everything needed to rebuild and apply it).

config.json holds: `kind` (`learned_explainer`: the paper's ExpNet, every ExpNet+ variant and a student are one
kind), `format_version`, `architecture` (input width, hidden units, per-head gates, seeds), the fitted `inputs`
pipeline (columns, transforms, standardisation statistics), the `variant` (feature sets and training recipe, its
network and that network's own settings, flat as a recipe gives them: `Variant.record`), the own-rule thresholds
(`threshold`, `calibrated_threshold`), the training history, and `context`: fold, held-out and training tasks,
encoder, attention layer read, the matched budget rho, max_length, the shape of the classifier it was trained for
(model type, layers, heads, tokenizer class, vocabulary size) and the package versions. `check_compatible` compares
that shape with the classifier an explainer is about to be applied to (a shape-free explainer reads any supported
classifier).

Writes are atomic: the folder is written under a temporary name and renamed, so a folder that exists is
complete (config.json is written last inside it as well).
"""
from __future__ import annotations

import hashlib
import json
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from learned_attribution.core.atomic import atomic_folder

from .architectures import SUPPORTED_MODEL_TYPES
from .learned import InputPipeline, LearnedModel, Variant, build_network
from .learned.recipe import DEFAULT_NETWORK, setting_keys

FORMAT_VERSION = 3  # 3: one kind for every learned explainer, with its fitted input pipeline
# Before each network had settings of its own, a saved variant held every network's (at their defaults but for its
# own network's): the others are dropped when it is read.
UNION_SETTINGS = ("gating", "encoder_blocks", "attention_layers")
CONFIG = "config.json"
WEIGHTS = "model.safetensors"
KIND = "learned_explainer"
_PACKAGES = ("learned-attribution", "torch", "transformers", "safetensors", "numpy")


class IncompatibleClassifierError(ValueError):
    """The classifier differs from the one a learned explainer was trained for in what the explainer reads."""


def package_versions() -> dict[str, str]:
    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def classifier_signature(model: torch.nn.Module, tokenizer) -> dict[str, Any]:
    """What a learned explainer depends on in a classifier: its encoder shape and tokenizer family."""
    config = model.config
    return {"model_type": config.model_type, "num_hidden_layers": int(config.num_hidden_layers),
            "num_attention_heads": int(config.num_attention_heads), "hidden_size": int(config.hidden_size),
            "num_labels": int(config.num_labels), "tokenizer_class": type(tokenizer).__name__.removesuffix("Fast"),
            "vocab_size": int(len(tokenizer))}


def classifier_fingerprint(model: torch.nn.Module) -> str:
    """SHA-256 (16 hex digits) of the classifier's weights: what a student and a teacher part are bound
    to."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()[:16]


def explainer_context(classifier_model: torch.nn.Module, tokenizer, *, fold: str, held_out_task: str,
                      training_tasks: list[str], encoder: str, layer: int, rho: float, max_length: int) -> dict:
    """The `context` block of an artifact's config (see the module docstring)."""
    return {"fold": fold, "held_out_task": held_out_task, "training_tasks": list(training_tasks),
            "encoder": encoder, "layer": int(layer), "rho": float(rho), "max_length": int(max_length),
            "classifier": classifier_signature(classifier_model, tokenizer), "packages": package_versions()}


def check_compatible(explainer: LearnedModel, model: torch.nn.Module, tokenizer, *, where: str) -> None:
    """Raise `IncompatibleClassifierError` naming every difference that matters between the classifier an
    explainer was trained for (`context["classifier"]`) and `model`/`tokenizer`. The label count may differ:
    the explainers explain whichever class is predicted. A shape-free explainer reads a classifier of
    any supported family, depth, head count and tokenizer: its columns are computed from the classifier itself. A
    student records its classifier's weights fingerprint and explains only that classifier."""
    expected = explainer.context.get("classifier", {})
    actual = classifier_signature(model, tokenizer)
    bound = explainer.context.get("classifier_fingerprint")
    if bound is not None:
        _check_student(explainer, expected, actual, model, bound, where)
        return
    differences = []
    for key in () if explainer.shape_free else ("num_hidden_layers", "num_attention_heads", "tokenizer_class"):
        if key in expected and expected[key] != actual[key]:
            differences.append(f"{key}: explainer {expected[key]!r}, classifier {actual[key]!r}")
    if actual["model_type"] not in SUPPORTED_MODEL_TYPES and actual["model_type"] != expected.get("model_type"):
        differences.append(f"model_type {actual['model_type']!r} is not a supported encoder family "
                           f"({', '.join(SUPPORTED_MODEL_TYPES)}; core/models/architectures.py)")
    if differences:
        raise IncompatibleClassifierError(
            f"{where} was trained for a {expected.get('model_type')} classifier with "
            f"{expected.get('num_hidden_layers')} layers and {expected.get('num_attention_heads')} heads "
            f"({expected.get('tokenizer_class')} tokenizer) and cannot read this one: " + "; ".join(differences)
            + ("" if explainer.shape_free else f" (its variant {explainer.variant.name!r} reads one column per layer "
               "or head; a shape-free variant reads any shape)"))


STUDENT_SHAPE = {"num_hidden_layers": "{} layers", "num_attention_heads": "{} heads", "hidden_size": "hidden size {}"}


def _check_student(explainer: LearnedModel, expected: dict, actual: dict, model: torch.nn.Module, bound: str,
                   where: str) -> None:
    """A student explains the one classifier it was trained for (weights fingerprint `bound`): a classifier of
    another family, shape or tokenizer is refused in one line saying which, one with other weights naming both
    fingerprints."""
    trained_on = explainer.context.get("classifier_path") or "its training classifier"
    which = []
    if expected.get("model_type", actual["model_type"]) != actual["model_type"]:
        which.append(f"another family ({actual['model_type']}, not {expected['model_type']})")
    shape = [f"{text.format(actual[key])}, not {expected[key]}" for key, text in STUDENT_SHAPE.items()
             if key in expected and expected[key] != actual[key]]
    if shape:
        which.append(f"another shape ({'; '.join(shape)})")
    if expected.get("tokenizer_class", actual["tokenizer_class"]) != actual["tokenizer_class"]:
        which.append(f"another tokenizer ({actual['tokenizer_class']}, not {expected['tokenizer_class']})")
    if which:
        raise IncompatibleClassifierError(
            f"{where} is a student of one {expected.get('model_type')} classifier, {trained_on}, and explains only "
            f"that one; this classifier{_named(model)} is of {' and '.join(which)}. Train a student for it with "
            "`learned-attribution fit --classifier ...`")
    fingerprint = classifier_fingerprint(model)
    if fingerprint != bound:
        raise IncompatibleClassifierError(
            f"{where} is a student trained for one classifier, {trained_on} (weights fingerprint {bound}), and "
            f"explains only that one; this classifier{_named(model)} has weights fingerprint {fingerprint}. "
            "Train a student for it with `learned-attribution fit --classifier ...`")


def _named(model: torch.nn.Module) -> str:
    path = getattr(model, "name_or_path", "") or getattr(model.config, "_name_or_path", "")
    return f" ({path})" if path else ""


def _config(explainer: LearnedModel) -> tuple[dict, dict[str, torch.Tensor]]:
    if not isinstance(explainer, LearnedModel):
        raise TypeError(f"cannot save a {type(explainer).__name__} as a learned-explainer artifact")
    net = explainer.net
    config = {"kind": KIND, "architecture": net.architecture(), "variant": explainer.variant.record(),
              "inputs": explainer.inputs.config(), "threshold": explainer.threshold,
              "calibrated_threshold": explainer.calibrated_threshold, "best_epoch": explainer.best_epoch,
              "member_best_epochs": explainer.member_best_epochs, "member_val_scores": explainer.member_val_scores,
              "n_pseudo_examples": explainer.n_pseudo_examples, "history": explainer.history}
    return config, net.state_dict()


def write_learned(explainer: LearnedModel, folder: Path) -> None:
    """`folder/model.safetensors` and `folder/config.json`, written in place (callers write into a partial folder
    that is renamed when complete: `save_learned`, `amortize.save_amortized`)."""
    config, state = _config(explainer)
    config = {"format_version": FORMAT_VERSION, **config, "context": explainer.context}
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().cpu().contiguous() for k, v in state.items()}, str(folder / WEIGHTS))
    (folder / CONFIG).write_text(json.dumps(config, indent=1, default=_json_default))


def save_learned(explainer: LearnedModel, folder: str | Path) -> None:
    """Write `folder/model.safetensors` and `folder/config.json` atomically."""
    with atomic_folder(folder) as partial:
        write_learned(explainer, partial)


def save_learned_collection(explainers: dict[str, LearnedModel], folder: str | Path) -> None:
    """Several named explainers as subfolders of `folder`, written atomically as a whole."""
    with atomic_folder(folder) as partial:
        for name, explainer in explainers.items():
            write_learned(explainer, partial / name)


def load_learned_collection(folder: str | Path) -> dict[str, LearnedModel]:
    """The named explainers written by `save_learned_collection`, in name order."""
    folder = Path(folder)
    return {path.name: load_learned(path) for path in sorted(folder.iterdir()) if is_complete(path)}


def _json_default(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def is_complete(folder: str | Path) -> bool:
    folder = Path(folder)
    return (folder / CONFIG).is_file() and (folder / WEIGHTS).is_file()


def read_config(folder: str | Path) -> dict:
    folder = Path(folder)
    if not is_complete(folder):
        raise FileNotFoundError(f"{folder} is not a learned-explainer folder (needs {CONFIG} and {WEIGHTS})")
    config = json.loads((folder / CONFIG).read_text())
    if config.get("kind") != KIND:
        raise ValueError(f"{folder / CONFIG}: kind {config.get('kind')!r}, expected {KIND!r}")
    if config.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{folder / CONFIG}: format_version {config.get('format_version')!r}; this version of "
                         f"learned-attribution reads {FORMAT_VERSION}")
    return config


def load_learned(folder: str | Path) -> LearnedModel:
    """Rebuild a saved learned explainer (eval mode) from its folder."""
    folder = Path(folder)
    config = read_config(folder)
    state = load_file(str(folder / WEIGHTS))
    net = build_network(config["architecture"])
    net.load_state_dict(state)
    return LearnedModel(saved_variant(config["variant"]), InputPipeline.from_config(config["inputs"]), net.eval(),
                            history=config.get("history", []), best_epoch=config.get("best_epoch", 0),
                            member_best_epochs=config.get("member_best_epochs", []),
                            # saved before the field was named for any stopping rule: member_val_auroc
                            member_val_scores=config.get("member_val_scores", config.get("member_val_auroc", [])),
                            calibrated_threshold=config["calibrated_threshold"],
                            n_pseudo_examples=config.get("n_pseudo_examples", 0),
                            threshold=config.get("threshold", 0.5), context=config.get("context", {}))


def saved_variant(record: dict) -> Variant:
    """The variant of a saved explainer from its flat record (`Variant.record`), whichever version wrote it."""
    record = dict(record)
    own = setting_keys(record.get("network", DEFAULT_NETWORK))
    for key in UNION_SETTINGS:
        if key not in own:
            record.pop(key, None)
    return Variant.from_record(record)
