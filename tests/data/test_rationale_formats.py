"""The rationale formats as a registry (`core.data.rationales`): every built-in format reads back what its writer
writes, the old spellings of a name still name its format, a file two formats claim is refused naming both, and a
new format is one registered class plus its fixture (tests/data/rationale_spans/marked.tsv), here registered inside
the test and read and written through the public entry points without touching the package."""
import json
from pathlib import Path

import pandas as pd
import pytest

from learned_attribution.core.data.rationales import (FORMATS, RationaleFileError, RationaleFormat, Span, SpanRecord,
                                                      annotation_file, annotation_formats, build_format, check_format,
                                                      merge_spans, read_rationale_file, register, span_examples,
                                                      write_annotation_file)
from learned_attribution.core.errors import InputError

FILES = Path(__file__).parent / "rationale_spans"
SPANS, MARKED = FILES / "spans.jsonl", FILES / "marked.tsv"
TEXTS = ["The plot was fun, not boring!", "A great film.", "It is very bad, isn't it?"]
RECORDS = [SpanRecord("fun", TEXTS[0], 1, (Span(13, 16, ("Rationale",)), Span(18, 25, ("Rationale",)))),
           SpanRecord("film", TEXTS[1], 1, (Span(9, 13, ("Rationale",)), Span(2, 6, ("Rationale",)))),
           SpanRecord("bad", TEXTS[2], 0, (Span(11, 14, ("Rationale",)), Span(18, 21, ("Rationale",))))]
# The BERT pre-tokenizer's words of the three texts and the words the spans above touch (test_rationale_spans.py).
EXPECTED_WORDS = [["The", "plot", "was", "fun", ",", "not", "boring", "!"],
                  ["A", "great", "film", "."],
                  ["It", "is", "very", "bad", ",", "isn", "'", "t", "it", "?"]]
EXPECTED_RATIONALE = [[0, 0, 0, 1, 0, 1, 1, 0],
                      [0, 1, 1, 1],
                      [0, 0, 0, 1, 0, 1, 1, 1, 0, 0]]
WHITESPACE_RATIONALE = [[0, 0, 0, 1, 1, 1], [0, 1, 1], [0, 0, 0, 1, 1, 0]]
SUGGESTED = pd.DataFrame({"rank": [1, 2], "id": ["7", "12"], "text": ["A great film.", "It is very bad, isn't it?"],
                          "predicted": [1, 0], "label": ["positive", "negative"], "probability": [0.9, 0.8],
                          "uncertainty": [0.1, 0.2]})
SUGGESTED.attrs["class_names"] = ["negative", "positive"]  # as suggest's frame carries them


@pytest.fixture
def registered():
    """Register formats for one test, and remove them after it (the registry is the process's)."""
    added = []

    def add(name: str, cls: type[RationaleFormat]) -> type[RationaleFormat]:
        register(name)(cls)
        added.append(name)
        return cls

    yield add
    for name in added:
        del FORMATS[name]


@pytest.mark.parametrize("name", ["words", "spans", "doccano", "label-studio"])
def test_each_format_reads_back_what_its_writer_writes(tmp_path, name):
    file_format = build_format(name)
    path = tmp_path / f"written{file_format.suffix}"
    path.write_text(file_format.write(RECORDS), encoding="utf-8")
    frame = read_rationale_file(path)
    assert frame["text"].tolist() == TEXTS and frame["label"].tolist() == [1, 1, 0]
    assert frame["word_rationale"].tolist() == WHITESPACE_RATIONALE  # whitespace words, as without a tokenizer
    assert frame["words"].tolist() == [text.split() for text in TEXTS]
    if name in ("words", "spans"):
        assert frame["example_id"].tolist() == ["fun", "film", "bad"]
    # with the classifier's class names, the class is written by name and read back by it
    path.write_text(file_format.write(RECORDS, class_names=["negative", "positive"]), encoding="utf-8")
    named = read_rationale_file(path, class_names=["negative", "positive"])
    pd.testing.assert_frame_equal(named, frame)
    assert "positive" in path.read_text(encoding="utf-8")


