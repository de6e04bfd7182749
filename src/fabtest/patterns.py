"""Regular expressions written by users, matched with a time limit.

A pattern in ``must match``, ``not match``, a topic trigger or a ``with:`` argument matcher runs on
text the agent produced, so one catastrophic pattern (``^(a+)+$``) could otherwise hang the run
forever: Python's ``re`` cannot be interrupted. The ``regex`` package can (``timeout=``), so every
user pattern is compiled with it and searched with a limit: :data:`MATCH_TIMEOUT_S` per match,
never past the scenario's deadline. A timed-out match is :class:`RegexTimeout`, the scenario's
``error``, naming the pattern.
"""

from __future__ import annotations

import contextvars
import time
from typing import Any

import regex

from fabtest.errors import UsageError

__all__ = ["IGNORECASE", "MATCH_TIMEOUT_S", "Pattern", "RegexTimeout", "compile_pattern", "scenario_deadline", "search"]

#: the longest one match of a user pattern may take (seconds); a sane pattern needs microseconds
MATCH_TIMEOUT_S = 1.0

Pattern = regex.Pattern
PatternError = regex.error
IGNORECASE = regex.IGNORECASE

#: time.monotonic() by which the running scenario must end (None: no scenario limit)
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("fabtest_scenario_deadline", default=None)


class RegexTimeout(UsageError):
    """A user pattern took longer than its limit (catastrophic backtracking): failure type ``error``."""


def scenario_deadline(deadline: float | None) -> None:
    """Set the running scenario's deadline (None when it ends), so checks stop at it too."""
    _DEADLINE.set(deadline)


def compile_pattern(pattern: str, flags: int = 0) -> Any:
    """Compile with the ``regex`` package (``re`` syntax); raises :data:`PatternError` when invalid."""
    return regex.compile(pattern, flags)


def search(compiled: Any, text: str, *, where: str = "") -> Any:
    """``compiled.search(text)`` bounded by :data:`MATCH_TIMEOUT_S` and the scenario deadline."""
    limit = MATCH_TIMEOUT_S
    deadline = _DEADLINE.get()
    if deadline is not None:
        limit = max(0.01, min(limit, deadline - time.monotonic()))
    try:
        return compiled.search(text, timeout=limit)
    except TimeoutError:
        prefix = f"{where}: " if where else ""
        raise RegexTimeout(
            f"{prefix}the pattern /{compiled.pattern}/ took longer than {limit:g}s on a {len(text)}-character text "
            "and was stopped (catastrophic backtracking: nested repetition such as (a+)+); simplify the pattern"
        ) from None
