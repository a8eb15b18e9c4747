"""Which examples to annotate (`core/picking.py`, `services/fewshot/suggest.py`, `learned-attribution suggest`): the
cluster pick's and the greedy pick's known answers on hand-made points, the CLI on the tiny fold writing each format in a structure the rationale
reader imports back once a span is marked, and bad input in one line."""
import json

import numpy as np
import pandas as pd
import pytest

from learned_attribution.adapters.cli import main
from learned_attribution.core.data.rationales import annotation_file, read_rationale_file
from learned_attribution.core.errors import InputError
from learned_attribution.core.picking import cluster_picks, weighted_farthest_first
from learned_attribution.services.bundle import task_classifier
from learned_attribution.core.models.projection import project_batch
from learned_attribution.services.fewshot.suggest import picked_rows, represent, suggest, uncertainty

TEXTS = ["the movie is great and fun", "the plot was boring", "a very bad film !", "this story is so slow",
         "the actors were funny", "it was not good", "love it", "hate this dull end", "a sharp and sad story",
         "the film was fun but the plot was slow", "very good", "not boring"]


# ---- the cluster pick on hand-made points -----------------------------------------------------------------------

# three far-apart blobs: B (3 rows, centre (100, 0) first), C (2 rows), A (5 rows, centre (0, 0) is row 5)
BLOBS = np.array([[100, 0], [101, 0], [99, 0], [0, 100], [0, 102],
                  [0, 0], [1, 0], [-1, 0], [0, 1], [0, -1]], dtype=float)


def test_the_typical_pick_takes_each_clusters_centre_largest_cluster_first():
    # A (5 rows) first, its centre; then B (3), its centre; then C's two rows tie: the earlier
    assert cluster_picks(BLOBS, 3, seed=0) == [5, 0, 3]
    for seed in range(4):  # k-means finds the blobs from any seed
        assert cluster_picks(BLOBS, 3, seed=seed) == [5, 0, 3]


def test_the_random_pick_takes_one_row_of_each_cluster_seeded():
    blob_of = {**dict.fromkeys(range(0, 3), "B"), **dict.fromkeys(range(3, 5), "C"),
               **dict.fromkeys(range(5, 10), "A")}
    picks = {seed: cluster_picks(BLOBS, 3, seed=seed, pick="random") for seed in range(8)}
    assert all([blob_of[i] for i in picked] == ["A", "B", "C"] for picked in picks.values())
    assert picks[3] == cluster_picks(BLOBS, 3, seed=3, pick="random")  # seeded
    assert len({tuple(p) for p in picks.values()}) > 1  # and not fixed


@pytest.mark.filterwarnings("ignore:Number of distinct clusters")  # k-means says so; the fill is the answer
def test_fewer_distinct_rows_than_k_fill_with_the_most_typical_rows_left():
    points = np.array([[0, 0], [0, 0], [0, 0], [5, 5], [5, 5]], dtype=float)
    picked = cluster_picks(points, 4, seed=0)
    assert sorted(picked[:2]) == [0, 3] and len(set(picked)) == 4
    assert cluster_picks(points, 0, seed=0) == []
    with pytest.raises(ValueError, match="k=6"):
        cluster_picks(points, 6, seed=0)
    with pytest.raises(ValueError, match="typical or random"):
        cluster_picks(points, 2, seed=0, pick="uncertain")


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
    with pytest.raises(ValueError, match="k=4"):
        weighted_farthest_first(points, np.ones(3), 4)
    with pytest.raises(ValueError, match="at least 0"):
        weighted_farthest_first(points, np.array([0.1, -0.1, 0.2]), 1)


# ---- the service and the CLI on the tiny fold -------------------------------------------------------------------

def test_the_pick_is_the_kept_rule_on_the_classifiers_representation(tiny_models_dir):
    classifier = task_classifier("sst2", tiny_models_dir)
    ids = [str(i + 1) for i in range(len(TEXTS))]
    picked = suggest(classifier, TEXTS, ids, 4, max_length=32)
    words = [text.split() for text in TEXTS]  # the tiny tokenizer's words are the whitespace ones
    input_ids = project_batch(words, [None] * len(words), classifier.tokenizer, 32)["input_ids"]
    _, features = represent(classifier, input_ids)
    assert list(picked["id"]) == [ids[i] for i in picked_rows(features, 4, seed=0)]  # SUGGESTION_RULE's rows
    assert list(picked["rank"]) == [1, 2, 3, 4] and picked["id"].is_unique
    assert picked.equals(suggest(classifier, TEXTS, ids, 4, max_length=32))  # seeded: the same pick again
    assert picked["uncertainty"].tolist() == pytest.approx((1 - picked["probability"]).tolist())
    assert list(uncertainty(np.array([[0.9, 0.1], [0.5, 0.5]]))) == pytest.approx([0.1, 0.5])
    with pytest.raises(InputError, match="my texts: 12 texts, fewer than k=13"):
        suggest(classifier, TEXTS, ids, 13, source="my texts")


