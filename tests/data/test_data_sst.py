"""SST-2: PTB tree parsing, the SPEC §1 phrase-label rationale rule, and the GLUE / tree loaders."""
from __future__ import annotations

import pytest

from learned_attribution.core.data.schema import BadRecords, DataFormatError
from learned_attribution.core.data.sst import (
    TreeParseError,
    load_sst2,
    load_sst_trees,
    parse_tree,
    polarity,
    tree_rationale,
    unescape_ptb,
)

# A negative sentence whose negation "not good" is a negative 2-word phrase, inside a negative 3-word phrase.
NEGATION = "(1 (2 The) (1 (2 movie) (1 (2 was) (1 (2 not) (3 good)))))"
# A positive sentence: a 4-word positive phrase of neutral words, and one positive word.
LONG_PHRASE = "(4 (4 (2 every) (2 single) (2 scene) (2 works)) (3 wow))"
# A positive sentence with a negative word in it.
MIXED = "(3 (1 bad) (3 (2 but) (4 fun)))"
NEUTRAL = "(2 (2 it) (2 exists))"


def _rationale(tree: str, max_span: int):
    words, nodes = parse_tree(tree)
    return tree_rationale(nodes, len(words), max_span)


def test_parse_tree_words_and_node_spans():
    words, nodes = parse_tree(NEGATION)
    assert words == ["The", "movie", "was", "not", "good"]
    assert [(n.label, n.start, n.end) for n in nodes] == [
        (1, 0, 5), (2, 0, 1), (1, 1, 5), (2, 1, 2), (1, 2, 5), (2, 2, 3), (1, 3, 5), (2, 3, 4), (3, 4, 5)]
    assert [len(n.children) for n in nodes[:3]] == [2, 0, 2]


def test_ptb_escapes_and_a_leaf_with_a_space():
    words, nodes = parse_tree(r"(3 (2 -LRB-) (3 (3 (2 8 1\/2) (2 \*stars\*)) (2 -RRB-)))")
    assert words == ["(", "8 1/2", "*stars*", ")"]
    assert (nodes[3].start, nodes[3].end) == (1, 3)
    assert [unescape_ptb(w) for w in ("-LSB-", "-RSB-", "-LCB-", "-RCB-", r"a\/b")] == ["[", "]", "{", "}", "a/b"]


def test_polarity_of_sst_labels():
    assert [polarity(label) for label in range(5)] == [0, 0, None, 1, 1]


@pytest.mark.parametrize(("max_span", "expected"), [
    (1, [0, 0, 0, 0, 0]),  # no single word is negative ("good" is positive)
    (2, [0, 0, 0, 1, 1]),  # "not good": both words
    (3, [0, 0, 1, 1, 1]),  # "was not good"
    (4, [0, 1, 1, 1, 1]),
])
def test_negation_in_a_negative_sentence(max_span, expected):
    assert _rationale(NEGATION, max_span) == (0, expected)


@pytest.mark.parametrize(("max_span", "expected"), [
    (3, [0, 0, 0, 0, 1]),  # the 4-word phrase is longer than max_span: its words stay unmarked
    (4, [1, 1, 1, 1, 1]),  # span limit is inclusive
])
def test_phrase_longer_than_max_span_does_not_mark_its_words(max_span, expected):
    assert _rationale(LONG_PHRASE, max_span) == (1, expected)


def test_only_the_sentence_polarity_marks_words():
    assert _rationale(MIXED, 2) == (1, [0, 1, 1])
    # A sentence no longer than max_span is itself a short phrase of its own polarity: all words marked.
    assert _rationale(MIXED, 3) == (1, [1, 1, 1])


def test_neutral_root_has_no_rationale():
    assert _rationale(NEUTRAL, 3) is None