def test_the_old_spellings_name_the_same_format(tmp_path):
    for spelling in ("label-studio", "label studio", "Label Studio", "label_studio"):
        assert build_format(spelling).name == "label-studio"
        check_format(spelling, tmp_path / "a.json")
        assert annotation_file(SUGGESTED, spelling) == annotation_file(SUGGESTED, "label-studio")
    # the predicted class is the pre-selected choice of the class control, among the classes the task lists
    classes = [{"value": "negative"}, {"value": "positive"}]
    assert json.loads(annotation_file(SUGGESTED, "label studio")) == [
        {"data": {"text": "A great film.", "source_id": "7", "classes": classes},
         "predictions": [{"result": [{"from_name": "class", "to_name": "text", "type": "choices",
                                      "value": {"choices": ["positive"]}}]}]},
        {"data": {"text": "It is very bad, isn't it?", "source_id": "12", "classes": classes},
         "predictions": [{"result": [{"from_name": "class", "to_name": "text", "type": "choices",
                                      "value": {"choices": ["negative"]}}]}]}]
    with pytest.raises(InputError, match=r"unknown rationale format 'brat'; registered: label-studio, doccano, spans, "
                                         r"words$"):
        build_format("brat")
    with pytest.raises(InputError, match=r"^--format 'words': a word-level file is not written to annotate; choose "
                                         r"one of label-studio, doccano, spans$"):
        check_format("words")


def test_a_file_two_formats_claim_is_refused_naming_both(registered):
    class AnyText(RationaleFormat):
        """Claims every JSONL file whose first record has a text: span JSONL's files too."""
        title = "any text"

        def claims(self, file) -> bool:
            record = file.first_object()
            return record is not None and "text" in record

    registered("any-text", AnyText)
    with pytest.raises(RationaleFileError) as refused:
        read_rationale_file(SPANS)
    message = str(refused.value)
    assert message == (f"{SPANS}: both the 'any-text' and the 'spans' rationale formats claim this file; a file must "
                       "be of one format (drop the other's fields, or rename it)")
    assert isinstance(refused.value, InputError) and "\n" not in message


def test_the_built_in_overlaps_keep_their_reading(tmp_path):
    # a word-level record with span fields beside its words is read word by word, as before the registry
    path = tmp_path / "words.jsonl"
    path.write_text(json.dumps({"words": ["a", "fine", "film"], "rationale": [0, 1, 0], "label": 1,
                                "text": "a fine film", "spans": [[0, 1]]}) + "\n", encoding="utf-8")
    assert read_rationale_file(path)["word_rationale"].tolist() == [[0, 1, 0]]


class Marked(RationaleFormat):
    """A toy format: a .tsv line per text, `id <TAB> class <TAB> text` with the rationale in [brackets]."""
    title = "bracket-marked"
    summary = "a .tsv of id, class and [marked] text"
    suffix = ".tsv"

    def claims(self, file) -> bool:
        return file.is_file_with(self.suffix)

    def read(self, file, n_classes=2, *, rationale_labels=None, class_field=None, tokenizer=None, class_names=None):
        records = []
        for number, line in enumerate(file.text.splitlines(), start=1):
            example_id, label, marked = line.split("\t")
            text, spans, start = "", [], 0
            for char in marked:
                if char == "[":
                    start = len(text)
                elif char == "]":
                    spans.append(Span(start, len(text)))
                else:
                    text += char
            records.append(SpanRecord(example_id, text, int(label), tuple(spans), f"line {number}"))
        return span_examples(records, file.source, None, tokenizer)

    def write(self, records, class_names=None) -> str:
        lines = []
        for record in records:
            text = record.text
            for start, end in reversed(merge_spans((span.start, span.end) for span in record.spans)):
                text = f"{text[:start]}[{text[start:end]}]{text[end:]}"
            lines.append(f"{record.example_id}\t{record.label}\t{text}\n")
        return "".join(lines)


def test_a_new_format_is_one_registered_class_and_its_fixture(registered, tmp_path, tiny_tokenizer):
    registered("marked", Marked)
    assert annotation_formats()[-1] == "marked"  # suggest --format offers it
    frame = read_rationale_file(MARKED, tokenizer=tiny_tokenizer("bert"))
    assert frame["words"].tolist() == EXPECTED_WORDS and frame["word_rationale"].tolist() == EXPECTED_RATIONALE
    assert frame["example_id"].tolist() == ["fun", "film", "bad"] and frame["label"].tolist() == [1, 1, 0]
    assert build_format("marked").write(RECORDS) == MARKED.read_text(encoding="utf-8")
    # suggest's writer: texts to annotate, nothing marked yet; an annotator brackets the words, and it reads back
    written = write_annotation_file(SUGGESTED, tmp_path / "to_annotate.tsv", "marked")
    assert written.read_text(encoding="utf-8") == "7\t1\tA great film.\n12\t0\tIt is very bad, isn't it?\n"
    written.write_text("7\t1\tA [great] film.\n12\t0\tIt is very [bad], isn't it?\n", encoding="utf-8")
    assert read_rationale_file(written)["word_rationale"].tolist() == [[0, 1, 0], [0, 0, 0, 1, 0, 0]]
    with pytest.raises(InputError, match=r"a marked file is read back as .tsv; name it a.tsv"):
        check_format("marked", tmp_path / "a.json")
