"""The error of bad user input: its message names the text, file and line, fold, method or setting at fault."""
from __future__ import annotations


class InputError(ValueError):
    """Bad input to the Python API, the CLI or a pipeline; the message names what is at fault and how to fix it."""