@pytest.mark.parametrize(("tree", "message"), [
    ("(3 (2 good)", "expected ')'"),
    ("(7 (2 a))", "label 7 outside 0-4"),
    ("(x (2 a))", "expected a 0-4 label"),
    ("(3 (2 a)) extra", "unexpected text after the tree"),
    ("(3 )", "leaf without a word"),
    ("3 (2 a)", "expected '('"),
])
def test_trees_that_do_not_parse(tree, message):
    with pytest.raises(TreeParseError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_tree(tree)


def test_tree_file_keeps_polar_sentences_with_line_numbers(write_raw):
    trees = write_raw("trees/test.txt", "\n".join([NEGATION, NEUTRAL, LONG_PHRASE]) + "\n")
    rows = load_sst_trees(trees, "test", "rationale_test", 3, BadRecords("sst2"))
    assert [(r["example_id"], r["label"], r["word_rationale"]) for r in rows] == [
        ("sst2:test:tree1", 0, [0, 0, 1, 1, 1]), ("sst2:test:tree3", 1, [0, 0, 0, 0, 1])]
    assert rows[1]["text"] == "every single scene works wow" and rows[1]["role"] == "rationale_test"


@pytest.fixture
def sst_files(write_raw):
    def write(glue_train_lines=("a gripping tale\t1", "dull\t0"), trees_test_lines=(NEGATION, NEUTRAL, MIXED)):
        header = "sentence\tlabel\n"
        return {
            "glue_train": write_raw("glue/train.tsv", header + "\n".join(glue_train_lines) + "\n"),
            "glue_dev": write_raw("glue/dev.tsv", header + "it 's fine .\t1\n"),
            "glue_test": write_raw("glue/test.tsv", header + "not good .\t0\n"),
            "trees_train": write_raw("trees/train.txt", LONG_PHRASE + "\n"),
            "trees_dev": write_raw("trees/dev.txt", MIXED + "\n"),
            "trees_test": write_raw("trees/test.txt", "\n".join(trees_test_lines) + "\n"),
        }
    return write


def test_load_sst2_roles_splits_and_labels(sst_files):
    examples, skipped = load_sst2(**sst_files(), max_span=2)
    assert skipped.empty
    got = [(r.example_id, r.split, r.role, r.label) for r in examples.itertuples()]
    assert got == [
        ("sst2:train:glue2", "train", "classifier_train", 1), ("sst2:train:glue3", "train", "classifier_train", 0),
        ("sst2:dev:glue2", "dev", "classifier_val", 1), ("sst2:test:glue2", "test", "classifier_test", 0),
        ("sst2:train:tree1", "train", "rationale_train", 1), ("sst2:dev:tree1", "dev", "rationale_val", 1),
        ("sst2:test:tree1", "test", "rationale_test", 0), ("sst2:test:tree3", "test", "rationale_test", 1),
    ]
    rationale = examples.set_index("example_id")["word_rationale"]
    assert rationale["sst2:test:tree1"] == [0, 0, 0, 1, 1]  # max_span=2 reaches the loaders
    assert rationale["sst2:train:glue2"] is None
    assert examples.set_index("example_id").loc["sst2:dev:glue2", "words"] == ["it", "'s", "fine", "."]


GLUE_MALFORMED = {
    "too many columns": ("great\tfun\t1", "expected 2 tab-separated columns, found 3"),
    "one column": ("no tab here", "expected 2 tab-separated columns, found 1"),
    "label not in set": ("great\t2", "label '2' not in {0, 1}"),
    "empty text": ("  \t1", "empty text"),
}


@pytest.mark.parametrize("case", sorted(GLUE_MALFORMED))
def test_malformed_glue_line_strict_names_file_and_line(sst_files, case):
    line, reason = GLUE_MALFORMED[case]
    files = sst_files(glue_train_lines=("a gripping tale\t1", line, "dull\t0"))
    with pytest.raises(DataFormatError) as error:
        load_sst2(**files)
    assert f"{files['glue_train'].path}, line 3: {reason}" in str(error.value)


@pytest.mark.parametrize("case", sorted(GLUE_MALFORMED))
def test_malformed_glue_line_lenient_is_skipped_and_recorded(sst_files, case):
    line, reason = GLUE_MALFORMED[case]
    files = sst_files(glue_train_lines=("a gripping tale\t1", line, "dull\t0"))
    examples, skipped = load_sst2(**files, strict=False)
    assert list(examples.loc[examples["role"] == "classifier_train", "example_id"]) == \
        ["sst2:train:glue2", "sst2:train:glue4"]
    assert skipped.to_dict("records") == [{"task": "sst2", "split": "train", "role": "classifier_train",
                                           "file": files["glue_train"].path,
                                           "location": "line 3", "reason": reason}]


@pytest.mark.parametrize(("line", "reason"), [
    ("(3 (2 good)", "tree does not parse"),
    ("", "empty line"),
])
def test_malformed_tree_line_strict_and_lenient(sst_files, line, reason):
    files = sst_files(trees_test_lines=(NEGATION, line, MIXED))
    with pytest.raises(DataFormatError, match=f"{files['trees_test'].path}, line 2: {reason}"):
        load_sst2(**files)
    examples, skipped = load_sst2(**files, strict=False)
    assert list(examples.loc[examples["role"] == "rationale_test", "example_id"]) == \
        ["sst2:test:tree1", "sst2:test:tree3"]
    assert skipped[["split", "file", "location"]].values.tolist() == [["test", files["trees_test"].path, "line 2"]]
    assert skipped["reason"].iloc[0].startswith(reason)


def test_wrong_glue_header_is_an_error_even_when_lenient(write_raw, sst_files):
    files = sst_files()
    files["glue_dev"] = write_raw("glue/dev.tsv", "text\tlabel\nfine\t1\n")
    with pytest.raises(DataFormatError, match=r"dev\.tsv, line 1: expected the header"):
        load_sst2(**files, strict=False)


def test_max_span_below_one_is_rejected(sst_files):
    with pytest.raises(ValueError, match="sst2.max_span"):
        load_sst2(**sst_files(), max_span=0)
