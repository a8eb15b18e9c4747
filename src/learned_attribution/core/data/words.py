"""Words: English word classes (content words, function words, punctuation) for the AFN comparison and the
`token_kind` signals, the SST trees' word split, and a typed text's words with their offsets (the explain API).

The class of a word comes from a fixed list, not a part-of-speech tagger, so results do not depend on a
tagger's version. FUNCTION_WORDS is the closed-class vocabulary of English: determiners, pronouns,
prepositions, auxiliaries and modals, conjunctions and complementisers, negation and a few closed-class
adverbs and particles (the usual content of an English stopword list), plus the clitics the Penn
Treebank tokenisation of SST splits off ("n't", "'s", "wo" of "wo n't", "ca" of "ca n't"). A word made only of
punctuation or symbol characters is punctuation; every other word (nouns, verbs, adjectives, most adverbs,
numbers) is a content word. Matching ignores case.
"""
from __future__ import annotations

import logging
import re
import unicodedata

logger = logging.getLogger(__name__)

CONTENT, FUNCTION, PUNCTUATION = "content", "function", "punctuation"
WORD_CLASSES = (CONTENT, FUNCTION, PUNCTUATION)

_DETERMINERS = """a an the this that these those each every some any no all both either neither another such
what which whose whatever whichever""".split()
_PRONOUNS = """i me my mine myself you your yours yourself yourselves he him his himself she her hers herself it
its itself we us our ours ourselves they them their theirs themselves who whom whoever one ones oneself
someone somebody something anyone anybody anything everyone everybody everything nobody nothing none""".split()
_PREPOSITIONS = """about above across after against along amid among amongst around as at before behind below
beneath beside besides between beyond by despite down during except for from in inside into near of off on
onto out outside over past per since through throughout till to toward towards under underneath unlike until
up upon via with within without""".split()
_AUXILIARIES = """be am is are was were been being have has had having do does did doing done will would shall
should can could may might must ought 'm 're 's 've 'd 'll wo ca""".split()
_CONJUNCTIONS = """and or but nor yet so if because although though while whereas unless whether than that
when whenever where wherever how why once""".split()
_PARTICLES_AND_ADVERBS = """not n't never there here then too very just also only even still again ever
more most less least much many few several quite rather really almost""".split()

FUNCTION_WORDS: frozenset[str] = frozenset(
    _DETERMINERS + _PRONOUNS + _PREPOSITIONS + _AUXILIARIES + _CONJUNCTIONS + _PARTICLES_AND_ADVERBS)

# Numbers ("3.5"), words with inner hyphens ("well-made"), the clitics SST splits off ("is n't", "it 's"),
# and runs of punctuation ("...", "--").
_WORD_PATTERN = re.compile(
    r"\d+(?:[.,]\d+)*|\w+(?:-\w+)*(?=n't\b)|n't\b|'(?:s|re|ve|ll|d|m)\b|\w+(?:-\w+)*|[^\w\s]+",
    re.IGNORECASE)


def is_punctuation(word: str) -> bool:
    """True when every character of `word` is punctuation or a symbol (Unicode categories P* and S*)."""
    return bool(word) and all(unicodedata.category(char)[0] in "PS" for char in word)


def word_class(word: str) -> str:
    """'punctuation', 'function' (in FUNCTION_WORDS, any case) or 'content'."""
    if is_punctuation(word):
        return PUNCTUATION
    if word.lower() in FUNCTION_WORDS:
        return FUNCTION
    return CONTENT


def treebank_words(text: str) -> list[str]:
    """Split a user sentence into words the way the SST trees are tokenised: punctuation and the clitics
    "n't" / "'s" become words of their own ("isn't it?" -> ["is", "n't", "it", "?"])."""
    return _WORD_PATTERN.findall(text)


# ----------------------------------------------------------------------------------------------------
# A text's words, as typed, with their character offsets (the explain API's segmentation)
# ----------------------------------------------------------------------------------------------------

def whitespace_words(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """The whitespace-separated words of `text` with each word's character offsets (punctuation stays attached to
    its word; the tokenizer splits it into subwords)."""
    spans = [match.span() for match in re.finditer(r"\S+", text)]
    return [text[start:end] for start, end in spans], spans


def tokenizer_words(tokenizer, text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """The words of the tokenizer's pre-tokenizer (BERT: whitespace and punctuation) with their character offsets
    in `text`; whitespace words when the tokenizer has none.

    The words are slices of `text` as typed: the pre-tokenizer runs on the raw text, without the normalizer
    (lowercasing, accent stripping), and its offsets point into the raw text."""
    pre_tokenizer = getattr(getattr(tokenizer, "backend_tokenizer", None), "pre_tokenizer", None)
    if pre_tokenizer is None:
        return whitespace_words(text)
    spans: list[tuple[int, int]] = []
    for _, (start, end) in pre_tokenizer.pre_tokenize_str(text):
        # Byte-level and Metaspace pieces carry the space before them ("Ġworld", "▁world"): trim to the word.
        piece = text[start:end]
        if not piece.strip():
            continue
        start += len(piece) - len(piece.lstrip())
        spans.append((start, start + len(piece.strip())))
    ordered = all(0 <= s < e <= len(text) for s, e in spans) and all(
        previous[1] <= current[0] for previous, current in zip(spans, spans[1:]))
    if not ordered:  # offsets that do not index the text (an unusual pre-tokenizer): never show wrong words
        logger.debug("pre-tokenizer offsets do not index the text; splitting %r at whitespace", text[:40])
        return whitespace_words(text)
    return [text[start:end] for start, end in spans], spans
