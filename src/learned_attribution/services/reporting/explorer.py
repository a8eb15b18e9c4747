"""docs/explorer.md's block: the explorer's first paint, from the record of `benchmarks/explorer_pages.py`."""
from __future__ import annotations

import pandas as pd

from .tables import table_lines

COLUMNS = ["view", "visits", "first paint, first visit (ms)", "median (ms)", "slowest (ms)",
           "response end, median (ms)", "examples on the page"]


def first_paint_block(visits: pd.DataFrame) -> str:
    """Markdown: per view of the fold page, the browser's first-contentful-paint on the first (cold) visit, the
    median and the slowest over the visits, and the server's median response end; then the fold's size, the folds'
    loading before the server listens, and the target, met or not, on the slowest visit."""
    rows = []
    for view, group in visits.groupby("view", sort=False):
        paint = group.sort_values("visit")["first_contentful_paint_ms"]
        rows.append([view, len(group), f"{paint.iloc[0]:.0f}", f"{paint.median():.0f}", f"{paint.max():.0f}",
                     f"{group['response_end_ms'].median():.0f}", int(group["examples_shown"].iloc[0])])
    slowest, target = visits["first_contentful_paint_ms"].max(), float(visits["target_ms"].iloc[0])
    first = visits.iloc[0]
    verdict = "met" if slowest <= target else "not met"
    return "\n".join([table_lines(COLUMNS, rows), "",
                      f"{first['fold']}: {int(first['n_examples'])} held-out examples, {int(first['page_size'])} a "
                      f"page; the server loaded the folds in {first['preload_s']:.1f} s before listening. Target, "
                      f"first paint within {target / 1000:g} s: **{verdict}** (slowest visit {slowest:.0f} ms)."])
