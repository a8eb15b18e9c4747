"""Character-span rationale files (`core.data.rationales.read_rationale_file`): span JSONL, a doccano export and a
Label Studio export of the same three texts (tests/data/rationale_spans, written by hand) give the same words and word
rationales, known here by hand; a word is a rationale word when a span overlaps any of its characters. Every bad
span, class or label choice is refused naming the file, the line or task and the span or the labels present."""
import json
import logging
from pathlib import Path

import pandas as pd
import pytest

from learned_attribution.core.data.classes import NO_CLASS
from learned_attribution.core.data.rationales import (RationaleFileError, merge_spans, read_rationale_file,
                                                      span_word_rationale)

FILES = Path(__file__).parent / "rationale_spans"
SPANS, DOCCANO, LABEL_STUDIO = FILES / "spans.jsonl", FILES / "doccano.jsonl", FILES / "label_studio.json"
TEXTS = ["The plot was fun, not boring!", "A great film.", "It is very bad, isn't it?"]
LABELS = [1, 1, 0]
# The BERT pre-tokenizer's words (punctuation apart) and the marked ones: "fun" [13, 16]; "not bor" [18, 25] crosses
# "not" into part of "boring"; "grea" [2, 6] is part of "great"; "ilm." [9, 13] crosses "film" and "."; "lm"
# [10, 12] overlaps it (merged); "bad" [11, 14]; "n't" [18, 21] covers part of "isn", "'" and "t". doccano and Label
# Studio also tag "It" [0, 2] as Target, which is not a rationale label.
EXPECTED_WORDS = [["The", "plot", "was", "fun", ",", "not", "boring", "!"],
                  ["A", "great", "film", "."],
                  ["It", "is", "very", "bad", ",", "isn", "'", "t", "it", "?"]]
EXPECTED_RATIONALE = [[0, 0, 0, 1, 0, 1, 1, 0],
                      [0, 1, 1, 1],
                      [0, 0, 0, 1, 0, 1, 1, 1, 0, 0]]
# Without a tokenizer: whitespace words, punctuation attached.
WHITESPACE_WORDS = [["The", "plot", "was", "fun,", "not", "boring!"],
                    ["A", "great", "film."],
                    ["It", "is", "very", "bad,", "isn't", "it?"]]
WHITESPACE_RATIONALE = [[0, 0, 0, 1, 1, 1], [0, 1, 1], [0, 0, 0, 1, 1, 0]]


@pytest.fixture(scope="module")
def bert_tokenizer(tiny_tokenizer):
    return tiny_tokenizer("bert")


def read(path, **kwargs):
    if path != SPANS:
        kwargs.setdefault("rationale_labels", ["Rationale"])
    return read_rationale_file(path, **kwargs)


def write_jsonl(path: Path, records) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


def test_the_three_formats_give_the_same_words_and_rationales(bert_tokenizer):
    frames = {path.name: read(path, tokenizer=bert_tokenizer) for path in (SPANS, DOCCANO, LABEL_STUDIO)}
    for name, frame in frames.items():
        assert frame["words"].tolist() == EXPECTED_WORDS, name
        assert frame["word_rationale"].tolist() == EXPECTED_RATIONALE, name
        assert frame["text"].tolist() == TEXTS and frame["label"].tolist() == LABELS, name
        assert (frame["role"] == "rationale_test").all() and frame.attrs["file"].endswith(name)
    assert frames["spans.jsonl"]["example_id"].tolist() == ["fun", "film", "bad"]
    assert frames["doccano.jsonl"]["example_id"].tolist() == ["1", "2", "3"]
    assert frames["label_studio.json"]["example_id"].tolist() == ["101", "102", "103"]


def test_without_a_tokenizer_the_words_are_whitespace_words():
    for path in (SPANS, DOCCANO, LABEL_STUDIO):
        frame = read(path)
        assert frame["words"].tolist() == WHITESPACE_WORDS, path.name
        assert frame["word_rationale"].tolist() == WHITESPACE_RATIONALE, path.name


