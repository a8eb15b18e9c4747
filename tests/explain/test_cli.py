"""`learned-attribution explain`: input formats, JSONL and HTML outputs, and bad input named by file and line."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from learned_attribution.adapters.cli import main
from learned_attribution.core.data.texts import read_inputs
from learned_attribution.core.errors import InputError
from learned_attribution.services.bundle import task_classifier


def run(tiny_models_dir, *args):
    return main(["explain", "--fold", "heldout_sst2", "--models-dir", str(tiny_models_dir), "--device", "cpu", *args])


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_text_arguments_give_jsonl_and_an_offline_html_page(tiny_models_dir, tmp_path):
    out, page = tmp_path / "out.jsonl", tmp_path / "out.html"
    assert run(tiny_models_dir, "the movie is great .", "bad film", "--output", str(out), "--html", str(page),
               "--method", "expnet_plus", "--method", "integrated_gradients") == 0
    rows = records(out)
    assert [r["id"] for r in rows] == ["1", "2"] and rows[0]["words"] == ["the", "movie", "is", "great", "."]
    for row in rows:
        assert set(row) == {"id", "text", "words", "offsets", "predicted", "label", "probability", "truncated", "variants",
                            "unknown_share", "mostly_unknown", "explained", "explained_label", "explains_predicted",
                            "contrast", "contrast_label", "class_agnostic", "scores", "rationale"}
        assert row["explains_predicted"] and row["explained"] == row["predicted"]
        assert set(row["scores"]) == set(row["rationale"]) == {"expnet_plus", "integrated_gradients"}
        assert all(len(v) == len(row["words"]) for v in [*row["scores"].values(), *row["rationale"].values()])
        assert row["truncated"] is False
    # The classifier's own probability of its predicted class, computed here from its logits.
    classifier = task_classifier("sst2", tiny_models_dir)
    for row in rows:
        ids = classifier.tokenizer(row["words"], is_split_into_words=True, return_tensors="pt")
        with torch.no_grad():
            probabilities = torch.softmax(classifier.model(**ids).logits[0], dim=-1)
        assert row["predicted"] == int(probabilities.argmax())
        assert row["probability"] == pytest.approx(float(probabilities.max()), abs=1e-6)
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and "http" not in html and "<script" not in html
    assert html.count("<h3>") == 2 and "predicted " in html and "integrated_gradients" in html
    # IG is signed: both colours of the diverging scale appear when its scores have both signs.
    signs = {s > 0 for r in rows for s in r["scores"]["integrated_gradients"]}
    assert ("rgba(220,40,40" in html) and (("rgba(40,80,220" in html) == (False in signs))


def test_default_methods_are_expnet_plus_and_the_best_baseline_on_stdout(tiny_models_dir, capsys):
    assert run(tiny_models_dir, "the plot is dull") == 0
    [row] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert list(row["scores"]) == ["expnet_plus", "saliency"]


@pytest.mark.parametrize("name, content, extra, expected_ids, first_words", [
    ("in.txt", "the movie is great .\nbad film\n", [], ["1", "2"], ["the", "movie", "is", "great", "."]),
    ("in.jsonl", '{"id": "x1", "text": "bad film"}\n{"words": ["the", "movie", "is", "fun"]}\n', [], ["x1", "2"],
     ["bad", "film"]),
    ("in.csv", 'id,review\nr1,"the movie, so slow"\nr2,great fun\n', ["--text-column", "review"], ["r1", "r2"],
     ["the", "movie", ",", "so", "slow"]),  # the tokenizer's words: the comma apart
])
def test_input_files(tiny_models_dir, tmp_path, name, content, extra, expected_ids, first_words):
    source, out = tmp_path / name, tmp_path / "out.jsonl"
    source.write_text(content)
    assert run(tiny_models_dir, "--input", str(source), "--output", str(out), *extra) == 0
    rows = records(out)
    assert [r["id"] for r in rows] == expected_ids and rows[0]["words"] == first_words


@pytest.mark.parametrize("name, content, extra, message", [
    ("in.txt", b"\n  \n", [], "in.txt: no texts"),  # blank lines are skipped (tests/explain/test_input_checks.py)
    ("in.txt", b"fine\nbad \xff byte\n", [], "in.txt line 2: not valid UTF-8"),
    ("in.jsonl", b'{"text": "ok"}\n{"txt": "no"}\n', [], "in.jsonl line 2: expected an object with a 'text'"),
    ("in.jsonl", b'{"text": "ok"}\n{oops\n', [], "in.jsonl line 2: not valid JSON"),
    ("in.jsonl", b'{"words": ["ok", 3]}\n', [], "in.jsonl line 1: 'words' must be a list of strings"),
    ("in.csv", b"id,review\n1,good\n", [], "in.csv line 1: no column 'text' (columns: ['id', 'review'])"),
    ("in.csv", b"id,text\n1,good\n2,\n", [], "in.csv line 3: empty text"),
    ("in.tsv", b"good\n", [], "unknown input format '.tsv'"),
])
def test_bad_files_are_named_with_their_line(tiny_models_dir, tmp_path, capsys, name, content, extra, message):
    source = tmp_path / name
    source.write_bytes(content)
    assert run(tiny_models_dir, "--input", str(source), "--output", str(tmp_path / "o.jsonl"), *extra) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "o.jsonl").exists()


def test_bad_arguments(tiny_models_dir, capsys, tmp_path):
    assert run(tiny_models_dir, "   ") == 2
    assert "TEXT argument 1: empty text" in capsys.readouterr().err
    assert run(tiny_models_dir) == 2
    assert "give either TEXT arguments or --input FILE" in capsys.readouterr().err
    assert run(tiny_models_dir, "ok", "--method", "shap") == 2
    assert "unknown method 'shap'; available:" in capsys.readouterr().err
    assert main(["explain", "--fold", "heldout_sst2", "--models-dir", str(tmp_path), "ok"]) == 2
    assert "no trained fold at" in capsys.readouterr().err


def test_a_missing_input_file_is_named():
    with pytest.raises(InputError):
        read_inputs("missing.txt")


@pytest.mark.slow
def test_the_console_script_is_installed(tiny_models_dir, tmp_path):
    script = Path(sys.executable).with_name("learned-attribution")
    result = subprocess.run([str(script), "explain", "--fold", "heldout_sst2", "--models-dir", str(tiny_models_dir),
                             "--device", "cpu", "a sad story"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["words"] == ["a", "sad", "story"]


@pytest.mark.slow
def test_the_kedro_cli_still_loads_the_project(project_root):
    """Kedro imports `<package>.cli` as project commands: the console script must live elsewhere."""
    kedro = Path(sys.executable).with_name("kedro")
    result = subprocess.run([str(kedro), "registry", "list"], cwd=project_root, capture_output=True, text=True,
                            timeout=120, env={**os.environ, "KEDRO_DISABLE_TELEMETRY": "1"})
    assert result.returncode == 0, result.stderr[-2000:]
    assert "crosstask" in result.stdout
