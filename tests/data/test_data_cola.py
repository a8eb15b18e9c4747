"""CoLA: word splitting, minimal-pair alignment and rationales, pair groups held out of classifier training."""
from __future__ import annotations

import logging
import random

import pytest

from learned_attribution.core.data.cola import (
    Sentence,
    bounded_edit_distance,
    clean_text,
    edit_alignment,
    edit_distance_lower_bound,
    find_partner,
    group_pairs,
    load_cola,
    rationale_from_edits,
    sentence_words,
)
from learned_attribution.core.data.schema import DataFormatError

# source, label, sentence. Comments give the pair each unacceptable sentence should (not) form.
TRAIN = [
    ("s1", 1, "The cat sleeps."),             # line 1
    ("s1", 0, "The cat sleep."),              # line 2: substitution of line 1
    ("s1", 1, "Mary left early."),            # line 3
    ("s1", 0, "Mary very left early."),       # line 4: insertion relative to line 3
    ("s1", 1, "John ate the apple."),         # line 5
    ("s1", 0, "John ate apple."),             # line 6: deletion relative to line 5
    ("s1", 0, "Mary left early!"),            # line 7: punctuation only vs line 3: no pair
    ("s1", 0, "MARY LEFT EARLY."),            # line 8: case only vs line 3: no pair
    ("s2", 1, "Bill saw them."),              # line 9
    ("s2", 1, "Sue is here."),                # line 10
    ("s2", 0, "Bill saw they."),              # line 11: lines 9 and 12 both 1 edit away: nearest line 12
    ("s2", 1, "Bill saw it."),                # line 12
    ("s2", 0, "Sue were here."),              # line 13: line 10 (1 edit) beats the nearer line 14 (2 edits)
    ("s2", 1, "Sue was there."),              # line 14
    ("s3", 0, "Mary left late."),             # line 15: 1 edit from line 3, but another source: no pair
    ("s4", 1, "The dog barks."),              # line 16
    ("s4", 0, "The dog bark."),               # line 17: partner line 16 ...
    ("s4", 0, "The dogs barks."),             # line 18: ... shared: one group of two pairs
]
DEV = [
    ("d1", 1, "She runs fast."),
    ("d1", 0, "She run fast."),
    ("d1", 1, "He sings."),
    ("s1", 0, "Mary left earlyy."),           # train's source name, but another file: no pair
]
OOD = [
    ("o1", 1, "It rains."),
    ("o1", 0, "It rain."),
]
# Every minimal pair of the corpus: unacceptable sentence -> (partner, rationale).
PAIRS = {
    "The cat sleep.": ("The cat sleeps.", [0, 0, 1, 0]),
    "Mary very left early.": ("Mary left early.", [0, 1, 0, 0, 0]),
    "John ate apple.": ("John ate the apple.", [0, 1, 1, 0]),
    "Bill saw they.": ("Bill saw it.", [0, 0, 1, 0]),
    "Sue were here.": ("Sue is here.", [0, 1, 0, 0]),
    "The dog bark.": ("The dog barks.", [0, 0, 1, 0]),
    "The dogs barks.": ("The dog barks.", [0, 1, 0, 0]),
    "She run fast.": ("She runs fast.", [0, 1, 0, 0]),
    "It rain.": ("It rains.", [0, 1, 0]),
}
CLASSIFIER_FIT_ROLES = {"classifier_train", "classifier_val"}


def _tsv(rows) -> str:
    return "".join(f"{source}\t{label}\t{'' if label else '*'}\t{text}\n" for source, label, text in rows)


@pytest.fixture
def cola_files(write_raw):
    def write(train=TRAIN, dev=DEV, ood=OOD):
        return (write_raw("cola/in_domain_train.tsv", _tsv(train)), write_raw("cola/in_domain_dev.tsv", _tsv(dev)),
                write_raw("cola/out_of_domain_dev.tsv", _tsv(ood)))
    return write


def _sentence(line: int, text: str, label: int = 1, source: str = "s") -> Sentence:
    return Sentence(f"cola:f:line{line}", "f.tsv", line, source, label, text, sentence_words(text))


def test_split_words_splits_punctuation_and_keeps_word_internal_marks():
    assert sentence_words("John's well-known book, isn't it?") == \
        ["John's", "well-known", "book", ",", "isn't", "it", "?"]


def test_control_characters_are_not_words():
    # Three raw train lines hold a stray backspace; it must not become an edited (marked) "word".
    assert sentence_words("will put \x08a picture") == ["will", "put", "a", "picture"]
    assert clean_text("  put \x08a\x7f picture ") == "put a picture"


