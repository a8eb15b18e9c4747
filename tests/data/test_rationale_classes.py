"""A class by name or by index (`core.data.classes.resolve_class`), in every rationale file format: each rule of the
resolution, a file whose class is `toxic` read for a classifier with that class and refused in one line for one
without it, and the annotator's class choice of each annotation tool (Label Studio's Choices, doccano's category,
span JSONL's label) taken over the predicted class written as its default."""
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from learned_attribution.core.data.classes import NO_CLASS, class_names_of, resolve_class
from learned_attribution.core.data.rationales import RationaleFileError, build_format, read_rationale_file
from learned_attribution.core.data.rationales.label_studio import LABEL_CONFIG
from learned_attribution.core.errors import InputError

TOXIC = ("normal", "toxic")
SENTIMENT = ("negative", "positive")
DOCS = Path(__file__).parents[2] / "docs" / "external_rationales.md"


# ---- the rules ----------------------------------------------------------------------------------------------------

def test_an_integer_is_an_index_within_the_classes():
    assert resolve_class(1, TOXIC, "label") == 1 and resolve_class(0, TOXIC, "label") == 0
    assert resolve_class(np.int64(1), TOXIC, "label") == 1  # a table column's or an argmax's integer
    for bad in (2, -1):
        with pytest.raises(InputError) as refused:
            resolve_class(bad, TOXIC, "my.jsonl, line 3: 'label'")
        assert str(refused.value) == (f"my.jsonl, line 3: 'label' must be a class name or index, got {bad}; the "
                                      "classifier's classes: 0 'normal', 1 'toxic'")
    for bad in (True, False, np.bool_(True), 1.0, None, [1]):  # a bool is not an index, nor is a float
        with pytest.raises(InputError, match=r"^label must be a class name or index, got "):
            resolve_class(bad, TOXIC, "label")


def test_a_name_is_its_class_and_wins_over_a_number():
    assert resolve_class("toxic", TOXIC, "label") == 1 and resolve_class("normal", TOXIC, "label") == 0
    # classes named "1" and "0", in that order: "1" is the class named "1", index 0; the integer 1 is index 1
    assert resolve_class("1", ("1", "0"), "label") == 0 and resolve_class(1, ("1", "0"), "label") == 1


def test_a_string_of_digits_is_an_index_otherwise():
    assert resolve_class("1", TOXIC, "label") == 1 and resolve_class("0", TOXIC, "label") == 0
    with pytest.raises(InputError, match=r"^label must be a class name or index, got '2'; the classifier's classes: "
                                         r"0 'normal', 1 'toxic'$"):
        resolve_class("2", TOXIC, "label")
    for bad in ("-1", " 1", "1.0", "１"):  # not ASCII digits: a name, and no class has it
        with pytest.raises(InputError, match="must be a class name or index"):
            resolve_class(bad, TOXIC, "label")


def test_transformers_default_names_take_the_name_and_the_index():
    default = ("LABEL_0", "LABEL_1")
    assert [resolve_class(value, default, "label") for value in ("LABEL_1", 1, "1")] == [1, 1, 1]
    assert resolve_class("LABEL_0", default, "label") == 0
    with pytest.raises(InputError, match="did you mean 'LABEL_1'"):
        resolve_class("label_1", default, "label")


def test_an_unknown_name_lists_the_classes_and_suggests_a_near_miss():
    with pytest.raises(InputError) as refused:
        resolve_class("toxc", TOXIC, "export.json, task 3 (id 103): the annotation's 'class' choice")
    assert str(refused.value) == ("export.json, task 3 (id 103): the annotation's 'class' choice must be a class name "
                                  "or index, got 'toxc'; the classifier's classes: 0 'normal', 1 'toxic'; did you "
                                  "mean 'toxic'? (names match exactly, case included)")
    # names match exactly: another case is refused, with the suggestion
    with pytest.raises(InputError, match=r"got 'Toxic'; .* did you mean 'toxic'\?"):
        resolve_class("Toxic", TOXIC, "label")
    with pytest.raises(InputError) as refused:  # nothing near: no suggestion
        resolve_class("sarcastic", TOXIC, "label")
    assert "did you mean" not in str(refused.value) and "\n" not in str(refused.value)


