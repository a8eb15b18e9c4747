"""HateXplain loader on hand-written `dataset.json` / `post_id_divisions.json` fixtures."""
from __future__ import annotations

import json

import pytest

from learned_attribution.core.data.hatexplain import aggregate_rationale, load_hatexplain
from learned_attribution.core.data.schema import DataFormatError


def _annotators(*labels: str) -> list[dict]:
    return [{"label": label, "annotator_id": i, "target": ["None"]} for i, label in enumerate(labels)]


# Official val/test posts: three annotators, fine labels, one rationale per annotator who said toxic.
OFFICIAL_POSTS = {
    "t1": {"post_id": "t1", "post_tokens": ["you", "are", "a", "vile", "idiot"],
           "annotators": _annotators("hatespeech", "offensive", "normal"),
           "rationales": [[0, 0, 0, 1, 1], [1, 0, 0, 1, 0]]},
    "t2": {"post_id": "t2", "post_tokens": ["nice", "day", "today"],
           "annotators": _annotators("normal", "normal", "offensive"),
           "rationales": [[1, 0, 0]]},
    "t3": {"post_id": "t3", "post_tokens": ["go", "away", "scum", "now"],
           "annotators": _annotators("offensive", "offensive", "hatespeech"),
           "rationales": [[0, 1, 1, 0], [0, 0, 1, 0], [1, 0, 1, 0]]},
    "v1": {"post_id": "v1", "post_tokens": ["hello", "there"],
           "annotators": _annotators("normal", "normal", "normal"), "rationales": []},
}
# Rebuilt train posts: one annotator entry, label toxic/normal, one (already unioned) rationale.
TRAIN_POSTS = {
    "r1": {"post_id": "r1", "post_tokens": ["dirty", "rat"], "annotators": [{"label": "toxic", "annotator_id": None,
                                                                             "target": None}],
           "rationales": [[1, 1]]},
    "r2": {"post_id": "r2", "post_tokens": ["good", "morning"], "annotators": [{"label": "normal", "annotator_id": None,
                                                                               "target": None}],
           "rationales": []},
}
DIVISIONS = {"train": ["r1", "r2", "gone1"], "val": ["v1"], "test": ["t1", "t2", "t3"]}


@pytest.fixture
def hatexplain_files(write_raw):
    def write(posts: dict | None = None, divisions: dict | None = None):
        posts = {**TRAIN_POSTS, **OFFICIAL_POSTS} if posts is None else posts
        return (write_raw("hatexplain/dataset.json", json.dumps(posts)),
                write_raw("hatexplain/post_id_divisions.json", json.dumps(divisions or DIVISIONS)))
    return write


def _rows(frame, role):
    return {row.example_id: row for row in frame[frame["role"] == role].itertuples()}


def test_binary_labels_roles_and_missing_ids(hatexplain_files):
    examples, skipped = load_hatexplain(*hatexplain_files())
    assert skipped.empty
    classifier = {r.example_id: (r.split, r.label) for r in examples.itertuples() if r.role.startswith("classifier")}
    # toxic = hatespeech or offensive by majority; the unrecoverable id gone1 is simply absent.
    assert classifier == {"r1": ("train", 1), "r2": ("train", 0), "v1": ("val", 0),
                          "t1": ("test", 1), "t2": ("test", 0), "t3": ("test", 1)}
    assert set(examples.loc[examples["split"] == "test", "role"]) == {"classifier_test", "rationale_test"}
    assert examples.loc[examples["role"].str.startswith("classifier"), "word_rationale"].isna().all()
    assert examples.loc[examples["example_id"] == "t1", "text"].iloc[0] == "you are a vile idiot"


def test_union_rationale_and_normal_posts_get_no_rationale_row(hatexplain_files):
    examples, _ = load_hatexplain(*hatexplain_files(), rationale_aggregation="union")
    rationale_test = _rows(examples, "rationale_test")
    # t2 is normal by majority although one annotator marked a word: no rationale row.
    assert set(rationale_test) == {"t1", "t3"}
    assert list(rationale_test["t1"].word_rationale) == [1, 0, 0, 1, 1]
    assert list(rationale_test["t3"].word_rationale) == [1, 1, 1, 0]
    assert set(_rows(examples, "rationale_train")) == {"r1"}
    assert _rows(examples, "rationale_val") == {}


def test_majority_rationale_needs_over_half_of_the_rationale_annotators(hatexplain_files):
    examples, _ = load_hatexplain(*hatexplain_files(), rationale_aggregation="majority")
    rationale_test = _rows(examples, "rationale_test")
    assert list(rationale_test["t1"].word_rationale) == [0, 0, 0, 1, 0]  # 2 lists: both must agree
    assert list(rationale_test["t3"].word_rationale) == [0, 0, 1, 0]  # 3 lists: at least 2


@pytest.mark.parametrize(("rationales", "how", "expected"), [
    ([[1, 0, 0], [0, 0, 1]], "union", [1, 0, 1]),
    ([[1, 0, 0], [0, 0, 1]], "majority", [0, 0, 0]),
    ([[1, 1, 0], [1, 0, 0], [0, 1, 1]], "majority", [1, 1, 0]),
    ([], "union", None),
])
def test_aggregate_rationale_known_answers(rationales, how, expected):
    assert aggregate_rationale(rationales, how) == expected


