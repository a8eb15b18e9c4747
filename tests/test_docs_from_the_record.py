"""Every number in README.md and docs/ comes from the committed record: regenerating every generated block from
docs/record changes nothing, every recorded run's commit is in this checkout's history, and no measured value is
typed outside a generated block (a short allowlist holds what is not measured here: the papers' numbers, settings,
targets, versions)."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from learned_attribution.services.reporting.results import READMES, write_results  # the files with generated blocks

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "docs" / "record"
DOCS = (ROOT / "README.md", ROOT / "benchmarks" / "README.md", *sorted((ROOT / "docs").glob("*.md")))
GENERATED = "docs/results.md"  # written whole by `learned-attribution results`

# A measured value: a decimal number, a percentage, a ratio (1.3x), a duration or a size.
MEASURED = re.compile(r"(?<![\w.])(\d+(\.\d+)?x\b|\d+\.\d+(?!\.\d)|\d+(\.\d+)?\s?%"
                      r"|\d+(\.\d+)?\s?(ms|s|min|minutes|hours?|seconds|GB|MB|GiB|MiB)\b)")
# What is not measured here, by file: settings and names that look like measurements.
INTERVALS = "bootstrap 95% intervals"  # the intervals' level, a setting (core/metrics/plausibility.py: bootstrap_ci)
# The amortize pipeline's time target at its default sizes (services/config/amortize.py: SIZES), a goal, not a timing.
AMORTIZE_TARGET = "within 90 minutes"
ALLOWED: dict[str, tuple[str, ...]] = {
    "README.md": (INTERVALS, AMORTIZE_TARGET),
    "docs/record.md": (INTERVALS,),
    "docs/explorer.md": (INTERVALS,),
    "docs/amortize.md": (AMORTIZE_TARGET,),
    "docs/choices.md": (AMORTIZE_TARGET,),
    "docs/configuration.md": (AMORTIZE_TARGET,),
    "docs/base_size.md": ("Apache-2.0",),  # the encoder's licence
}
# The specification as handed to the project (../shared/SPEC.md): the papers' numbers and the spec's own.
NOT_SCANNED = {"docs/SPEC.md", GENERATED}


def _blocks_removed(text: str) -> str:
    text = re.sub(r"<!-- results:(\w+) -->.*?<!-- /results:\1 -->", "", text, flags=re.DOTALL)
    text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)  # commands and settings, not results
    return re.sub(r"`[^`\n]*`", "", text)


def typed_values(path: Path, name: str | None = None) -> list[str]:
    """`name: value in line` for each measured value of `path` outside its generated blocks, code and allowlist."""
    name = name or path.relative_to(ROOT).as_posix()
    allowed = ALLOWED.get(name, ())
    found = []
    for number, line in enumerate(_blocks_removed(path.read_text()).splitlines(), 1):
        for match in MEASURED.finditer(line):
            if not any(match.group(0) in entry and entry in line for entry in allowed):
                found.append(f"{name}: {match.group(0)!r} in {line.strip()[:100]!r}")
    return found


@pytest.mark.parametrize("path", [p for p in DOCS if p.relative_to(ROOT).as_posix() not in NOT_SCANNED],
                         ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_measured_value_is_typed_outside_a_generated_block(path):
    assert typed_values(path) == []


def test_the_check_finds_a_typed_value(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("It took 14.8 minutes, 1.25x the other, 25% of it, bootstrap 95% intervals.\n"
                    "<!-- results:x -->\n0.5\n<!-- /results:x -->\n`0.7` and\n```\n0.9\n```\n")
    found = typed_values(page, "docs/page.md")
    assert [entry.split(" in ")[0] for entry in found] == ["docs/page.md: '14.8'", "docs/page.md: '1.25x'",
                                                          "docs/page.md: '25%'", "docs/page.md: '95%'"]
    assert len(typed_values(page, "README.md")) == 3  # README's allowlist: the intervals' level


def test_regenerating_every_block_from_the_record_changes_nothing(tmp_path, monkeypatch):
    for name in (*READMES, GENERATED):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / name, tmp_path / name)
    monkeypatch.chdir(ROOT)  # the document names its folders as `learned-attribution results` is given them
    write_results("docs/record/reports", tmp_path / GENERATED, [tmp_path / name for name in READMES],
                  base_reports="docs/record/base_size/reports", record="docs/record")
    stale = [name for name in (*READMES, GENERATED) if (tmp_path / name).read_text() != (ROOT / name).read_text()]
    assert not stale, f"{stale} differ from what the record regenerates: run `learned-attribution results` and commit"


def test_every_recorded_run_is_in_this_checkouts_history():
    from learned_attribution.services.record.runs import recorded_runs

    runs = recorded_runs(RECORD / "reports")
    assert "crosstask" in runs
    shallow = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT, capture_output=True, text=True)
    if shallow.stdout.strip() == "true":
        pytest.skip("a shallow clone lacks the history to tell whether a recorded run's commit is an ancestor")
    for pipeline, run in runs.items():
        known = subprocess.run(["git", "merge-base", "--is-ancestor", run.commit, "HEAD"], cwd=ROOT,
                               capture_output=True, text=True)
        assert known.returncode == 0, f"the recorded {run.label} is not an ancestor of HEAD ({known.stderr.strip()})"