def test_spans_are_merged_and_mapped_by_character_overlap():
    assert merge_spans([(9, 13), (2, 6), (10, 12), (13, 14)]) == [(2, 6), (9, 14)]
    offsets = [(0, 1), (2, 7), (8, 12), (12, 13)]  # "A great film."
    assert span_word_rationale(offsets, [(7, 8)]) == [0, 0, 0, 0]  # the space between great and film only
    assert span_word_rationale(offsets, [(6, 9)]) == [0, 1, 1, 0]  # the last character of one, the first of the next
    assert span_word_rationale(offsets, [(12, 13), (0, 1)]) == [1, 0, 0, 1]


def test_doccano_entities_read_as_the_label_shape(tmp_path, bert_tokenizer):
    entities = []
    for line in DOCCANO.read_text().splitlines():
        record = json.loads(line)
        entities.append({"id": record["id"], "text": record["text"], "class": record["class"],
                         "entities": [{"id": i, "start_offset": s, "end_offset": e, "label": tag}
                                      for i, (s, e, tag) in enumerate(record["label"])], "relations": []})
    frame = read(write_jsonl(tmp_path / "entities.jsonl", entities), tokenizer=bert_tokenizer)
    assert frame["words"].tolist() == EXPECTED_WORDS and frame["word_rationale"].tolist() == EXPECTED_RATIONALE


def test_label_studio_reads_the_first_annotation_not_cancelled_and_logs_the_rest(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="learned_attribution.core.data.rationales"):
        read(LABEL_STUDIO)
    assert "1 task(s) have more than one annotation not cancelled (task 2 (id 102)): 1 extra annotation(s) " \
           "ignored" in caplog.text
    tasks = json.loads(LABEL_STUDIO.read_text())
    tasks.append({"id": 104, "data": {"text": "Not annotated.", "label": 0}, "annotations": [
        {"id": 9, "was_cancelled": True, "result": []}]})
    (tmp_path / "ls.json").write_text(json.dumps(tasks), encoding="utf-8")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="learned_attribution.core.data.rationales"):
        frame = read(tmp_path / "ls.json")
    assert frame["example_id"].tolist() == ["101", "102", "103"]
    assert "1 of 4 task(s) have no annotation that is not cancelled (task 4 (id 104)): left out" in caplog.text


def test_one_label_in_the_export_is_the_rationale_label_by_default(tmp_path, caplog):
    lines = [json.loads(line) for line in DOCCANO.read_text().splitlines()]
    for record in lines:
        record["label"] = [span for span in record["label"] if span[2] == "Rationale"]
    with caplog.at_level(logging.INFO, logger="learned_attribution.core.data.rationales"):
        frame = read_rationale_file(write_jsonl(tmp_path / "one.jsonl", lines))
    assert frame["word_rationale"].tolist() == WHITESPACE_RATIONALE
    assert "one label in the export, 'Rationale'" in caplog.text


def test_the_rationale_labels_must_be_chosen_and_present():
    with pytest.raises(RationaleFileError, match=r"doccano.jsonl: the export has 2 labels \['Rationale', 'Target'\]: "
                                                 r"name the rationale ones with rationale_labels"):
        read_rationale_file(DOCCANO)
    with pytest.raises(RationaleFileError, match=r"label_studio.json: rationale label\(s\) \['Evidence'\] not in the "
                                                 r"export; labels present: \['Rationale', 'Target'\]"):
        read_rationale_file(LABEL_STUDIO, rationale_labels=["Rationale", "Evidence"])
    # Target alone: "It" in the third text, none in the others (skipped, not an error)
    assert read_rationale_file(DOCCANO, rationale_labels="Target")["word_rationale"].map(sum).tolist() == [0, 0, 1]


GOOD = {"id": "a", "text": "A great film.", "spans": [[2, 7]], "label": 1}


