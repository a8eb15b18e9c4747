"""Rewriting a generated document in place rather than from scratch: a results document keeps the sections of the
one it replaces that a run has no report for (marked as kept), and a README's marked blocks (`<!-- results:NAME -->`
... `<!-- /results:NAME -->`) get new tables while the prose around them stays as written."""
from __future__ import annotations

import re


class ResultsError(ValueError):
    """The document cannot be written: a report is missing or unreadable, or a README has no block to fill (the
    message names the file)."""


KEPT = " (kept from an earlier run)"


def _sections(document: str) -> tuple[str, list[tuple[str, str]]]:
    """A Markdown document split at its `## ` headings: the text before the first, then (heading, body) pairs."""
    parts = re.split(r"^(## .*)$", document, flags=re.MULTILINE)
    return parts[0], [(parts[i], parts[i + 1]) for i in range(1, len(parts), 2)]


def keep_missing_sections(document: str, previous: str) -> str:
    """`document` followed by every section of `previous` (the results document it replaces) that it lacks, each
    heading marked as kept from an earlier run: a run without an `amortize`, `afn`, benchmark or base-size report
    does not erase those sections, and does not pass them off as its own."""
    def title(heading: str) -> str:  # what a section is, without its sources and dates in parentheses
        return heading.split(" (")[0]

    preamble, sections = _sections(document)
    present = {title(heading) for heading, _ in sections}
    kept = [(heading if heading.endswith(KEPT) else heading + KEPT, body)
            for heading, body in _sections(previous)[1] if title(heading) not in present]
    if not kept:
        return document
    return preamble + "".join(h + b for h, b in sections).rstrip("\n") + "\n\n" + "".join(
        h + b for h, b in kept).rstrip("\n") + "\n"


MARKER = re.compile(r"(<!-- results:(?P<name>[a-z_]+) -->\n)(?P<body>.*?)(<!-- /results:(?P=name) -->)", re.DOTALL)


def fill_marked_blocks(text: str, blocks: dict[str, str], where: str) -> str:
    """`text` with each `<!-- results:NAME -->` block replaced by `blocks[NAME]` (a block without a table in this
    run's reports is left as it is); a text without any marker is an error naming `where`."""
    if not MARKER.search(text):
        raise ResultsError(f"{where} has no <!-- results:NAME --> ... <!-- /results:NAME --> block to fill")

    def replace(match: re.Match) -> str:
        body = blocks.get(match.group("name"))
        return match.group(0) if body is None else f"{match.group(1)}{body}\n{match.group(4)}"

    return MARKER.sub(replace, text)
