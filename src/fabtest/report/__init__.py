"""Self-contained HTML reports of one experiment and of a comparison."""

from fabtest.report.html import render_comparison_html, render_experiment_html

__all__ = ["render_comparison_html", "render_experiment_html"]
