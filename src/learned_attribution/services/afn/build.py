"""The AFN inputs from the parsed settings: the corpus (seeded SST phrases and the user's sentences) and the shift
pairs (SST minimal pairs, the example pairs, the user's pairs and the prompt conditions), each with its skip table."""
from __future__ import annotations

import logging
from collections.abc import Mapping

import pandas as pd

from learned_attribution.core.data.schema import RawText
from learned_attribution.core.data.words import treebank_words

from .alignment import AlignmentError
from .corpus import Skip, read_user_pairs, read_user_sentences, sample_phrases, skips_frame, sst_phrases
from .pairs import PROMPT, ShiftPair, context_pair, pairs_to_frame, prompt_pair, sst_minimal_pairs
from ..config import AfnSettings, check_user_file

logger = logging.getLogger(__name__)

CORPUS_COLUMNS = ["sentence_id", "source", "text", "words", "label", "split", "line"]


def build_corpus(trees: Mapping[str, RawText], user_sentences: RawText | None,
                 settings: AfnSettings) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The AFN corpus: `n_phrases` sentiment-bearing SST phrases of the chosen splits (`trees`: split -> tree
    file; seeded) and the user's sentences; with the table of skipped user lines."""
    corpus = settings.corpus
    check_user_file(user_sentences, corpus.user_sentences_file, "afn.corpus.user_sentences_file",
                    "afn.user_sentences")
    grouped = [group for split in corpus.splits
               for group in sst_phrases(trees[split], split, corpus.min_words, corpus.max_words)]
    phrases = sample_phrases(grouped, corpus.n_phrases, settings.seed)
    rows = [{"sentence_id": f"sst:{p.split}:{p.line}:{p.start}", "source": "sst", "text": " ".join(p.words),
             "words": list(p.words), "label": p.label, "split": p.split, "line": p.line} for p in phrases]
    skips: list[Skip] = []
    if user_sentences is not None:
        sentences, skips = read_user_sentences(user_sentences)
        rows += [{"sentence_id": f"user:{line}", "source": "user", "text": " ".join(words), "words": words,
                  "label": None, "split": None, "line": line} for line, words in sentences]
    frame = pd.DataFrame(rows, columns=CORPUS_COLUMNS)
    frame["label"] = frame["label"].astype("Int64")
    logger.info("AFN corpus: %d SST phrases, %d user sentences", len(phrases), len(frame) - len(phrases))
    return frame, skips_frame(skips)


def _example_pairs(settings: AfnSettings) -> list[ShiftPair]:
    built = []
    for k, (a, b) in enumerate(settings.pairs.example_pairs):
        try:
            built.append(context_pair(f"example{k:02d}", "example", treebank_words(a), treebank_words(b)))
        except AlignmentError as error:
            raise ValueError(f"parameter afn.pairs.example_pairs[{k}]={[a, b]!r}: {error}") from error
    return built


def _user_pairs(user_pairs: RawText, settings: AfnSettings) -> tuple[list[ShiftPair], list[Skip]]:
    """The user's pairs; a pair that does not align is skipped and counted (named by the path as configured)."""
    read, skips = read_user_pairs(user_pairs)
    name = settings.pairs.user_pairs_file or user_pairs.path
    built = []
    for line, a, b in read:
        try:
            built.append(context_pair(f"user{line:04d}", "user_file", treebank_words(a), treebank_words(b)))
        except AlignmentError as error:
            skips.append(Skip("pairs", f"{name}:{line}", "alignment failed", str(error)))
    return built, skips


def _prompt_pairs(corpus: pd.DataFrame, settings: AfnSettings) -> list[ShiftPair]:
    """Every prompt prefix pair applied to the first `n_prompt_sentences` corpus sentences."""
    sentences = corpus.head(settings.pairs.n_prompt_sentences)
    return [prompt_pair(f"prompt{k}:{row.sentence_id}", list(row.words), *prefix_pair,
                        label=None if pd.isna(row.label) else int(row.label))
            for k, prefix_pair in enumerate(settings.pairs.prompt_prefixes)
            for row in sentences.itertuples(index=False)]


def build_pairs(trees: Mapping[str, RawText], corpus: pd.DataFrame, user_pairs: RawText | None,
                settings: AfnSettings) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Shift pairs: SST minimal pairs of the chosen splits, the example pairs of the parameters, the user's TSV
    pairs, and every prompt prefix pair applied to the first `n_prompt_sentences` corpus sentences; with the table
    of skipped user pairs."""
    pairs = settings.pairs
    check_user_file(user_pairs, pairs.user_pairs_file, "afn.pairs.user_pairs_file", "afn.user_pairs")
    phrases = [p for split in pairs.splits for group in sst_phrases(trees[split], split, pairs.min_words,
                                                                   pairs.max_words) for p in group]
    built = [context_pair(f"sst{k:04d}", "sst_minimal_pair", a.words, b.words, a.label, b.label)
             for k, (a, b) in enumerate(sst_minimal_pairs(phrases, pairs.n_context_pairs, settings.seed))]
    built += _example_pairs(settings)
    skips: list[Skip] = []
    if user_pairs is not None:
        from_file, skips = _user_pairs(user_pairs, settings)
        built += from_file
    built += _prompt_pairs(corpus, settings)
    logger.info("AFN pairs: %d context, %d prompt", sum(p.kind != PROMPT for p in built),
                sum(p.kind == PROMPT for p in built))
    return pairs_to_frame(built), skips_frame(skips)
