"""Rewriting a README in place: its marked blocks (`<!-- results:NAME -->` ... `<!-- /results:NAME -->`) get new
tables while the prose around them stays as written; a block the record has no table for is an error, so a stale
block cannot stay."""
from __future__ import annotations

import re


class ResultsError(ValueError):
    """The document cannot be written: a report is missing or unreadable, or a README has no block to fill (the
    message names the file)."""


MARKER = re.compile(r"(<!-- results:(?P<name>[a-z_]+) -->\n)(?P<body>.*?)(<!-- /results:(?P=name) -->)", re.DOTALL)


def fill_marked_blocks(text: str, blocks: dict[str, str], where: str) -> str:
    """`text` with each `<!-- results:NAME -->` block replaced by `blocks[NAME]`; a text without any marker, or a
    block without a table in the reports, is an error naming `where` (and the block)."""
    if not MARKER.search(text):
        raise ResultsError(f"{where} has no <!-- results:NAME --> ... <!-- /results:NAME --> block to fill")

    def replace(match: re.Match) -> str:
        body = blocks.get(match.group("name"))
        if body is None:
            raise ResultsError(f"{where}: block `{match.group('name')}` has no table in the reports read "
                               f"(its run is not in them): add the run to the record, or remove the block")
        return f"{match.group(1)}{body}\n{match.group(4)}"

    return MARKER.sub(replace, text)