CLASSES = ["negative", "positive"]  # the tiny classifier's id2label


def annotate(path, file_format: str, flip: bool = False):
    """What an annotator does with the file, here scripted: mark the first word of each text and, with `flip`,
    change the pre-selected class to the other one, then export as the tool would."""
    def other(name: str) -> str:
        return CLASSES[1 - CLASSES.index(name)]

    if file_format == "label-studio":
        tasks = json.loads(path.read_text())
        export = []
        for i, task in enumerate(tasks):
            result = [{"from_name": "rationale", "to_name": "text", "type": "labels",
                       "value": {"start": 0, "end": task["data"]["text"].index(" "), "labels": ["Rationale"]}}]
            if flip:  # the annotator's choice in the annotation; the prediction stays as imported
                predicted = task["predictions"][0]["result"][0]["value"]["choices"][0]
                result.append({"from_name": "class", "to_name": "text", "type": "choices",
                               "value": {"choices": [other(predicted)]}})
            export.append({"id": 100 + i, "data": task["data"], "predictions": task["predictions"],
                           "annotations": [{"id": i, "was_cancelled": False, "result": result}]})
        exported = path.with_name("export.json")
        exported.write_text(json.dumps(export))
        return exported
    records = [json.loads(line) for line in path.read_text().splitlines()]
    for number, record in enumerate(records, start=1):
        span = [0, record["text"].index(" ")]
        if file_format == "doccano":  # doccano's export gives each text its id
            record["id"] = number
            record["entities"].append([*span, "Rationale"])
            if flip:
                record["cats"] = [other(record["cats"][0])]
        else:
            record["spans"].append(span)
            if flip:
                record["label"] = other(record["label"])
    exported = path.with_name(f"export_{file_format}.jsonl")
    exported.write_text("".join(json.dumps(record) + "\n" for record in records))
    return exported


@pytest.mark.parametrize("file_format, name, fields", [
    ("label-studio", "to_annotate.json", {"data", "predictions"}),
    ("doccano", "to_annotate.jsonl", {"text", "entities", "cats", "classes", "source_id"}),
    ("spans", "to_annotate.jsonl", {"id", "text", "spans", "label", "classes"})])
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
    assert expected.attrs["class_names"] == CLASSES
    # the predicted class, by name, is only the default of the class the annotator chooses among the listed ones
    if file_format == "label-studio":
        tasks = json.loads(output.read_text())
        assert all(set(t) == fields and set(t["data"]) == {"text", "source_id", "classes"} for t in tasks)
        assert all(t["data"]["classes"] == [{"value": "negative"}, {"value": "positive"}] for t in tasks)
        choices = [t["predictions"][0]["result"] for t in tasks]
        assert all(len(c) == 1 and (c[0]["from_name"], c[0]["to_name"], c[0]["type"]) == ("class", "text", "choices")
                   for c in choices)
        classes = [c[0]["value"]["choices"][0] for c in choices]
        records = [t["data"] for t in tasks]
    else:
        records = [json.loads(line) for line in output.read_text().splitlines()]
        assert all(set(r) == fields and r["classes"] == CLASSES for r in records)
        assert all(r["entities" if file_format == "doccano" else "spans"] == [] for r in records)
        classes = [r["cats"][0] if file_format == "doccano" else r["label"] for r in records]
        if file_format == "doccano":
            assert all(len(r["cats"]) == 1 for r in records)
    assert [r["text"] for r in records] == list(expected["text"]) and classes == list(expected["label"])
    assert classes == [CLASSES[p] for p in expected["predicted"]]
    assert [r.get("source_id", r.get("id")) for r in records] == list(expected["id"])  # the .txt line numbers
    if file_format == "spans":  # as written, nothing is marked: the reader refuses it on purpose
        with pytest.raises(InputError, match="none of the 5 examples marks a rationale word"):
            read_rationale_file(output, tokenizer=classifier.tokenizer, class_names=CLASSES)
    # left as pre-selected, the class read is the predicted one
    examples = read_rationale_file(annotate(output, file_format), tokenizer=classifier.tokenizer,
                                   class_names=CLASSES)
    assert list(examples["text"]) == list(expected["text"]) and list(examples["label"]) == list(expected["predicted"])
    assert all(rationale[0] == 1 and sum(rationale) == 1 for rationale in examples["word_rationale"])
    # changed by the annotator, the class read is the annotator's, not the predicted one
    examples = read_rationale_file(annotate(output, file_format, flip=True), tokenizer=classifier.tokenizer,
                                   class_names=CLASSES)
    assert list(examples["label"]) == [1 - p for p in expected["predicted"]]
    # a class given by name needs the classifier's names: read without them, it is refused in one line
    with pytest.raises(InputError, match=r"must be an integer class in 0\.\.1, got '(negative|positive)' \(a class "
                                         r"by name needs the classifier's class names\)$"):
        read_rationale_file(annotate(output, file_format), tokenizer=classifier.tokenizer)


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