def test_without_names_only_integers_are_classes():
    assert resolve_class(1, None, "label", n_classes=2) == 1
    with pytest.raises(InputError, match=r"^label must be an integer class in 0\.\.1, got 'toxic' \(a class by name "
                                         r"needs the classifier's class names\)$"):
        resolve_class("toxic", None, "label", n_classes=2)
    with pytest.raises(InputError, match=r"^label must be an integer class in 0\.\.1, got '1' "):
        resolve_class("1", None, "label", n_classes=2)
    with pytest.raises(InputError, match=r"^label must be an integer class in 0\.\.2, got 3$"):
        resolve_class(3, None, "label", n_classes=3)
    with pytest.raises(RationaleFileError):  # the readers' own error
        resolve_class(3, None, "label", n_classes=2, error=RationaleFileError)
    with pytest.raises(ValueError, match="n_classes"):
        resolve_class(1, None, "label")
    with pytest.raises(ValueError, match="unique"):
        resolve_class(1, ("a", "a"), "label")


def test_the_names_of_a_classifier_in_index_order():
    assert class_names_of({1: "toxic", 0: "normal"}, 2) == TOXIC
    assert class_names_of({"0": "normal", "1": "toxic"}, 2) == TOXIC  # keys as a JSON config holds them
    assert class_names_of({0: "normal"}, 2) is None and class_names_of(None, 2) is None


# ---- a file whose class is `toxic`, in every format ---------------------------------------------------------------

def write_jsonl(path: Path, records: list) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


def toxic_files(folder: Path, with_class: bool = True) -> dict[str, tuple[Path, str]]:
    """One file per format whose second example's class is `toxic` (the first's is 0), with the field it is in;
    without `with_class`, the same files with no class field (a Label Studio task without a class choice)."""
    words = [{"id": "a", "words": ["you", "are", "fine"], "rationale": [0, 0, 1], "label": 0},
             {"id": "b", "words": ["you", "idiot"], "rationale": [0, 1], "label": "toxic"}]
    frame = pd.DataFrame({"id": ["a", "b"], "words": [json.dumps(r["words"]) for r in words],
                          "rationale": [json.dumps(r["rationale"]) for r in words], "label": ["0", "toxic"]})
    if not with_class:
        words = [{k: v for k, v in r.items() if k != "label"} for r in words]
        frame = frame.drop(columns="label")
    frame.to_csv(folder / "words.csv", index=False)
    frame.assign(words=[r["words"] for r in words], rationale=[r["rationale"] for r in words]).to_parquet(
        folder / "words.parquet")
    spans = [{"id": "a", "text": "you are fine", "spans": [[8, 12]], "label": 0},
             {"id": "b", "text": "you idiot", "spans": [[4, 9]], "label": "toxic"}]
    doccano = [{"id": 1, "text": "you are fine", "label": [[8, 12, "R"]], "class": 0},
               {"id": 2, "text": "you idiot", "label": [[4, 9, "R"]], "class": "toxic"}]
    categories = [{"id": 1, "text": "you are fine", "entities": [[8, 12, "R"]], "cats": [0]},
                  {"id": 2, "text": "you idiot", "entities": [[4, 9, "R"]], "cats": ["toxic"]}]
    tasks = [{"id": 1, "data": {"text": "you are fine", "label": 0}, "annotations": [{"result": [
        {"from_name": "rationale", "to_name": "text", "type": "labels",
         "value": {"start": 8, "end": 12, "labels": ["R"]}}]}]},
             {"id": 2, "data": {"text": "you idiot"}, "annotations": [{"result": [
                 {"from_name": "rationale", "to_name": "text", "type": "labels",
                  "value": {"start": 4, "end": 9, "labels": ["R"]}},
                 {"from_name": "class", "to_name": "text", "type": "choices", "value": {"choices": ["toxic"]}}]}]}]
    if not with_class:
        spans, doccano, categories = ([{k: v for k, v in r.items() if k not in ("label", "class", "cats")}
                                       | ({"label": r["label"]} if name == "doccano" else {}) for r in records]
                                      for name, records in (("spans", spans), ("doccano", doccano),
                                                            ("cats", categories)))
        for task in tasks:
            task["data"].pop("label", None)
            task["annotations"][0]["result"] = [r for r in task["annotations"][0]["result"] if r["type"] != "choices"]
    (folder / "ls.json").write_text(json.dumps(tasks), encoding="utf-8")
    return {"words.jsonl": (write_jsonl(folder / "words.jsonl", words), "line 2: 'label'"),
            "words.csv": (folder / "words.csv", "row 2: 'label'"),
            "words.parquet": (folder / "words.parquet", "row 2: 'label'"),
            "spans": (write_jsonl(folder / "spans.jsonl", spans), "line 2: the class field 'label'"),
            "doccano": (write_jsonl(folder / "doccano.jsonl", doccano), "line 2: the class field 'class'"),
            "doccano cats": (write_jsonl(folder / "cats.jsonl", categories), "line 2: the category 'cats'"),
            "label studio": (folder / "ls.json", "task 2 (id 2): the annotation's 'class' choice")}


