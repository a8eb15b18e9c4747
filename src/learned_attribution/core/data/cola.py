"""CoLA: acceptability judgements, with token rationales derived from minimal pairs (SPEC §1)."""
from __future__ import annotations

import logging
import random
import re
from dataclasses import dataclass
from functools import cached_property

import pandas as pd

from .schema import BadRecords, RawText, make_examples_frame

logger = logging.getLogger(__name__)

TASK = "cola"
_WORD = re.compile(r"\w+(?:['’-]\w+)*|[^\w\s]")
# Control characters (three raw train lines hold a stray backspace) are not words: they would count as
# an edit in pair mining, get rationale marks, and then vanish in the tokenizer.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def clean_text(sentence: str) -> str:
    """The sentence without control characters, stripped."""
    return _CONTROL.sub("", sentence).strip()


def sentence_words(sentence: str) -> list[str]:
    """Words with punctuation split off (apostrophes and hyphens inside a word stay); control characters dropped."""
    return _WORD.findall(clean_text(sentence))


def _is_punct(word: str) -> bool:
    return not any(ch.isalnum() for ch in word)


@dataclass
class Sentence:
    example_id: str
    file: str
    line: int
    source: str
    label: int
    text: str
    words: list[str]

    # Cached: pair mining compares every unacceptable sentence with every acceptable one of its source.
    @cached_property
    def key(self) -> list[str]:
        """Lower-cased words: what minimal pairs are compared on."""
        return [w.lower() for w in self.words]

    @cached_property
    def content(self) -> list[str]:
        """The key without punctuation (equal contents = a punctuation/case-only pair)."""
        return [w for w in self.key if not _is_punct(w)]

    @cached_property
    def vocabulary(self) -> frozenset[str]:
        """Distinct words of the key (for the cheap edit-distance lower bound)."""
        return frozenset(self.key)


def read_cola_tsv(tsv: RawText, split: str, bad: BadRecords) -> list[Sentence]:
    """Parse a raw CoLA TSV (`source<TAB>label<TAB>mark<TAB>sentence`, no header)."""
    stem = tsv.path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    sentences = []
    for line_no, line in enumerate(tsv.lines(), start=1):
        columns = line.split("\t")
        where = f"line {line_no}"
        if len(columns) != 4:
            bad.report(split, tsv.path, where, f"expected 4 tab-separated columns, found {len(columns)}")
            continue
        source, label, _mark, text = columns
        if label not in ("0", "1"):
            bad.report(split, tsv.path, where, f"label {label!r} not in {{0, 1}}")
            continue
        words = sentence_words(text)
        if not words:
            bad.report(split, tsv.path, where, "empty text")
            continue
        sentences.append(Sentence(f"{TASK}:{stem}:line{line_no}", tsv.path, line_no, source, int(label), clean_text(text), words))
    return sentences


def edit_alignment(source: list[str], target: list[str]) -> tuple[int, list[tuple[str, int]]]:
    """Word-level Levenshtein from `target` (the acceptable partner) to `source` (the unacceptable
    sentence). Returns the distance and the edits as (kind, index in source): `substitute` and
    `insert` name a source word; `delete` names the gap before source index i (a partner word is
    missing there)."""
    n, m = len(source), len(target)
    dist = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        dist[i][0] = i
    for j in range(m + 1):
        dist[0][j] = j
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            cost = 0 if source[i - 1] == target[j - 1] else 1
            dist[i][j] = min(dist[i - 1][j - 1] + cost, dist[i - 1][j] + 1, dist[i][j - 1] + 1)
    edits: list[tuple[str, int]] = []
    i, j = n, m
    while i > 0 or j > 0:
        if i > 0 and j > 0 and dist[i][j] == dist[i - 1][j - 1] + (source[i - 1] != target[j - 1]):
            if source[i - 1] != target[j - 1]:
                edits.append(("substitute", i - 1))
            i, j = i - 1, j - 1
        elif i > 0 and dist[i][j] == dist[i - 1][j] + 1:
            edits.append(("insert", i - 1))
            i -= 1
        else:
            edits.append(("delete", i))
            j -= 1
    return dist[n][m], edits[::-1]