@pytest.mark.parametrize("bad, expected", [
    ({**GOOD, "spans": [[-1, 3]]}, "span [-1, 3] is outside the text (characters 0..13)"),
    ({**GOOD, "spans": [[2, 14]]}, "span [2, 14] is outside the text (characters 0..13)"),
    ({**GOOD, "spans": [[5, 5]]}, "span [5, 5] is empty or reversed (start must be below end)"),
    ({**GOOD, "spans": [[7, 2]]}, "span [7, 2] is empty or reversed (start must be below end)"),
    ({**GOOD, "text": "A great  film.", "spans": [[7, 9]]}, "span [7, 9] covers no word (only '  ')"),
    ({**GOOD, "spans": [[2, "7"]]}, "span [2, '7'] must have integer offsets"),
    ({**GOOD, "spans": [[2, 7, 9]]}, "'spans' entries must be [start, end] pairs, got [2, 7, 9]"),
    ({**GOOD, "rationale_spans": [[2, 7]]}, "give one of 'spans' and 'rationale_spans', not both"),
    ({key: value for key, value in GOOD.items() if key != "text"}, "missing 'text' (the text the spans index)"),
    ({**GOOD, "text": " "}, "'text' must be a non-empty string"),
    ({**GOOD, "label": "positive"}, "the class field 'label' must be an integer class in 0..1, got 'positive'"),
    ({**GOOD, "label": True}, "the class field 'label' must be an integer class in 0..1, got True"),
    ({**GOOD, "label": 2}, "the class field 'label' must be an integer class in 0..1, got 2"),
    (dict(GOOD), "id 'a' already used on line 1; ids must be unique"),
])
def test_each_bad_span_record_is_named_by_file_and_line(tmp_path, bad, expected):
    path = write_jsonl(tmp_path / "mine.jsonl", [GOOD, bad])
    with pytest.raises(RationaleFileError) as error:
        read_rationale_file(path)
    assert str(error.value).startswith(f"{path}, line 2: "), str(error.value)
    assert expected in str(error.value)


def test_a_record_without_its_class_gives_none_unless_the_class_field_is_named(tmp_path):
    classless = {key: value for key, value in GOOD.items() if key != "label"}
    path = write_jsonl(tmp_path / "mine.jsonl", [classless, {**GOOD, "id": "b", "label": None}])
    assert read_rationale_file(path)["label"].tolist() == [NO_CLASS, NO_CLASS]
    with pytest.raises(RationaleFileError, match=r"mine.jsonl, line 1: missing the class field 'label' \(fields: "
                                                 r"\['id', 'spans', 'text'\]\)"):
        read_rationale_file(path, class_field="label")


def test_a_span_covering_no_tokenizer_word_is_refused(tmp_path, bert_tokenizer):
    path = write_jsonl(tmp_path / "gap.jsonl", [{**GOOD, "text": "fun , \t ok", "spans": [[5, 8]]}])
    with pytest.raises(RationaleFileError, match=r"gap.jsonl, line 1: span \[5, 8\] covers no word \(only ' \\t '\)"):
        read_rationale_file(path, tokenizer=bert_tokenizer)


def test_bad_doccano_records_are_named(tmp_path):
    good = {"id": 1, "text": "A great film.", "label": [[2, 7, "Rationale"]], "class": 1}
    cases = [({**good, "label": [[2, 20, "Rationale"]]}, "line 2: span [2, 20] labelled Rationale is outside the text"),
             ({**good, "label": [[3, 2, "Rationale"]]}, "line 2: span [3, 2] labelled Rationale is empty or reversed"),
             ({**good, "label": [[2, 7]]}, "line 2: 'label' entries must be [start, end, tag]"),
             ({"id": 2, "text": "A great film.", "class": 1}, "line 2: no spans: a doccano record needs 'label'")]
    for bad, expected in cases:
        path = write_jsonl(tmp_path / "doccano.jsonl", [good, bad])
        with pytest.raises(RationaleFileError) as error:
            read_rationale_file(path)
        assert str(error.value).startswith(f"{path}, ") and expected in str(error.value), (bad, str(error.value))
    # the class read from another field
    path = write_jsonl(tmp_path / "doccano.jsonl", [{**good, "sentiment": 0}])
    assert read_rationale_file(path, class_field="sentiment")["label"].tolist() == [0]


