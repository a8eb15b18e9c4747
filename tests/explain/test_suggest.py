"""Which examples to annotate (`core/selection.py`, `services/suggest.py`, `learned-attribution suggest`): the greedy
pick's known answers on hand-made points, the CLI on the tiny fold writing each format in a structure the rationale
reader imports back once a span is marked, and bad input in one line."""
import json

import numpy as np
import pandas as pd
import pytest

from learned_attribution.adapters.cli import main
from learned_attribution.core.data.rationales import read_rationale_file
from learned_attribution.core.errors import InputError
from learned_attribution.core.selection import weighted_farthest_first
from learned_attribution.services.bundle import task_classifier
from learned_attribution.services.suggest import annotation_file, suggest, uncertainty

TEXTS = ["the movie is great and fun", "the plot was boring", "a very bad film !", "this story is so slow",
         "the actors were funny", "it was not good", "love it", "hate this dull end", "a sharp and sad story",
         "the film was fun but the plot was slow", "very good", "not boring"]


# ---- the greedy pick on hand-made points ----------------------------------------------------------------------

def farthest_first(points: np.ndarray, k: int) -> list[int]:
    """Plain greedy k-center (Gonzalez) from the row nearest the mean, ties to the earlier row."""
    picked = [int(np.argmin(np.linalg.norm(points - points.mean(0), axis=1)))]
    while len(picked) < k:
        distance = np.min([np.linalg.norm(points - points[i], axis=1) for i in picked], axis=0)
        distance[picked] = -1
        picked.append(int(np.argmax(distance)))
    return picked


def test_equal_informativeness_is_farthest_first_from_the_most_typical_point():
    # the mean is (1/6, 0): (0, 0) first; then the two far ends (a tie at 4: the earlier first), then the two at 3;
    # (1, 0), close to (0, 0), comes last
    points = np.array([[0, 0], [4, 0], [-4, 0], [0, 3], [0, -3], [1, 0]], dtype=float)
    assert weighted_farthest_first(points, np.ones(6), 6) == [0, 1, 2, 3, 4, 5]
    rng = np.random.default_rng(0)
    for _ in range(5):
        cloud = rng.normal(size=(30, 4))
        for weight in (0.3, 0.0):  # all equal, even all zero: pure diversity
            assert weighted_farthest_first(cloud, np.full(30, weight), 10) == farthest_first(cloud, 10)


def test_the_more_uncertain_of_two_identical_points_wins_and_a_copy_comes_last():
    points = np.array([[0, 0], [0, 0], [5, 5]], dtype=float)
    assert weighted_farthest_first(points, np.array([0.1, 0.4, 0.2]), 1) == [1]
    assert weighted_farthest_first(points, np.array([0.1, 0.4, 0.2]), 3) == [1, 2, 0]
    assert weighted_farthest_first(points, np.array([0.4, 0.1, 0.2]), 2) == [0, 2]


def test_uncertainty_trades_against_distance():
    # 0 and 1 equally uncertain: 1 (nearer the mean) first; then 0 (0.5 x 1) beats the far but confident 2 (0.1 x 2)
    points = np.array([[0, 0], [1, 0], [3, 0]], dtype=float)
    assert weighted_farthest_first(points, np.array([0.5, 0.5, 0.1]), 3) == [1, 0, 2]
    # a confident point far enough away wins: 0.1 x 10 > 0.5 x 1
    points = np.array([[0, 0], [1, 0], [11, 0]], dtype=float)
    assert weighted_farthest_first(points, np.array([0.5, 0.5, 0.1]), 2) == [1, 2]
    assert list(uncertainty(np.array([[0.9, 0.1], [0.5, 0.5]]))) == pytest.approx([0.1, 0.5])
    with pytest.raises(ValueError, match="k=4"):
        weighted_farthest_first(points, np.ones(3), 4)
    with pytest.raises(ValueError, match="at least 0"):
        weighted_farthest_first(points, np.array([0.1, -0.1, 0.2]), 1)


# ---- the service and the CLI on the tiny fold -------------------------------------------------------------------

def test_the_pick_starts_at_the_most_uncertain_text_and_k_is_a_prefix(tiny_models_dir):
    classifier = task_classifier("sst2", tiny_models_dir)
    ids = [str(i + 1) for i in range(len(TEXTS))]
    everything = suggest(classifier, TEXTS, ids, len(TEXTS), max_length=32)
    picked = suggest(classifier, TEXTS, ids, 4, max_length=32)
    assert picked.to_dict("records") == everything.head(4).to_dict("records")  # greedy: k's pick starts k+1's
    assert picked["uncertainty"].iloc[0] == everything["uncertainty"].max()
    assert list(picked["rank"]) == [1, 2, 3, 4] and picked["id"].is_unique
    assert picked["uncertainty"].tolist() == pytest.approx((1 - picked["probability"]).tolist())
    with pytest.raises(InputError, match="my texts: 12 texts, fewer than k=13"):
        suggest(classifier, TEXTS, ids, 13, source="my texts")