@pytest.mark.parametrize("name", ["words.jsonl", "words.csv", "words.parquet", "spans", "doccano", "doccano cats",
                                  "label studio"])
def test_a_toxic_class_reads_for_a_classifier_that_has_it_and_is_refused_by_one_that_has_not(tmp_path, name):
    path, where = toxic_files(tmp_path)[name]
    examples = read_rationale_file(path, class_names=list(TOXIC))
    assert examples["label"].tolist() == [0, 1] and examples.attrs["class_names"] == list(TOXIC)
    with pytest.raises(RationaleFileError) as refused:
        read_rationale_file(path, class_names=list(SENTIMENT))
    message = str(refused.value)
    assert message.startswith(f"{path}, {where} must be a class name or index, got 'toxic'; the classifier's "
                              "classes: 0 'negative', 1 'positive'"), message
    assert "\n" not in message
    # no names: integers only, as before (a table's column holding a name is text: its "0" is refused too)
    with pytest.raises(RationaleFileError, match=r"must be an integer class in 0\.\.1, got '(toxic|0)' \(a class by "
                                                 r"name needs the classifier's class names\)$"):
        read_rationale_file(path)


@pytest.mark.parametrize("name", ["words.jsonl", "words.csv", "words.parquet", "spans", "doccano", "label studio"])
def test_a_file_without_a_class_field_gives_no_class(tmp_path, name):
    """Accepted, every example with `NO_CLASS` (scored in predicted mode only); a class field the user names and the
    file lacks is refused."""
    path, _ = toxic_files(tmp_path, with_class=False)[name]
    examples = read_rationale_file(path, class_names=list(TOXIC))
    assert examples["label"].tolist() == [NO_CLASS, NO_CLASS] and len(examples["word_rationale"]) == 2
    if name in ("spans", "doccano", "label studio"):
        with pytest.raises(RationaleFileError, match="missing the class field"):
            read_rationale_file(path, class_names=list(TOXIC), class_field="verdict")


def test_class_names_and_n_classes_must_agree(tmp_path):
    path, _ = toxic_files(tmp_path)["spans"]
    assert read_rationale_file(path, 2, class_names=TOXIC)["label"].tolist() == [0, 1]
    with pytest.raises(InputError, match=r"class_names=\['normal', 'toxic'\] names 2 classes but n_classes=3"):
        read_rationale_file(path, 3, class_names=TOXIC)
    with pytest.raises(InputError, match="give a list of names"):
        read_rationale_file(path, class_names="toxic")


# ---- the annotator's choice ---------------------------------------------------------------------------------------

def ls_task(annotation: list | None, prediction: list | None, data_label=None) -> dict:
    """A Label Studio task with a marked word, the class choices given, and perhaps an imported data class."""
    span = {"from_name": "rationale", "to_name": "text", "type": "labels",
            "value": {"start": 4, "end": 9, "labels": ["R"]}}

    def choice(names):
        return [{"from_name": "class", "to_name": "text", "type": "choices", "value": {"choices": names}}]

    task = {"id": 7, "data": {"text": "you idiot", **({} if data_label is None else {"label": data_label})},
            "annotations": [{"result": [span] + (choice(annotation) if annotation is not None else [])}]}
    if prediction is not None:
        task["predictions"] = [{"result": choice(prediction)}]
    return task


@pytest.mark.parametrize("annotation, prediction, data_label, expected", [
    (["normal"], ["toxic"], None, 0),   # the annotator changed the pre-selected class: theirs wins
    (["toxic"], ["toxic"], None, 1),    # kept it
    (None, ["toxic"], None, 1),         # left it (no choice in the annotation): the prediction's
    (None, ["normal"], 1, 0),           # a prediction's choice before an imported class
    (["normal"], None, 1, 0),           # the annotator's choice before an imported class
    (None, None, 1, 1),                 # an old export: the class imported with the text
])
def test_label_studio_takes_the_annotators_choice_then_the_prediction(tmp_path, annotation, prediction, data_label,
                                                                      expected):
    path = tmp_path / "export.json"
    path.write_text(json.dumps([ls_task(annotation, prediction, data_label)]), encoding="utf-8")
    assert read_rationale_file(path, class_names=TOXIC)["label"].tolist() == [expected]


