"""One invocation's minutes for work in resumable parts (the amortize teacher's, the record's): no part is started
that would end after the deadline; the parts finished are kept and the same command run again continues."""
from __future__ import annotations

import math
import time


def invocation_deadline(minutes: float | None) -> float:
    """The wall-clock time (`time.time()`) after which one invocation starts no part: `minutes` from now (None: no
    limit, infinity)."""
    return math.inf if minutes is None else time.time() + 60.0 * float(minutes)


def starts_part(deadline: float, now: float, seconds_per_part: float | None) -> bool:
    """Whether a part may start at `now`: when a part taking the mean time of this call's parts so far
    (`seconds_per_part`; None before the first) would end by the `deadline`."""
    return now + (seconds_per_part or 0.0) <= deadline