def test_three_class_on_official_posts(hatexplain_files):
    posts = {k: v for k, v in OFFICIAL_POSTS.items()}
    examples, skipped = load_hatexplain(*hatexplain_files(posts, {"train": [], "val": ["v1"], "test": ["t1", "t3"]}),
                                        classes="three_class")
    labels = {r.example_id: r.label for r in examples.itertuples() if r.role.startswith("classifier")}
    # normal 0, offensive 1, hatespeech 2; t1 (hatespeech, offensive, normal) has no majority: undecided,
    # left out and counted, never an error.
    assert labels == {"v1": 0, "t3": 1}
    assert skipped[["split", "location"]].values.tolist() == [["test", "post t1"]]
    assert "undecided" in skipped["reason"].iloc[0]


def test_three_class_meeting_a_toxic_label_is_an_error_naming_the_post(hatexplain_files):
    dataset, divisions = hatexplain_files()
    with pytest.raises(DataFormatError) as error:
        load_hatexplain(dataset, divisions, classes="three_class")
    message = str(error.value)
    assert dataset.path in message and "post r1" in message and "'toxic'" in message and "binary" in message


def test_three_class_lenient_skips_the_toxic_posts_and_records_them(hatexplain_files):
    examples, skipped = load_hatexplain(*hatexplain_files(), classes="three_class", strict=False)
    assert set(skipped["location"]) == {"post r1", "post t1"}  # r1: label toxic; t1: undecided
    assert "r1" not in set(examples["example_id"]) and "r2" in set(examples["example_id"])


DELETE = object()  # a MALFORMED change that removes the field
MALFORMED = {
    "empty text": ({"post_tokens": []}, "empty text"),
    "post_tokens of the wrong type": ({"post_tokens": "you are vile"}, "'post_tokens' must be a list of strings"),
    "no post_tokens": ({"post_tokens": DELETE}, "no 'post_tokens' field"),
    "annotators of the wrong type": ({"annotators": "offensive"}, "'annotators' must be a non-empty list"),
    "annotator without a string label": ({"annotators": [{"label": 3}]},
                                         "annotators[0] must be an object with a string 'label'"),
    "no annotators": ({"annotators": DELETE}, "no 'annotators' field"),
    "rationales of the wrong type": ({"rationales": "1 0 1"}, "'rationales' must be a list of 0/1 lists"),
    "post is not an object": (["you", "are"], "expected a JSON object, got list"),
    "label not in the label set": ({"annotators": _annotators("spam", "normal", "normal")}, "'spam'"),
    "rationale length": ({"rationales": [[1, 0]]}, "rationale has 2 entries but the text has 5 words"),
    "rationale values": ({"rationales": [[1, 0, 0, 0, 7]]}, "must be 0 or 1"),
}


def _changed_t1(change) -> dict:
    if not isinstance(change, dict):
        return {**TRAIN_POSTS, **OFFICIAL_POSTS, "t1": change}
    record = {k: v for k, v in {**OFFICIAL_POSTS["t1"], **change}.items() if v is not DELETE}
    return {**TRAIN_POSTS, **OFFICIAL_POSTS, "t1": record}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_post_strict_raises_naming_file_and_post(hatexplain_files, case):
    change, reason = MALFORMED[case]
    posts = _changed_t1(change)
    dataset, divisions = hatexplain_files(posts)
    with pytest.raises(DataFormatError) as error:
        load_hatexplain(dataset, divisions)
    assert f"{dataset.path}, post t1" in str(error.value) and reason in str(error.value)


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_post_lenient_is_skipped_and_recorded(hatexplain_files, case):
    change, reason = MALFORMED[case]
    posts = _changed_t1(change)
    dataset, divisions = hatexplain_files(posts)
    examples, skipped = load_hatexplain(dataset, divisions, strict=False)
    assert "t1" not in set(examples["example_id"])
    assert {"t3", "r1", "v1"} <= set(examples["example_id"])
    assert len(skipped) == 1
    record = skipped.iloc[0]
    assert (record["task"], record["split"], record["role"], record["file"], record["location"]) == \
        ("hatexplain", "test", "classifier_test", dataset.path, "post t1")
    assert reason in record["reason"]


@pytest.mark.parametrize("rationales", [DELETE, [], None])
def test_a_toxic_post_without_rationales_is_a_counted_skip_of_the_rationale_set(hatexplain_files, rationales):
    examples, skipped = load_hatexplain(*hatexplain_files(_changed_t1({"rationales": rationales})))
    assert "t1" in _rows(examples, "classifier_test") and "t1" not in _rows(examples, "rationale_test")
    assert skipped[["split", "role", "location"]].values.tolist() == [["test", "rationale_test", "post t1"]]
    assert "toxic post without rationales" in skipped["reason"].iloc[0]


def test_json_that_does_not_parse_names_the_file_and_line(write_raw):
    dataset = write_raw("dataset.json", '{\n "a": {"post_tokens": [1,}\n}')
    divisions = write_raw("divisions.json", json.dumps(DIVISIONS))
    with pytest.raises(DataFormatError, match=r"dataset\.json, line 2 column"):
        load_hatexplain(dataset, divisions, strict=False)


def test_divisions_without_a_split_is_an_error_naming_the_file(hatexplain_files):
    dataset, divisions = hatexplain_files(divisions={"train": [], "val": []})
    with pytest.raises(DataFormatError, match=r"post_id_divisions\.json: no 'test' list"):
        load_hatexplain(dataset, divisions)


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"classes": "five_class"}, "hatexplain.classes"),
    ({"rationale_aggregation": "mean"}, "hatexplain.rationale_aggregation"),
])
def test_bad_parameters_are_named(hatexplain_files, kwargs, name):
    with pytest.raises(ValueError, match=name):
        load_hatexplain(*hatexplain_files({}, {"train": [], "val": [], "test": []}), **kwargs)
