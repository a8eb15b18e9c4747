"""SST-2: GLUE TSVs for the classifier, PTB sentiment trees for token rationales (SPEC §1)."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

import pandas as pd

from .schema import BadRecords, DataFormatError, RawText, make_examples_frame

logger = logging.getLogger(__name__)

TASK = "sst2"
_PTB_ESCAPES = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}"}


class TreeParseError(ValueError):
    """A PTB tree string that does not parse."""


@dataclass
class TreeNode:
    label: int
    start: int  # first word index covered
    end: int  # one past the last word index covered
    children: list["TreeNode"] = field(default_factory=list)


def unescape_ptb(word: str) -> str:
    word = _PTB_ESCAPES.get(word, word)
    return word.replace("\\/", "/").replace("\\*", "*")


def parse_tree(line: str) -> tuple[list[str], list[TreeNode]]:
    """Parse one labelled PTB tree; return its words and every node (root first).

    A leaf's word runs up to its closing parenthesis, so a leaf such as `(2 8 1\\/2)` keeps its space.
    """
    words: list[str] = []
    nodes: list[TreeNode] = []
    text = line.strip()
    pos = 0

    def parse_node() -> TreeNode:
        nonlocal pos
        if pos >= len(text) or text[pos] != "(":
            raise TreeParseError(f"expected '(' at character {pos}")
        pos += 1
        label_end = pos
        while label_end < len(text) and text[label_end].isdigit():
            label_end += 1
        if label_end == pos or label_end >= len(text) or text[label_end] != " ":
            raise TreeParseError(f"expected a 0-4 label then a space at character {pos}")
        label = int(text[pos:label_end])
        if label > 4:
            raise TreeParseError(f"label {label} outside 0-4 at character {pos}")
        pos = label_end + 1
        node = TreeNode(label, len(words), len(words))
        nodes.append(node)
        if pos < len(text) and text[pos] == "(":
            while pos < len(text) and text[pos] == "(":
                node.children.append(parse_node())
                while pos < len(text) and text[pos] == " ":
                    pos += 1
        else:
            close = text.find(")", pos)
            if close <= pos:
                raise TreeParseError(f"leaf without a word at character {pos}")
            words.append(unescape_ptb(text[pos:close]))
            pos = close
        if pos >= len(text) or text[pos] != ")":
            raise TreeParseError(f"expected ')' at character {pos}")
        pos += 1
        node.end = len(words)
        return node

    parse_node()
    if pos != len(text):
        raise TreeParseError(f"unexpected text after the tree at character {pos}")
    return words, nodes


def polarity(label: int) -> int | None:
    """SST-2 polarity of a 0-4 label: 1 positive (3-4), 0 negative (0-1), None neutral."""
    if label >= 3:
        return 1
    if label <= 1:
        return 0
    return None


def tree_rationale(nodes: list[TreeNode], n_words: int, max_span: int) -> tuple[int, list[int]] | None:
    """SPEC §1 rule: a word is marked when a node containing it spans at most `max_span` words
    and carries the sentence's polarity. Returns (sentence label, rationale), or None for a
    neutral root (not in SST-2)."""
    sentence = polarity(nodes[0].label)
    if sentence is None:
        return None
    marks = [0] * n_words
    for node in nodes:
        if node.end - node.start <= max_span and polarity(node.label) == sentence:
            for i in range(node.start, node.end):
                marks[i] = 1
    return sentence, marks


def load_sst_trees(trees: RawText, split: str, role: str, max_span: int, bad: BadRecords) -> list[dict]:
    """Rationale rows from one PTB tree file; neutral-root sentences are left out (logged)."""
    rows, neutral = [], 0
    for line_no, line in enumerate(trees.lines(), start=1):
        if not line.strip():
            bad.report(split, trees.path, f"line {line_no}", "empty line", role=role)
            continue
        try:
            words, nodes = parse_tree(line)
        except TreeParseError as error:
            bad.report(split, trees.path, f"line {line_no}", f"tree does not parse: {error}", role=role)
            continue
        result = tree_rationale(nodes, len(words), max_span)
        if result is None:
            neutral += 1
            continue
        label, marks = result
        rows.append({
            "example_id": f"{TASK}:{split}:tree{line_no}", "task": TASK, "split": split, "role": role,
            "text": " ".join(words), "words": words, "word_rationale": marks, "label": label,
        })
    logger.info("SST %s trees: %d sentences kept, %d neutral roots left out (not SST-2)", split, len(rows), neutral)
    return rows


def load_glue_tsv(tsv: RawText, split: str, role: str, bad: BadRecords) -> list[dict]:
    """Classifier rows from a GLUE SST-2 TSV (`sentence<TAB>label`, header line, 1 = positive)."""
    lines = tsv.lines()
    if not lines or lines[0].split("\t") != ["sentence", "label"]:
        raise DataFormatError(f"{tsv.path}, line 1: expected the header 'sentence<TAB>label'")
    rows = []
    for line_no, line in enumerate(lines[1:], start=2):
        columns = line.split("\t")
        where = f"line {line_no}"
        if len(columns) != 2:
            bad.report(split, tsv.path, where, f"expected 2 tab-separated columns, found {len(columns)}", role=role)
            continue
        sentence, label = columns
        if label.strip() not in ("0", "1"):
            bad.report(split, tsv.path, where, f"label {label!r} not in {{0, 1}}", role=role)
            continue
        words = sentence.split()
        if not words:
            bad.report(split, tsv.path, where, "empty text", role=role)
            continue
        rows.append({
            "example_id": f"{TASK}:{split}:glue{line_no}", "task": TASK, "split": split, "role": role,
            "text": " ".join(words), "words": words, "word_rationale": None, "label": int(label),
        })
    return rows


def load_sst2(
    glue_train: RawText,
    glue_dev: RawText,
    glue_test: RawText,
    trees_train: RawText,
    trees_dev: RawText,
    trees_test: RawText,
    max_span: int = 3,
    strict: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read SST-2 into the shared schema: GLUE phrases train the classifier, tree sentences carry rationales."""
    if max_span < 1:
        raise ValueError(f"parameter sst2.max_span must be at least 1, got {max_span}")
    bad = BadRecords(TASK, strict)
    rows = (
        load_glue_tsv(glue_train, "train", "classifier_train", bad)
        + load_glue_tsv(glue_dev, "dev", "classifier_val", bad)
        + load_glue_tsv(glue_test, "test", "classifier_test", bad)
        + load_sst_trees(trees_train, "train", "rationale_train", max_span, bad)
        + load_sst_trees(trees_dev, "dev", "rationale_val", max_span, bad)
        + load_sst_trees(trees_test, "test", "rationale_test", max_span, bad)
    )
    return make_examples_frame(rows), bad.frame()