def rationale_from_edits(n_words: int, edits: list[tuple[str, int]]) -> list[int]:
    """Mark substituted and inserted words; for a deletion mark the words on both sides of the gap."""
    marks = [0] * n_words
    for kind, index in edits:
        if kind == "delete":
            for side in (index - 1, index):
                if 0 <= side < n_words:
                    marks[side] = 1
        else:
            marks[index] = 1
    return marks


def edit_distance_lower_bound(source: Sentence, target: Sentence) -> int:
    """A cheap lower bound on the word edit distance between two sentences' keys.

    An alignment leaves at most as many words unedited as the two word multisets share, and
    costs at least max(n, m) minus that. The shared count is bounded above by the shared distinct
    words plus the smaller number of repeated words, which set intersection gives quickly.
    """
    n, m = len(source.key), len(target.key)
    shared_distinct = len(source.vocabulary & target.vocabulary)
    repeats = min(n - len(source.vocabulary), m - len(target.vocabulary))
    return max(n, m) - (shared_distinct + repeats)


def bounded_edit_distance(source: list[str], target: list[str], max_edits: int) -> int:
    """Word-level Levenshtein distance if it is at most `max_edits`, else `max_edits + 1`.

    Stops as soon as a whole DP row exceeds `max_edits` (row minima never decrease).
    """
    if abs(len(source) - len(target)) > max_edits:
        return max_edits + 1
    previous = list(range(len(target) + 1))
    for i, word in enumerate(source, start=1):
        current = [i]
        for j, other in enumerate(target, start=1):
            current.append(min(previous[j - 1] + (word != other), previous[j] + 1, current[j - 1] + 1))
        if min(current) > max_edits:
            return max_edits + 1
        previous = current
    return min(previous[-1], max_edits + 1)


def find_partner(sentence: Sentence, candidates: list[Sentence], max_edits: int) -> tuple[Sentence, list[int]] | None:
    """Closest acceptable sentence within `max_edits` word edits (ties: nearest line), and the rationale.
    Pairs that differ only in punctuation or case are not pairs."""
    key = sentence.key
    best = None
    for candidate in candidates:
        # Cheap filters first: over 99% of same-source candidates fail the lower bound.
        if abs(len(candidate.key) - len(key)) > max_edits:
            continue
        if edit_distance_lower_bound(sentence, candidate) > max_edits:
            continue
        if candidate.content == sentence.content:
            continue
        distance = bounded_edit_distance(key, candidate.key, max_edits)
        if distance > max_edits:
            continue
        rank = (distance, abs(candidate.line - sentence.line), candidate.line)
        if best is None or rank < best[0]:
            best = (rank, candidate)
    if best is None:
        return None
    partner = best[1]
    _, edits = edit_alignment(key, partner.key)
    return partner, rationale_from_edits(len(key), edits)


def mine_minimal_pairs(sentences: list[Sentence], max_edits: int) -> list[tuple[Sentence, Sentence, list[int]]]:
    """(unacceptable, acceptable partner, rationale) for every unacceptable sentence that has a partner
    of the same source in the same file."""
    # Acceptable sentences by file, source and length: only lengths within max_edits can pair.
    by_source: dict[tuple[str, str], dict[int, list[Sentence]]] = {}
    for s in sentences:
        if s.label == 1:
            by_source.setdefault((s.file, s.source), {}).setdefault(len(s.key), []).append(s)
    pairs = []
    for s in sentences:
        if s.label == 0:
            by_length = by_source.get((s.file, s.source), {})
            n = len(s.key)
            candidates = [c for length in range(n - max_edits, n + max_edits + 1) for c in by_length.get(length, ())]
            found = find_partner(s, candidates, max_edits)
            if found:
                pairs.append((s, found[0], found[1]))
    return pairs


