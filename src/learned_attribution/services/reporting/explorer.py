"""docs/explorer.md's block: the explorer's first paint, from the record of `benchmarks/explorer_pages.py`."""
from __future__ import annotations

import pandas as pd


def first_paint_block(visits: pd.DataFrame) -> str:
    """Markdown: per view of the fold page, the browser's first-contentful-paint on the first (cold) visit, the
    median and the slowest over the visits, and the server's median response end; then the fold's size, the folds'
    loading before the server listens, and the target, met or not, on the slowest visit."""
    rows = ["| view | visits | first paint, first visit (ms) | median (ms) | slowest (ms) | response end, median (ms) "
            "| examples on the page |", "|---|---|---|---|---|---|---|"]
    for view, group in visits.groupby("view", sort=False):
        paint = group.sort_values("visit")["first_contentful_paint_ms"]
        rows.append(f"| {view} | {len(group)} | {paint.iloc[0]:.0f} | {paint.median():.0f} | {paint.max():.0f} "
                    f"| {group['response_end_ms'].median():.0f} | {int(group['examples_shown'].iloc[0])} |")
    slowest, target = visits["first_contentful_paint_ms"].max(), float(visits["target_ms"].iloc[0])
    first = visits.iloc[0]
    verdict = "met" if slowest <= target else "not met"
    rows += ["", f"{first['fold']}: {int(first['n_examples'])} held-out examples, {int(first['page_size'])} a page; the server loaded the "
                 f"folds in {first['preload_s']:.1f} s before listening. Target, first paint within "
                 f"{target / 1000:g} s: **{verdict}** (slowest visit {slowest:.0f} ms)."]
    return "\n".join(rows)