@pytest.mark.parametrize(("source", "target", "distance", "edits"), [
    ("the cat sleep", "the cat sleeps", 1, [("substitute", 2)]),
    ("mary very left", "mary left", 1, [("insert", 1)]),
    ("john ate apple", "john ate the apple", 1, [("delete", 2)]),
    ("left early", "mary left early", 1, [("delete", 0)]),
    ("a b c", "a b c", 0, []),
])
def test_edit_alignment_known_answers(source, target, distance, edits):
    assert edit_alignment(source.split(), target.split()) == (distance, edits)


@pytest.mark.parametrize(("n_words", "edits", "expected"), [
    (4, [("substitute", 2)], [0, 0, 1, 0]),
    (4, [("insert", 0), ("insert", 3)], [1, 0, 0, 1]),
    (3, [("delete", 2)], [0, 1, 1]),   # a gap inside: both neighbours
    (2, [("delete", 0)], [1, 0]),      # a gap before the first word: only the word after it
    (2, [("delete", 2)], [0, 1]),      # a gap after the last word: only the word before it
])
def test_rationale_from_edits(n_words, edits, expected):
    assert rationale_from_edits(n_words, edits) == expected


def test_bounded_distance_and_lower_bound_agree_with_full_levenshtein():
    rng = random.Random(0)
    vocabulary = list("abcde")
    for _ in range(2000):
        a = [rng.choice(vocabulary) for _ in range(rng.randint(1, 8))]
        b = [rng.choice(vocabulary) for _ in range(rng.randint(1, 8))]
        distance, _ = edit_alignment(a, b)
        for max_edits in (0, 1, 2, 3):
            assert bounded_edit_distance(a, b, max_edits) == min(distance, max_edits + 1)
        assert edit_distance_lower_bound(_sentence(1, " ".join(a)), _sentence(2, " ".join(b))) <= distance


def test_find_partner_prefers_fewer_edits_then_the_nearest_line_then_the_earlier_line():
    bad = _sentence(10, "Bill saw they.", label=0)
    near_but_two_edits = _sentence(11, "Bill knew they were.")
    one_edit_far = _sentence(4, "Bill saw them.")
    one_edit_nearer = _sentence(13, "Bill saw it.")
    partner, marks = find_partner(bad, [near_but_two_edits, one_edit_far, one_edit_nearer], max_edits=2)
    assert partner is one_edit_nearer and marks == [0, 0, 1, 0]
    equally_near = _sentence(7, "Bill saw him.")
    assert find_partner(bad, [one_edit_nearer, equally_near], max_edits=2)[0] is equally_near
    assert find_partner(bad, [near_but_two_edits], max_edits=1) is None


def test_punctuation_or_case_only_differences_are_not_pairs():
    bad = _sentence(2, "Mary left early!", label=0)
    assert find_partner(bad, [_sentence(1, "Mary left early.")], max_edits=2) is None
    assert find_partner(_sentence(3, "MARY LEFT EARLY", label=0), [_sentence(1, "Mary left early")], 2) is None


def test_pairs_sharing_a_partner_form_one_group():
    a, b, c = _sentence(1, "a"), _sentence(2, "b"), _sentence(3, "c")
    x, y = _sentence(4, "x"), _sentence(5, "y")
    pairs = [(b, a, [1]), (c, a, [1]), (y, x, [1])]
    assert sorted(group_pairs(pairs)) == [[0, 1], [2]]


def test_minimal_pair_rationales_on_the_mini_corpus(cola_files):
    examples, skipped = load_cola(*cola_files(), n_rationale_test=4, seed=3)
    assert skipped.empty
    rationale_rows = examples[examples["role"].str.startswith("rationale")]
    got = {row.text: list(row.word_rationale) for row in rationale_rows.itertuples()}
    assert got == {bad: marks for bad, (_, marks) in PAIRS.items()}
    assert (rationale_rows["label"] == 0).all()
    row = rationale_rows.set_index("text").loc["Mary very left early."]
    assert list(row["words"]) == ["Mary", "very", "left", "early", "."]
    assert row["example_id"] == "cola:in_domain_train:line4"


