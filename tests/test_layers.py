"""The package's layers hold: the Python API loads no Kedro and no MLflow, and the import-linter contracts in
pyproject.toml (layers, the core free of Kedro and MLflow, no import cycles) pass, and fail when a core module
imports Kedro."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")


def loaded_modules(statement: str) -> set[str]:
    """The top-level packages a fresh interpreter has loaded after `statement`."""
    done = subprocess.run([sys.executable, "-c", f"{statement}\nimport sys\nprint(' '.join(sys.modules))"],
                          capture_output=True, text=True, check=True, cwd=PROJECT)
    return {name.split(".")[0] for name in done.stdout.split()}


@pytest.mark.parametrize("statement", ["import learned_attribution.services.explain",
                                       "from learned_attribution import Explanation, FoldExplainer, StudentExplainer, fit, "
                                       "fit_rationales",
                                       "import learned_attribution"])
def test_the_python_api_loads_neither_kedro_nor_mlflow(statement):
    loaded = loaded_modules(statement)
    assert not {"kedro", "kedro_datasets", "kedro_viz", "mlflow"} & loaded, sorted(loaded)


def lint(source_root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT), str(PROJECT / "pyproject.toml"), "--no-cache"], cwd=PROJECT,
                          capture_output=True, text=True, env={"PYTHONPATH": str(source_root), "PATH": ""})


def test_the_import_contracts_hold_and_a_core_module_importing_kedro_breaks_them(tmp_path):
    kept = lint(PROJECT / "src")
    assert kept.returncode == 0, kept.stdout[-3000:]
    copy = tmp_path / "src"
    shutil.copytree(PROJECT / "src", copy, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    runner = copy / "learned_attribution" / "core" / "models" / "runner.py"
    runner.write_text(runner.read_text().replace("import torch\n", "import kedro.io\nimport torch\n", 1))
    broken = lint(copy)
    assert broken.returncode != 0
    assert "The core imports neither Kedro nor MLflow BROKEN" in broken.stdout
    assert "learned_attribution.core.models.runner -> kedro" in broken.stdout
