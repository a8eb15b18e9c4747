"""Word classes for the AFN comparison: content words, function words and punctuation.

The class of a word comes from a fixed list, not a part-of-speech tagger, so results do not depend on a
tagger's version. FUNCTION_WORDS is the closed-class vocabulary of English: determiners, pronouns,
prepositions, auxiliaries and modals, conjunctions and complementisers, negation and a few closed-class
adverbs and particles (the usual content of an English stopword list), plus the clitics the Penn
Treebank tokenisation of SST splits off ("n't", "'s", "wo" of "wo n't", "ca" of "ca n't"). A word made only of
punctuation or symbol characters is punctuation; every other word (nouns, verbs, adjectives, most adverbs,
numbers) is a content word. Matching ignores case.
"""
from __future__ import annotations

import re
import unicodedata

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


def split_words(text: str) -> list[str]:
    """Split a user sentence into words the way the SST trees are tokenised: punctuation and the clitics
    "n't" / "'s" become words of their own ("isn't it?" -> ["is", "n't", "it", "?"])."""
    return _WORD_PATTERN.findall(text)