def annotate(path, file_format: str):
    """What an annotator does with the file, here scripted: mark the first word of each text, then export."""
    if file_format == "label-studio":
        tasks = json.loads(path.read_text())
        export = [{"id": 100 + i, "data": task["data"], "annotations": [{"id": i, "was_cancelled": False, "result": [
            {"from_name": "rationale", "to_name": "text", "type": "labels",
             "value": {"start": 0, "end": task["data"]["text"].index(" "), "labels": ["Rationale"]}}]}]}
                  for i, task in enumerate(tasks)]
        exported = path.with_name("export.json")
        exported.write_text(json.dumps(export))
        return exported
    records = [json.loads(line) for line in path.read_text().splitlines()]
    for record in records:
        span = [0, record["text"].index(" ")]
        if file_format == "doccano":
            record["label"].append([*span, "Rationale"])
        else:
            record["spans"].append(span)
    exported = path.with_name(f"export_{file_format}.jsonl")
    exported.write_text("".join(json.dumps(record) + "\n" for record in records))
    return exported


@pytest.mark.parametrize("file_format, name, fields", [
    ("label-studio", "to_annotate.json", {"data"}),
    ("doccano", "to_annotate.jsonl", {"text", "label", "class", "source_id"}),
    ("spans", "to_annotate.jsonl", {"id", "text", "spans", "label"})])
def test_the_cli_writes_each_format_and_an_annotated_file_reads_back(tiny_models_dir, tmp_path, capsys, file_format,
                                                                     name, fields):
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS) + "\n")
    output = tmp_path / name
    assert main(["suggest", "--fold", "heldout_sst2", "--models-dir", str(tiny_models_dir), "--input", str(texts),
                 "--k", "5", "--output", str(output), "--format", file_format, "--device", "cpu"]) == 0
    assert f"wrote {output} ({file_format}: 5 of 12 texts" in capsys.readouterr().err
    classifier = task_classifier("sst2", tiny_models_dir)
    expected = suggest(classifier, TEXTS, [str(i + 1) for i in range(len(TEXTS))], 5, max_length=32)
    if file_format == "label-studio":
        records = json.loads(output.read_text())
        assert all(set(r) == {"data"} and set(r["data"]) == {"text", "label", "source_id"} for r in records)
        records = [r["data"] for r in records]
    else:
        records = [json.loads(line) for line in output.read_text().splitlines()]
        assert all(set(r) == fields for r in records)
        assert all(r["label" if file_format == "doccano" else "spans"] == [] for r in records)
    classes = [r["class" if file_format == "doccano" else "label"] for r in records]
    assert [r["text"] for r in records] == list(expected["text"]) and classes == list(expected["predicted"])
    assert [r.get("source_id", r.get("id")) for r in records] == list(expected["id"])  # the .txt line numbers
    if file_format == "spans":  # as written, nothing is marked: the reader refuses it on purpose
        with pytest.raises(InputError, match="none of the 5 examples marks a rationale word"):
            read_rationale_file(output, tokenizer=classifier.tokenizer)
    examples = read_rationale_file(annotate(output, file_format), tokenizer=classifier.tokenizer)
    assert list(examples["text"]) == list(expected["text"]) and list(examples["label"]) == classes
    assert all(rationale[0] == 1 and sum(rationale) == 1 for rationale in examples["word_rationale"])


def test_an_annotated_suggestion_refits_the_fold(tiny_models_dir, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS) + "\n")
    common = ["--fold", "heldout_sst2", "--models-dir", str(tiny_models_dir), "--device", "cpu"]
    assert main(["suggest", *common, "--input", str(texts), "--k", "4", "--output", str(tmp_path / "a.json")]) == 0
    exported = annotate(tmp_path / "a.json", "label-studio")
    # the run's own test examples beside the models, which `fit --rationales` checks the export against
    (tiny_models_dir.parent / "07_model_output").mkdir()
    pd.DataFrame({"example_id": ["t1"], "role": ["rationale_test"]}).to_parquet(
        tiny_models_dir.parent / "07_model_output" / "rationale_predictions_sst2.parquet")
    assert main(["fit", "--rationales", str(exported), *common, "--output", str(tmp_path / "mine")]) == 0
    assert "refit on 4 annotated examples" in capsys.readouterr().err


def test_bad_input_is_refused_in_one_line(tiny_models_dir, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS[:3]) + "\n")
    common = ["suggest", "--fold", "heldout_sst2", "--models-dir", str(tiny_models_dir), "--input", str(texts)]
    for args, message in (
            (["--k", "5", "--output", str(tmp_path / "a.json")],
             f"error: {texts}: 3 texts, fewer than --k 5 to pick from; ask for at most 3"),
            (["--k", "2", "--output", str(tmp_path / "a.json"), "--format", "brat"],
             "error: --format 'brat': unknown; choose one of label-studio, doccano, spans"),
            (["--k", "2", "--output", str(tmp_path / "a.json"), "--format", "doccano"],
             f"error: --output {tmp_path / 'a.json'}: a doccano file is read back as .jsonl; name it a.jsonl"),
            (["--k", "0", "--output", str(tmp_path / "a.json")], "error: --k 0: must be at least 1")):
        assert main([*common, *args]) == 2
        assert capsys.readouterr().err == message + "\n"
    assert not list(tmp_path.glob("a.*"))
    with pytest.raises(InputError, match="unknown; choose one of"):
        annotation_file(None, "csv")
