"""Texts to explain or to train a student on, from a user's file: .txt (one text a line), .jsonl (`text` or `words`,
optional `id`) or .csv (a text column, optional `id`). Every fault names the file and line (`InputError`).
Read by the CLI (`explain --input`, `fit --input`) and by the amortize pipeline's own-classifier namespace."""
from __future__ import annotations

import csv
import json
import logging
from pathlib import Path

from learned_attribution.core.errors import InputError

logger = logging.getLogger(__name__)

FORMATS = (".txt", ".jsonl", ".csv")
BOM = b"\xef\xbb\xbf"  # UTF-8 byte-order mark (Excel and Notepad save CSV and text with one)


def _decoded_lines(path: Path) -> list[str]:
    """The file's lines (line ends kept), decoded as UTF-8 without a leading byte-order mark; a line that is not
    valid UTF-8 is an error naming it."""
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise InputError(f"{path}: cannot be read ({error.strerror})") from error
    raw = raw.removeprefix(BOM)  # else it would be part of the first text, JSON object or CSV column name
    lines = []
    for number, line in enumerate(raw.splitlines(keepends=True), start=1):
        try:
            lines.append(line.decode("utf-8"))
        except UnicodeDecodeError as error:
            raise InputError(f"{path} line {number}: not valid UTF-8 ({error.reason} at byte {error.start})") \
                from error
    return lines


def require_text(value: str, where: str) -> str:
    if not value.strip():
        raise InputError(f"{where}: empty text")
    return value


def read_inputs(path: str | Path, text_column: str = "text") -> tuple[list[str | list[str]], list[str]]:
    """Texts (or word lists) and ids from a .txt (one text a line; blank lines skipped and counted in the log),
    .jsonl (`text` or `words`, optional `id`) or .csv file (`text_column`, optional `id` column), UTF-8 with or
    without a byte-order mark. Ids default to the line number."""
    path = Path(path)
    if path.suffix not in FORMATS:
        raise InputError(f"{path}: unknown input format {path.suffix!r}; expected one of {list(FORMATS)}")
    lines = _decoded_lines(path)
    texts: list[str | list[str]] = []
    ids: list[str] = []
    if path.suffix == ".txt":
        blank = []
        for number, line in enumerate(lines, start=1):
            if not line.strip():  # a trailing or separating blank line is no text; ids stay line numbers
                blank.append(number)
                continue
            texts.append(line.rstrip("\r\n"))
            ids.append(str(number))
        if blank:
            shown = ", ".join(map(str, blank[:10])) + (", ..." if len(blank) > 10 else "")
            logger.warning("%s: skipped %d blank line%s (line%s %s)", path, len(blank), "s" * (len(blank) > 1),
                           "s" * (len(blank) > 1), shown)
    elif path.suffix == ".jsonl":
        for number, line in enumerate(lines, start=1):
            where = f"{path} line {number}"
            if not line.strip():
                raise InputError(f"{where}: empty line (one JSON object a line)")
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise InputError(f"{where}: not valid JSON ({error.msg})") from error
            if not isinstance(record, dict) or ("text" not in record and "words" not in record):
                raise InputError(f"{where}: expected an object with a 'text' (string) or 'words' (list of "
                                        f"strings) field, got {str(record)[:80]}")
            if "words" in record:
                words = record["words"]
                if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
                    raise InputError(f"{where}: 'words' must be a list of strings")
                if not any(w.strip() for w in words):
                    raise InputError(f"{where}: empty text")
                texts.append(words)
            else:
                if not isinstance(record["text"], str):
                    raise InputError(f"{where}: 'text' must be a string")
                texts.append(require_text(record["text"], where))
            ids.append(str(record.get("id", number)))
    else:
        reader = csv.DictReader(lines)
        columns = reader.fieldnames or []
        if text_column not in columns:
            raise InputError(f"{path} line 1: no column {text_column!r} (columns: {columns}); "
                                    "choose one with --text-column")
        for record in reader:
            where = f"{path} line {reader.line_num}"
            texts.append(require_text(record[text_column] or "", where))
            ids.append(str(record["id"]) if record.get("id") not in (None, "") else str(reader.line_num))
    if not texts:
        raise InputError(f"{path}: no texts")
    return texts, ids
