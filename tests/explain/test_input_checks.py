"""Checks before any work and inputs that used to go wrong quietly: output paths and
`--max-length` checked first, failed writes leave no `.partial` file, a string is one text, mostly-unknown texts are
flagged, missing classifier folders and models dirs are named, byte-order marks and blank lines in input files."""
from __future__ import annotations

import errno
import json
import logging
from pathlib import Path

import pytest

from learned_attribution.adapters.cli import main
from learned_attribution.core import atomic
from learned_attribution.core.data.texts import read_inputs
from learned_attribution.core.errors import InputError
from learned_attribution.core.models.loading import load_classifier
from learned_attribution.services.bundle import fold_folder, task_classifier
from learned_attribution.services.explain import FoldExplainer
from learned_attribution.services.explanation import UNKNOWN_SHARE_THRESHOLD


def run(tiny_models_dir, *args):
    return main(["explain", "--fold", "heldout_sst2", "--models-dir", str(tiny_models_dir), "--device", "cpu", *args])


@pytest.fixture
def fold(tiny_models_dir):
    return FoldExplainer.from_fold("heldout_sst2", models_dir=tiny_models_dir, device="cpu")


# ---- failure 3: outputs and max_length are checked before any work ------------------------------------------------

@pytest.mark.parametrize("option", ["--output", "--html"])
def test_a_missing_output_folder_stops_before_loading_anything(tiny_models_dir, tmp_path, capsys, monkeypatch, option):
    def no_work(*args, **kwargs):
        raise AssertionError("the fold was loaded before the output path was checked")

    monkeypatch.setattr(FoldExplainer, "from_fold", no_work)
    target = tmp_path / "no_such_folder" / "out.file"
    assert run(tiny_models_dir, "fine", option, str(target)) == 2
    assert f"{option} {target}: the folder {target.parent} does not exist" in capsys.readouterr().err


def test_an_unwritable_output_folder_or_a_folder_as_output_stops_first(tiny_models_dir, tmp_path, capsys, monkeypatch):
    def refuse(folder):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr("learned_attribution.adapters.cli.probe_writable", refuse)
    assert run(tiny_models_dir, "fine", "--output", str(tmp_path / "out.jsonl")) == 2
    assert f"--output {tmp_path / 'out.jsonl'}: cannot write in {tmp_path} (Read-only file system)" \
        in capsys.readouterr().err
    monkeypatch.undo()
    assert run(tiny_models_dir, "fine", "--html", str(tmp_path)) == 2
    assert f"--html {tmp_path}: is a folder, not a file" in capsys.readouterr().err


def test_a_full_disk_at_the_end_is_one_line_and_leaves_no_partial_file(tiny_models_dir, tmp_path, capsys, monkeypatch):
    real = Path.write_text

    def full(self, *args, **kwargs):
        if self.name.endswith(".partial.jsonl"):
            with open(self, "w") as handle:
                handle.write("half")
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full)
    out = tmp_path / "out.jsonl"
    assert run(tiny_models_dir, "fine", "--output", str(out)) == 2
    assert f"--output {out}: cannot write (No space left on device)" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["06_models"]  # neither out.jsonl nor out.partial.jsonl


def test_write_text_atomically_removes_its_temporary_file_on_any_failure(tmp_path, monkeypatch):
    target = tmp_path / "x.txt"
    target.write_text("before")

    def fail(*args):
        raise OSError(errno.EXDEV, "cross-device")

    monkeypatch.setattr(atomic.os, "replace", fail)
    with pytest.raises(OSError):
        atomic.write_text_atomically(target, "after")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.txt"] and target.read_text() == "before"
    monkeypatch.undo()
    atomic.write_text_atomically(target, "after")  # unchanged otherwise
    assert target.read_text() == "after" and sorted(p.name for p in tmp_path.iterdir()) == ["x.txt"]
    with pytest.raises(OSError):
        atomic.probe_writable(tmp_path / "missing")
    atomic.probe_writable(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.txt"]  # the probe cleans up


def test_max_length_above_the_models_positions_is_named_with_the_maximum(tiny_models_dir, tmp_path, capsys):
    # The tiny classifier has max_position_embeddings 64.
    with pytest.raises(InputError, match=r"max_length=1000 is more than the classifier accepts: at most 64 "):
        FoldExplainer.from_fold("heldout_sst2", models_dir=tiny_models_dir, device="cpu", max_length=1000)
    assert run(tiny_models_dir, "fine", "--max-length", "65") == 2
    assert "max_length=65 is more than the classifier accepts: at most 64" in capsys.readouterr().err
    with pytest.raises(InputError, match=r"max_length=2: must be an integer of at least 3"):
        FoldExplainer.from_fold("heldout_sst2", models_dir=tiny_models_dir, device="cpu", max_length=2)
    assert FoldExplainer.from_fold("heldout_sst2", models_dir=tiny_models_dir, device="cpu",
                                   max_length=64).max_length == 64


def test_position_offsets_of_roberta_style_models_lower_the_maximum():
    from transformers import RobertaConfig, RobertaForSequenceClassification

    from learned_attribution.core.models.loading import max_positions

    model = RobertaForSequenceClassification(RobertaConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16,
        max_position_embeddings=34, pad_token_id=1))

    class Tokenizer:
        model_max_length = 10 ** 30  # "no limit" in a tokenizer saved without one

    assert max_positions(model, Tokenizer()) == 32  # 34 positions, the first two reserved (padding_idx 1)
    Tokenizer.model_max_length = 16
    assert max_positions(model, Tokenizer()) == 16