def group_pairs(pairs: list[tuple[Sentence, Sentence, list[int]]]) -> list[list[int]]:
    """Connected groups of pairs (a partner may serve several unacceptable sentences), as pair indices."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for bad_sentence, partner, _ in pairs:
        parent[find(bad_sentence.example_id)] = find(partner.example_id)
    groups: dict[str, list[int]] = {}
    for index, (bad_sentence, _, _) in enumerate(pairs):
        groups.setdefault(find(bad_sentence.example_id), []).append(index)
    return list(groups.values())


def load_cola(
    in_domain_train: RawText,
    in_domain_dev: RawText,
    out_of_domain_dev: RawText,
    max_edits: int = 2,
    n_rationale_test: int = 600,
    rationale_val_fraction: float = 0.15,
    classifier_val_fraction: float = 0.1,
    seed: int = 13,
    strict: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read CoLA into the shared schema.

    Minimal pairs are mined within each file and source. Pair groups from the dev files, then
    seeded whole groups from in-domain train, form `rationale_test` (at least `n_rationale_test`
    unacceptable sentences); their sentences never enter classifier training. The remaining
    train groups are split into rationale train / val. The in-domain dev set is the classifier test
    set (CoLA's test labels are not public); a seeded slice of the remaining train sentences
    validates the classifier.
    """
    bad = BadRecords(TASK, strict)
    train = read_cola_tsv(in_domain_train, "train", bad)
    dev = read_cola_tsv(in_domain_dev, "dev", bad)
    ood = read_cola_tsv(out_of_domain_dev, "dev_ood", bad)
    split_of = {**{s.example_id: "train" for s in train}, **{s.example_id: "dev" for s in dev},
                **{s.example_id: "dev_ood" for s in ood}}
    pairs = mine_minimal_pairs(train + dev + ood, max_edits)
    groups = group_pairs(pairs)
    rng = random.Random(seed)
    dev_groups = [g for g in groups if split_of[pairs[g[0]][0].example_id] != "train"]
    train_groups = [g for g in groups if split_of[pairs[g[0]][0].example_id] == "train"]
    rng.shuffle(train_groups)

    role_of_group: list[tuple[list[int], str]] = [(g, "rationale_test") for g in dev_groups]
    n_test = sum(len(g) for g in dev_groups)
    rest = []
    for g in train_groups:
        if n_test < n_rationale_test:
            role_of_group.append((g, "rationale_test"))
            n_test += len(g)
        else:
            rest.append(g)
    n_val_groups = round(len(rest) * rationale_val_fraction)
    role_of_group += [(g, "rationale_val") for g in rest[:n_val_groups]]
    role_of_group += [(g, "rationale_train") for g in rest[n_val_groups:]]

    held_out: set[str] = set()
    rows = []
    for group, role in role_of_group:
        for index in group:
            sentence, partner, marks = pairs[index]
            if role == "rationale_test":
                held_out.update({sentence.example_id, partner.example_id})
            rows.append(_row(sentence, split_of[sentence.example_id], role, marks))
    if n_test < n_rationale_test:
        logger.warning("CoLA: only %d rationale test sentences could be formed (asked for %d)", n_test, n_rationale_test)

    classifier_pool = [s for s in train if s.example_id not in held_out]
    val_ids = set(random.Random(seed + 1).sample([s.example_id for s in classifier_pool],
                                                 round(len(classifier_pool) * classifier_val_fraction)))
    rows += [_row(s, "train", "classifier_val" if s.example_id in val_ids else "classifier_train", None)
             for s in classifier_pool]
    rows += [_row(s, "dev", "classifier_test", None) for s in dev]
    logger.info("CoLA: %d minimal pairs in %d groups; %d rationale test sentences; %d train sentences held out of "
                "classifier training", len(pairs), len(groups), n_test, len(train) - len(classifier_pool))
    return make_examples_frame(rows), bad.frame()


def _row(sentence: Sentence, split: str, role: str, marks: list[int] | None) -> dict:
    return {"example_id": sentence.example_id, "task": TASK, "split": split, "role": role, "text": sentence.text,
            "words": sentence.words, "word_rationale": marks, "label": sentence.label}
