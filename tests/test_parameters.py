"""services/config/ is the one reader of Kedro parameter dicts: no other module of the package reads a key of a
parameter block it is given (a function argument named after a block, or `params`, annotated as a dict or
mapping). The nodes pass their blocks to the config parsers; the hooks read `RunParameters`."""
from __future__ import annotations

import ast
from pathlib import Path

import yaml

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "learned_attribution"
CONFIG = PACKAGE / "services" / "config"
BLOCKS = sorted({key for path in (PACKAGE.parents[1] / "conf" / "base").glob("parameters*.yml")
                 for key in (yaml.safe_load(path.read_text()) or {})} | {"params", "parameters"})


def _dict_arguments(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The function's arguments named after a parameter block and annotated as a dict or mapping."""
    arguments = [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]
    return {a.arg for a in arguments if a.arg in BLOCKS and a.annotation is not None
            and any(word in ast.unparse(a.annotation) for word in ("dict", "Mapping"))}


def parameter_reads(source: str) -> list[str]:
    """`name["key"]` and `name.get("key")` on a parameter block argument, as `line: code`."""
    found = []
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        names = _dict_arguments(function)
        for node in ast.walk(function):
            read = None
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in names \
                    and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                read = node
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                  and isinstance(node.func.value, ast.Name) and node.func.value.id in names):
                read = node
            if read is not None:
                found.append(f"{read.lineno}: {ast.unparse(read)}")
    return found


def test_the_check_finds_a_node_that_reads_its_block():
    source = ("def node(crosstask: dict[str, Any], seed: int):\n    return crosstask['expnet_plus'], seed\n"
              "def hook(params: Mapping):\n    return params.get('mlflow')\n"
              "def table(ablation: pd.DataFrame):\n    return ablation['fold']\n")
    assert parameter_reads(source) == ["2: crosstask['expnet_plus']", "4: params.get('mlflow')"]


def test_only_the_config_package_reads_parameter_blocks():
    offenders = {str(path.relative_to(PACKAGE)): reads for path in sorted(PACKAGE.rglob("*.py"))
                 if CONFIG not in path.parents and (reads := parameter_reads(path.read_text()))}
    assert offenders == {}, f"parse these blocks in services/config/: {offenders}"
