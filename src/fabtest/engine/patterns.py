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

__all__ = ["IGNORECASE", "MATCH_TIMEOUT_S", "MAX_REPEAT", "Pattern", "RegexTimeout", "compile_pattern",
           "scenario_deadline", "search"]

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
    """Compile with the ``regex`` package (``re`` syntax); raises :data:`PatternError` when invalid
    or when its repeat counts ask for more than :data:`MAX_REPEAT` (see :func:`_check_repeats`)."""
    _check_repeats(pattern)
    return regex.compile(pattern, flags)


#: the most repetitions one pattern may ask for, nested counts multiplied: ``a{1000000000}`` or
#: ``(a{10000}){10000}`` is compiled into that many steps (gigabytes, minutes); 100,000 compile in ~0.1 s
MAX_REPEAT = 100_000
_COUNT = regex.compile(r"\{(\d*)(,?)(\d*)\}")


def _check_repeats(pattern: str) -> None:
    """PatternError when a ``{n}``/``{n,m}`` count, multiplied by the counts of the groups around it,
    exceeds :data:`MAX_REPEAT`. Escapes and character classes are skipped; group nesting is tracked."""
    stack = [1]  # the largest repetition inside each open group (the outermost "group" is the pattern)
    last = 1  # the repetition of the atom just read (a group's inner maximum after its ')')
    i = 0
    while i < len(pattern):
        char = pattern[i]
        count = _COUNT.match(pattern, i) if char == "{" else None
        if char == "\\":
            i, last = i + 2, 1
            continue
        if char == "[":
            i, last = _class_end(pattern, i), 1
            continue
        if char == "(":
            stack.append(1)
        elif char == ")" and len(stack) > 1:
            last = stack.pop()
        elif count is not None and (count.group(1) or count.group(3)):
            n = max(int(count.group(1) or 0), int(count.group(3) or 0))
            if n * last > MAX_REPEAT:
                raise PatternError(f"the repeat count {{{count.group(1)}{count.group(2)}{count.group(3)}}} asks for "
                                   f"{n * last:,} repetitions (at most {MAX_REPEAT:,}, nested counts multiplied); "
                                   "use a smaller count or + / *")
            last *= n
            stack[-1] = max(stack[-1], last)
            i = count.end()
            continue
        else:
            last = 1
        stack[-1] = max(stack[-1], last)
        i += 1


def _class_end(pattern: str, start: int) -> int:
    """The index after the ``]`` closing the character class that opens at ``start``."""
    i = start + 1
    if i < len(pattern) and pattern[i] == "^":
        i += 1
    if i < len(pattern) and pattern[i] == "]":
        i += 1
    while i < len(pattern) and pattern[i] != "]":
        i += 2 if pattern[i] == "\\" else 1
    return i + 1


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
