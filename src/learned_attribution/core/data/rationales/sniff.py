"""Which registered format reads a rationale file: the one place that decides it.

Every registered format is asked whether it claims the file (`RationaleFormat.claims`: its suffix, its first JSONL
record or its top-level JSON list). One claim: that format reads it. The built-in formats whose claims overlap are
ranked by `ORDER`, as they always were: a word-level record may carry span fields beside its `words` (its words are
read), a span JSONL record doccano's fields beside its `spans` (its spans are read). Any other overlap, a new format
claiming a file another one claims, is refused in one line naming both. A file no format claims is word-level
(`FALLBACK`: a datasets folder or table file, or a JSONL file whose first line the word-level reader names), except
a JSONL record with a `text` but no spans, which is named with what each span format needs.
"""
from __future__ import annotations

from learned_attribution.core.data.rationales import doccano, span_jsonl, word_level
from learned_attribution.core.data.rationales.records import RationaleFileError, SourceFile
from learned_attribution.core.data.rationales.registry import FORMATS, RationaleFormat, build_format

ORDER = (word_level.NAME, span_jsonl.NAME, doccano.NAME)
FALLBACK = word_level.NAME


def recognise(file: SourceFile) -> RationaleFormat:
    """The registered format that reads `file` (the rules above); a file two unranked formats claim is a
    `RationaleFileError` naming both."""
    claimants = [name for name, cls in FORMATS.items() if cls().claims(file)]
    ranked = [name for name in ORDER if name in claimants]
    unranked = [name for name in claimants if name not in ORDER]
    if unranked and len(claimants) > 1:
        other = next(name for name in claimants if name != unranked[0])
        raise RationaleFileError(f"{file.source}: both the {unranked[0]!r} and the {other!r} rationale formats claim "
                                 "this file; a file must be of one format (drop the other's fields, or rename it)")
    if claimants:
        return build_format(unranked[0] if unranked else ranked[0])
    record = file.first_object()
    if record is not None and "text" in record:
        hints = [cls.record_hint for cls in sorted(FORMATS.values(), key=_rank) if cls.record_hint]
        raise RationaleFileError(f"{file.source}, line {file.first_record[0]}: a record with 'text' needs its spans: "
                                 + ", or ".join(hints))
    return build_format(FALLBACK)


def _rank(cls: type[RationaleFormat]) -> int:
    """A format's place in ORDER (an unranked one after the ranked, in the order registered)."""
    return ORDER.index(cls.name) if cls.name in ORDER else len(ORDER)
