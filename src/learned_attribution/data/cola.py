"""CoLA: acceptability judgements, with token rationales derived from minimal pairs (SPEC §1)."""
from __future__ import annotations

import logging
import random
import re
from dataclasses import dataclass

import pandas as pd

from .schema import BadRecords, RawText, make_examples_frame

logger = logging.getLogger(__name__)

TASK = "cola"
_WORD = re.compile(r"\w+(?:['’-]\w+)*|[^\w\s]")


def split_words(sentence: str) -> list[str]:
    """Words with punctuation split off (apostrophes and hyphens inside a word stay)."""
    return _WORD.findall(sentence)


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

    @property
    def key(self) -> list[str]:
        return [w.lower() for w in self.words]


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
        words = split_words(text)
        if not words:
            bad.report(split, tsv.path, where, "empty text")
            continue
        sentences.append(Sentence(f"{TASK}:{stem}:line{line_no}", tsv.path, line_no, source, int(label), text.strip(), words))
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


def find_partner(sentence: Sentence, candidates: list[Sentence], max_edits: int) -> tuple[Sentence, list[int]] | None:
    """Closest acceptable sentence within `max_edits` word edits (ties: nearest line), and the rationale.
    Pairs that differ only in punctuation or case are not pairs."""
    key = sentence.key
    content = [w for w in key if not _is_punct(w)]
    best = None
    for candidate in candidates:
        other = candidate.key
        if abs(len(other) - len(key)) > max_edits:
            continue
        if [w for w in other if not _is_punct(w)] == content:
            continue
        distance, edits = edit_alignment(key, other)
        if distance > max_edits:
            continue
        rank = (distance, abs(candidate.line - sentence.line), candidate.line)
        if best is None or rank < best[0]:
            best = (rank, candidate, edits)
    if best is None:
        return None
    return best[1], rationale_from_edits(len(key), best[2])


def mine_minimal_pairs(sentences: list[Sentence], max_edits: int) -> list[tuple[Sentence, Sentence, list[int]]]:
    """(unacceptable, acceptable partner, rationale) for every unacceptable sentence that has a partner
    of the same source in the same file."""
    by_source: dict[tuple[str, str], list[Sentence]] = {}
    for s in sentences:
        if s.label == 1:
            by_source.setdefault((s.file, s.source), []).append(s)
    pairs = []
    for s in sentences:
        if s.label == 0:
            found = find_partner(s, by_source.get((s.file, s.source), []), max_edits)
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
