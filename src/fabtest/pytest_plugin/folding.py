"""One pytest failure block per distinct failure: the runs of a scenario that failed the same way
(``--fabtest-iterations 50`` of one broken step) are folded into a line.

Fifty identical blocks, each with its conversation, pushed fabtest's own summary off the screen.
While pytest writes its failure section and short summary, its list of failed reports holds only
the first run of each (scenario, failure) pair; the list is put back before the final counts, so
"50 failed" stays true, and the experiment file keeps every run.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["folded_failures"]

_ITERATION = re.compile(r"-?iter\d+(?=\])|@iteration\d+$")


def _key(report: Any) -> tuple[str, str]:
    """The scenario (its iteration left out) and the first two lines of how it failed."""
    text = str(getattr(report, "longreprtext", "") or "")
    return _ITERATION.sub("", str(report.nodeid)), "\n".join(text.strip().splitlines()[:2])


@contextmanager
def folded_failures(terminalreporter: Any) -> Iterator[list[str]]:
    """Inside: ``stats["failed"]`` with one report per distinct failure. Yields the fold lines to
    write after pytest's summary (empty when nothing was folded)."""
    stats = terminalreporter.stats
    failed = list(stats.get("failed", []))
    kept: dict[tuple[str, str], list[Any]] = {}
    for report in failed:
        kept.setdefault(_key(report), []).append(report)
    lines = [f"... and {len(runs) - 1} more run{'s' if len(runs) > 2 else ''} of {runs[0].nodeid} failed the same "
             "way (folded above; every run is in the experiment file)" for runs in kept.values() if len(runs) > 1]
    if lines:
        stats["failed"] = [runs[0] for runs in kept.values()]
    try:
        yield lines
    finally:
        if lines:
            stats["failed"] = failed
