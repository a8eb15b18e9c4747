"""The learned methods' names come from one registry (`core/explainers/learned.py`): in Python code a learned method's
name appears as a literal only where it is registered and defined. Kedro dataset names (pipeline.py) and parameter
keys (services/config/) are not method names."""
from __future__ import annotations

import io
import tokenize
from pathlib import Path

from learned_attribution.core.explainers import METHODS
from learned_attribution.core.explainers.learned import LEARNED, LearnedMethod

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "learned_attribution"
DEFINED_IN = PACKAGE / "core" / "explainers" / "learned.py"


def name_literals(source: str, names) -> list[str]:
    """`line: literal` for each string literal of the code that is one of `names` (docstrings are longer)."""
    quoted = {f'"{name}"' for name in names} | {f"'{name}'" for name in names}
    return [f"{token.start[0]}: {token.string}" for token in tokenize.generate_tokens(io.StringIO(source).readline)
            if token.type == tokenize.STRING and token.string in quoted]


def test_the_registry_holds_every_learned_method():
    assert set(LEARNED) == {name for name, method in METHODS.items() if issubclass(method, LearnedMethod)}


def test_the_check_finds_a_literal():
    assert name_literals('x = {"expnet_plus": 1}\n"""expnet_plus in a docstring"""\n', LEARNED) == ['1: "expnet_plus"']


def test_a_learned_method_is_named_only_where_it_is_registered():
    skipped = [DEFINED_IN, *PACKAGE.glob("pipelines/*/pipeline.py"), *(PACKAGE / "services" / "config").glob("*.py")]
    found = {str(path.relative_to(PACKAGE)): literals for path in sorted(PACKAGE.rglob("*.py"))
             if path not in skipped and (literals := name_literals(path.read_text(), LEARNED))}
    assert found == {}, f"name these through core/explainers/learned.py's constants: {found}"