@pytest.mark.parametrize("seed", range(8))
def test_whole_groups_are_held_out_of_classifier_training(cola_files, seed):
    examples, _ = load_cola(*cola_files(), n_rationale_test=4, rationale_val_fraction=0.25,
                            classifier_val_fraction=0.3, seed=seed)
    role_of = examples.groupby("text")["role"].agg(set).to_dict()
    test_texts = set(examples.loc[examples["role"] == "rationale_test", "text"])
    fit_texts = set(examples.loc[examples["role"].isin(CLASSIFIER_FIT_ROLES), "text"])
    # Dev pair groups always go to rationale_test; then seeded train groups until at least 4 sentences.
    assert {"She run fast.", "It rain."} <= test_texts
    assert len(test_texts) >= 4 and len(test_texts - {"She run fast.", "It rain."}) >= 1
    for bad in test_texts:
        partner = PAIRS[bad][0]
        assert bad not in fit_texts and partner not in fit_texts, (bad, partner)
    # The two sentences sharing a partner land in the same rationale role.
    shared = [{r for r in role_of[text] if r.startswith("rationale")} for text in ("The dog bark.", "The dogs barks.")]
    assert len(shared[0]) == 1 and shared[0] == shared[1]
    # Every train sentence outside held-out groups is fitted on exactly once, dev is the classifier test set,
    # and out-of-domain sentences never reach a classifier role.
    held_out = test_texts | {PAIRS[bad][0] for bad in test_texts}
    fit_rows = examples[examples["role"].isin(CLASSIFIER_FIT_ROLES)]
    assert sorted(fit_rows["text"]) == sorted(text for _, _, text in TRAIN if text not in held_out)
    assert (fit_rows["split"] == "train").all()
    assert sorted(examples.loc[examples["role"] == "classifier_test", "text"]) == sorted(t for _, _, t in DEV)
    assert not set(t for _, _, t in OOD) & set(examples.loc[examples["role"].str.startswith("classifier"), "text"])
    assert (fit_rows["role"] == "classifier_val").sum() == round(len(fit_rows) * 0.3)


def test_rationale_splits_and_seed_determinism(cola_files):
    first, _ = load_cola(*cola_files(), n_rationale_test=4, rationale_val_fraction=0.25, seed=5)
    again, _ = load_cola(*cola_files(), n_rationale_test=4, rationale_val_fraction=0.25, seed=5)
    assert first.equals(again)
    splits = first[first["role"].str.startswith("rationale")].groupby("role")["split"].agg(set).to_dict()
    assert splits["rationale_test"] == {"train", "dev", "dev_ood"}
    assert splits["rationale_train"] == {"train"} and splits["rationale_val"] == {"train"}


def test_asking_for_more_test_sentences_than_pairs_holds_out_every_group(cola_files, caplog):
    with caplog.at_level(logging.WARNING):
        examples, _ = load_cola(*cola_files(), n_rationale_test=100)
    assert "only 9 rationale test sentences" in caplog.text
    assert set(examples.loc[examples["role"] == "rationale_test", "text"]) == set(PAIRS)
    fit_texts = set(examples.loc[examples["role"].isin(CLASSIFIER_FIT_ROLES), "text"])
    assert not fit_texts & ({bad for bad in PAIRS} | {partner for partner, _ in PAIRS.values()})


COLA_MALFORMED = {
    "three columns": ("s1\t1\tNo mark column.", "expected 4 tab-separated columns, found 3"),
    "label not in set": ("s1\t2\t\tA fine sentence.", "label '2' not in {0, 1}"),
    "empty text": ("s1\t1\t\t   ", "empty text"),
}


@pytest.mark.parametrize("case", sorted(COLA_MALFORMED))
def test_malformed_line_strict_names_file_and_line(cola_files, write_raw, case):
    line, reason = COLA_MALFORMED[case]
    train, dev, ood = cola_files()
    dev = write_raw("cola/in_domain_dev.tsv", _tsv(DEV[:2]) + line + "\n" + _tsv(DEV[2:]))
    with pytest.raises(DataFormatError) as error:
        load_cola(train, dev, ood)
    assert f"{dev.path}, line 3: {reason}" in str(error.value)


@pytest.mark.parametrize("case", sorted(COLA_MALFORMED))
def test_malformed_line_lenient_is_skipped_and_recorded(cola_files, write_raw, case):
    line, reason = COLA_MALFORMED[case]
    train, dev, ood = cola_files()
    dev = write_raw("cola/in_domain_dev.tsv", _tsv(DEV[:2]) + line + "\n" + _tsv(DEV[2:]))
    examples, skipped = load_cola(train, dev, ood, strict=False)
    assert skipped.to_dict("records") == [{"task": "cola", "split": "dev", "role": None, "file": dev.path, "location": "line 3",
                                           "reason": reason}]
    classifier_test = examples[examples["role"] == "classifier_test"]
    assert list(classifier_test["example_id"]) == [f"cola:in_domain_dev:line{i}" for i in (1, 2, 4, 5)]
