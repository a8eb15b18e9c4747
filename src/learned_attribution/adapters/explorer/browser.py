"""The browser the explorer's tests, first-paint benchmark and screenshots drive: Debian's Chromium
(`apt-get install chromium`) through Playwright (the `dev` extra; Playwright's own browser download is not needed)."""
from __future__ import annotations

import os
import shutil

CHROMIUM_FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync")


def chromium_path() -> str | None:
    """The system Chromium (LEARNED_ATTRIBUTION_CHROMIUM overrides), None where there is none."""
    given = os.environ.get("LEARNED_ATTRIBUTION_CHROMIUM")
    return given or shutil.which("chromium") or shutil.which("chromium-browser")


def launch(playwright):
    """A headless Chromium from `playwright` (`sync_playwright().start()`), on the system's binary."""
    path = chromium_path()
    if path is None:
        raise RuntimeError("no Chromium: install Debian's package (apt-get install chromium) or set "
                           "LEARNED_ATTRIBUTION_CHROMIUM to a Chromium binary")
    return playwright.chromium.launch(executable_path=path, args=list(CHROMIUM_FLAGS))
