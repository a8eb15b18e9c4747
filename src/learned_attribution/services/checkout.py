"""The project's git checkout: which commit runs, and whether tracked files differ from it (a run's identity)."""
from __future__ import annotations

import subprocess
from pathlib import Path


def git_commit(folder: str | Path = ".") -> str | None:
    """The checked-out commit of the project, or None outside a git checkout."""
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def tracked_files_changed(folder: str | Path = ".", paths: tuple[str, ...] = ()) -> bool | None:
    """Whether the checkout's tracked files (those under `paths`, when given) differ from its commit (untracked
    files do not count), or None outside a git checkout."""
    try:
        done = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", *paths], cwd=folder,
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return bool(done.stdout.strip()) if done.returncode == 0 else None