def test_label_studio_refuses_no_class_or_several(tmp_path):
    path = tmp_path / "export.json"
    for task, expected in (
            (ls_task(["normal", "toxic"], None), "the annotation's 'class' choice holds 2 classes ['normal', "
                                                 "'toxic']: a rationale supports one class, choose one"),
            (ls_task([], None), "the annotation's 'class' choice holds no class")):
        path.write_text(json.dumps([task]), encoding="utf-8")
        with pytest.raises(RationaleFileError) as refused:
            read_rationale_file(path, class_names=TOXIC)
        assert str(refused.value).startswith(f"{path}, task 1 (id 7): {expected}"), str(refused.value)
    # no class anywhere: the task gives none (predicted mode only); a class_field named but absent is refused
    path.write_text(json.dumps([ls_task(None, None)]), encoding="utf-8")
    assert read_rationale_file(path, class_names=TOXIC)["label"].tolist() == [NO_CLASS]
    with pytest.raises(RationaleFileError, match=r"missing the class field data 'verdict'"):
        read_rationale_file(path, class_names=TOXIC, class_field="verdict")
    # a Choices control of another name is named by class_field, and said when it is not
    task = ls_task(None, None)
    task["annotations"][0]["result"].append({"from_name": "verdict", "to_name": "text", "type": "choices",
                                             "value": {"choices": ["toxic"]}})
    path.write_text(json.dumps([task]), encoding="utf-8")
    with pytest.raises(RationaleFileError, match=r"the annotation has choices of \['verdict'\]"):
        read_rationale_file(path, class_names=TOXIC)
    assert read_rationale_file(path, class_names=TOXIC, class_field="verdict")["label"].tolist() == [1]


def test_doccano_takes_the_category_and_refuses_a_disagreement(tmp_path):
    record = {"id": 1, "text": "you idiot", "entities": [[4, 9, "R"]], "cats": ["toxic"], "class": 0}
    path = write_jsonl(tmp_path / "d.jsonl", [record])
    assert read_rationale_file(path, class_names=TOXIC)["label"].tolist() == [1]  # the annotator's category wins
    assert read_rationale_file(path, class_names=TOXIC, class_field="class")["label"].tolist() == [0]  # as named
    # doccano's category objects, and one class chosen by several annotators
    path = write_jsonl(tmp_path / "d.jsonl", [{**record, "cats": [{"id": 3, "label": "toxic"}, "toxic"]}])
    assert read_rationale_file(path, class_names=TOXIC)["label"].tolist() == [1]
    for cats, expected in ((["toxic", "normal"], "holds 2 classes ['toxic', 'normal']"), ([], "holds no class")):
        path = write_jsonl(tmp_path / "d.jsonl", [{**record, "cats": cats}])
        with pytest.raises(RationaleFileError, match=re.escape(f"d.jsonl, line 1: the category 'cats' {expected}")):
            read_rationale_file(path, class_names=TOXIC)


@pytest.mark.parametrize("name", ["label-studio", "doccano", "spans"])
def test_a_written_suggestion_changed_by_the_annotator_reads_the_annotators_class(tmp_path, name):
    from learned_attribution.core.data.rationales import SpanRecord

    file_format = build_format(name)
    written = file_format.write([SpanRecord("7", "you idiot", 1)], class_names=TOXIC)  # predicted: toxic
    assert "toxic" in written and "normal" in written  # the file lists the classes to choose from
    if name == "label-studio":
        task = json.loads(written)[0]
        assert task["data"]["classes"] == [{"value": "normal"}, {"value": "toxic"}]
        export = [{**ls_task(["normal"], None), "predictions": task["predictions"]}]  # the annotator chose normal
        text = json.dumps(export)
    else:
        record = json.loads(written)
        assert record["classes"] == list(TOXIC)
        if name == "doccano":
            record.update(id=1, entities=[[4, 9, "R"]], cats=["normal"])
        else:
            record.update(spans=[[4, 9]], label="normal")
        text = json.dumps(record) + "\n"
    path = tmp_path / f"export{file_format.suffix}"
    path.write_text(text, encoding="utf-8")
    assert read_rationale_file(path, class_names=TOXIC)["label"].tolist() == [0]


def test_the_docs_show_the_label_config_the_writer_fills():
    assert LABEL_CONFIG.strip() in DOCS.read_text(encoding="utf-8")


def test_the_catalog_dataset_reads_names_of_the_explained_task(tmp_path):
    from kedro.io import DatasetError

    from learned_attribution.adapters.kedro_datasets import RationaleFileDataset

    path, _ = toxic_files(tmp_path)["spans"]
    assert RationaleFileDataset(str(path), classifier_task="hatexplain").load()["label"].tolist() == [0, 1]
    assert RationaleFileDataset(str(path), class_names=list(TOXIC)).load()["label"].tolist() == [0, 1]
    with pytest.raises(DatasetError, match=r"got 'toxic'; the classifier's classes: 0 'negative', 1 'positive'"):
        RationaleFileDataset(str(path), classifier_task="sst2").load()
    with pytest.raises(DatasetError, match=r"must be an integer class in 0\.\.1, got 'toxic'"):
        RationaleFileDataset(str(path)).load()  # no classifier named: integers only
