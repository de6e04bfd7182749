"""The page shell every ``fabtest view`` page shares: head, navigation, escaping, links.

Pages live at different depths (``index.html``, ``exp/<id>.html``, ``exp/<id>/s3.html``), so
every link is made relative with the page's ``root`` prefix: the same HTML works served and as
files opened from a CI artifact. Everything from an experiment is escaped here or with ``e``
(agent text, tool results and names are untrusted HTML).
"""

from __future__ import annotations

import re
from html import escape
from typing import Any
from urllib.parse import quote

__all__ = ["as_dict", "compare_path", "conversation_path", "e", "experiment_path", "link", "page", "scenario_slug"]


def e(value: Any) -> str:
    """Escaped text (quotes too: safe inside attributes)."""
    return escape("" if value is None else str(value), quote=True)


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` when it is an object, else an empty one (a hand-edited file may have anything)."""
    return value if isinstance(value, dict) else {}


def _slug(experiment_id: str) -> str:
    return quote(experiment_id, safe="")


def experiment_path(experiment_id: str) -> str:
    return f"exp/{_slug(experiment_id)}.html"


def scenario_slug(scenario_id: str) -> str:
    """A stable id as a file name (``example:3934b59b419c`` → ``example_3934b59b419c``)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", scenario_id)


def conversation_path(experiment_id: str, scenario_id: str, iteration: int) -> str:
    """The page of one run of one scenario of an experiment."""
    return f"exp/{_slug(experiment_id)}/{scenario_slug(scenario_id)}-r{int(iteration)}.html"


def compare_path(baseline_id: str, current_id: str) -> str:
    return f"compare/{_slug(baseline_id)}--{_slug(current_id)}.html"


def link(root: str, path: str, text: Any, cls: str = "") -> str:
    attr = f' class="{e(cls)}"' if cls else ""
    return f'<a href="{e(root + path)}"{attr}>{e(text)}</a>'


_ON = ' class="on"'
_NAV = (("index.html", "Experiments"), ("trends.html", "Trends"), ("compare.html", "Compare"),
        ("faults.html", "Faults"))


def page(title: str, root: str, body: str, header: str = "", active: str = "") -> str:
    """A whole page: the report's CSS and the view's own (shared files, not inlined: a static build
    has tens of thousands of pages), the navigation bar, ``header`` (already HTML) and ``body``
    (already HTML)."""
    nav = "".join(
        f'<a href="{e(root + path)}"{_ON if path == active else ""}>{e(text)}</a>' for path, text in _NAV)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{e(title)}</title><link rel="stylesheet" href="{e(root)}assets/report.css">'
        f'<link rel="stylesheet" href="{e(root)}assets/view.css"></head><body>'
        f'<nav class="viewnav"><span class="brand">fabtest view</span>{nav}</nav>'
        f"{header}<main>{body}<footer>fabtest view</footer></main>"
        f'<script src="{e(root)}assets/view.js"></script></body></html>\n'
    )