# ---- failure 4: inputs --------------------------------------------------------------------------------------------

def test_a_string_is_one_text_not_its_characters(fold):
    results = fold.explain("good", methods=["saliency"])
    assert len(results) == 1 and results[0].words == ["good"]
    assert fold.explain("good", methods=["saliency"], ids="a")[0].id == "a"


def test_a_mostly_unknown_text_is_flagged_with_a_warning(fold, caplog):
    with caplog.at_level(logging.WARNING, logger="learned_attribution.services.explain"):
        emoji, chinese, fine = fold.explain(["😀 😂 🎬", "我爱这部电影", "the movie is great"], methods=["saliency"])
    assert emoji.unknown_share == 1.0 and emoji.mostly_unknown and chinese.mostly_unknown
    assert fine.unknown_share == 0.0 and not fine.mostly_unknown
    assert emoji.record()["mostly_unknown"] is True and emoji.record()["unknown_share"] == 1.0
    assert "text 0: 3 of its 3 subword tokens (100%) are the tokenizer's unknown token [UNK]" in caplog.text
    assert "text 2" not in caplog.text
    # The threshold: more than half.
    [half] = fold.explain(["great 😀"], methods=["saliency"])
    assert half.unknown_share == 0.5 and not half.mostly_unknown and UNKNOWN_SHARE_THRESHOLD == 0.5


@pytest.mark.parametrize("spec", ["./no_such_model", "../no_such_model", "/no/such/model", "~/no_such_model",
                                  "models/x", "a/b/c"])
def test_a_classifier_path_that_does_not_exist_is_named_as_a_missing_folder(tmp_path, monkeypatch, spec):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models").mkdir()  # `models/x`: a relative folder under an existing one is a path
    with pytest.raises(InputError, match=f"classifier folder {spec} does not exist"):
        load_classifier(spec)


def test_only_a_plain_org_name_goes_to_the_hub_and_a_folder_without_config_is_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match=r"classifier 'no-org/no-model' could not be loaded"):
        load_classifier("no-org/no-model")  # HF_HUB_OFFLINE: the hub is asked and fails
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"classifier folder empty has no config.json"):
        load_classifier("empty")


def test_a_byte_order_mark_is_read_in_every_format(tmp_path):
    for name, content in (("in.txt", "the movie\n"), ("in.jsonl", '{"id": "a", "text": "the movie"}\n'),
                          ("in.csv", "id,text\na,the movie\n")):
        source = tmp_path / name
        source.write_text(content, encoding="utf-8-sig")
        texts, ids = read_inputs(source)
        assert texts == ["the movie"], name
        assert ids == (["1"] if name == "in.txt" else ["a"])


def test_blank_lines_of_a_txt_file_are_skipped_and_counted(tmp_path, caplog):
    source = tmp_path / "in.txt"
    source.write_text("the movie\n\n  \nbad film\n\n")
    with caplog.at_level(logging.INFO):
        texts, ids = read_inputs(source)
    assert texts == ["the movie", "bad film"] and ids == ["1", "4"]  # ids stay line numbers
    assert f"{source}: skipped 3 blank lines (lines 2, 3, 5)" in caplog.text
    source.write_text("\n \n")
    with pytest.raises(InputError, match="in.txt: no texts"):
        read_inputs(source)


def test_a_missing_models_dir_names_models_dir(tmp_path, capsys):
    missing = tmp_path / "elsewhere" / "06_models"
    for fold in ("heldout_sst2", "heldout_imdb"):
        with pytest.raises(InputError, match=r"models folder .*06_models does not exist .*--models-dir "
                                                    r"\(API: models_dir="):
            fold_folder(fold, missing)
    with pytest.raises(InputError, match=r"models folder .* does not exist .*--models-dir"):
        task_classifier("sst2", missing)
    assert main(["explain", "--fold", "heldout_sst2", "--models-dir", str(missing), "fine"]) == 2
    err = capsys.readouterr().err
    assert "--models-dir" in err and "kedro run" not in err


def test_the_jsonl_output_carries_the_new_flags(tiny_models_dir, tmp_path):
    out = tmp_path / "out.jsonl"
    assert run(tiny_models_dir, "😀 😂", "--output", str(out)) == 0
    [row] = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["mostly_unknown"] is True and row["unknown_share"] == 1.0 and row["offsets"] == [[0, 1], [2, 3]]
