"""Self-contained HTML reports of one experiment and of a comparison, and the console summary.

The HTML report's modules load on first use: every run prints the console summary
(:mod:`fabtest.report.console`), and importing this package used to import the HTML report with
it, about 0.1 s on a quiet machine and over a second at the end of a run of 1,000 conversations.
"""

from __future__ import annotations

from typing import Any

__all__ = ["render_comparison_html", "render_experiment_html"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from fabtest.report import html

        return getattr(html, name)
    raise AttributeError(f"module 'fabtest.report' has no attribute {name!r}")