def test_bad_label_studio_tasks_are_named_by_task_and_id(tmp_path):
    tasks = json.loads(LABEL_STUDIO.read_text())

    def refused(change, expected, **kwargs):
        changed = json.loads(json.dumps(tasks))
        change(changed[2])
        path = tmp_path / "ls.json"
        path.write_text(json.dumps(changed), encoding="utf-8")
        with pytest.raises(RationaleFileError) as error:
            read_rationale_file(path, rationale_labels=["Rationale"], **kwargs)
        assert str(error.value).startswith(f"{path}, task 3 (id 103): ") and expected in str(error.value), \
            str(error.value)

    def value(task):
        return task["annotations"][0]["result"][1]["value"]

    refused(lambda task: value(task).update(end=40), "span [11, 40] labelled Rationale is outside the text "
                                                     "(characters 0..25)")
    refused(lambda task: value(task).update(start=14, end=11), "span [14, 11] labelled Rationale is empty or reversed")
    refused(lambda task: task["data"].update(text="It is very bad,    isn't it?") or value(task).update(
        start=15, end=18), "span [15, 18] labelled Rationale covers no word (only '   ')")
    refused(lambda task: task["data"].pop("text"), "missing data 'text' (the text the spans index)")
    refused(lambda task: task["data"].pop("label"), "missing the class field data 'label' (fields: ['text'])")
    refused(lambda task: task["data"].update(label="negative"), "the class field data 'label' must be an integer "
                                                                "class in 0..1, got 'negative'")
    for task, sentiment in zip(tasks, (1, 1, 3)):  # the class read from another field of the data
        task["data"]["sentiment"] = sentiment
    refused(lambda task: None, "the class field data 'sentiment' must be an integer class in 0..1, got 3",
            class_field="sentiment")
    refused(lambda task: value(task).pop("labels"), "a 'labels' result needs 'value' with start, end and labels")


def test_other_files_keep_their_readers(tmp_path, caplog):
    # a .json list of word-level rows is read through datasets, not as Label Studio
    rows = [{"id": "a", "words": ["a", "fine", "film"], "rationale": [0, 1, 0], "label": 1}]
    (tmp_path / "rows.json").write_text(json.dumps(rows), encoding="utf-8")
    assert read_rationale_file(tmp_path / "rows.json")["words"].tolist() == [["a", "fine", "film"]]
    # a word-level .jsonl ignores the span arguments, and says so
    with caplog.at_level(logging.WARNING, logger="learned_attribution.core.data.rationales"):
        frame = read_rationale_file(write_jsonl(tmp_path / "words.jsonl", rows), rationale_labels=["R"],
                                    class_field="c")
    assert frame["word_rationale"].tolist() == [[0, 1, 0]] and frame["text"].tolist() == ["a fine film"]
    assert "rationale_labels=['R'], class_field='c' ignored (a word-level file)" in caplog.text
    # a record with a text but no spans is named
    with pytest.raises(RationaleFileError, match=r"t.jsonl, line 1: a record with 'text' needs its spans"):
        read_rationale_file(write_jsonl(tmp_path / "t.jsonl", [{"text": "a film", "label": 1}]))
    (tmp_path / "broken.json").write_text('[{"data": {"text": "a"}, "annotations": []', encoding="utf-8")
    with pytest.raises(RationaleFileError, match=r"broken.json: not valid JSON \("):
        read_rationale_file(tmp_path / "broken.json")


def test_the_catalog_dataset_reads_a_span_file_with_its_tokenizer(tmp_path, bert_tokenizer):
    from learned_attribution.adapters.kedro_datasets import RationaleFileDataset

    bert_tokenizer.save_pretrained(str(tmp_path / "tokenizer"))
    dataset = RationaleFileDataset(str(LABEL_STUDIO), rationale_labels=["Rationale"],
                                   tokenizer=str(tmp_path / "tokenizer"))
    frame = dataset.load()
    assert frame["words"].tolist() == EXPECTED_WORDS and frame["word_rationale"].tolist() == EXPECTED_RATIONALE
    pd.testing.assert_frame_equal(RationaleFileDataset(str(DOCCANO), rationale_labels="Rationale").load(),
                                  read(DOCCANO))
