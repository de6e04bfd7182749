"""Trajectory matchers: the order, the count and the set of an agent's tool calls.

A policy like "verify the account before changing the plan" is a statement about the sequence of
calls, not about one call. The modes follow ADK's trajectory evaluator (EXACT, IN_ORDER,
ANY_ORDER) and promptfoo's ``trajectory:tool-sequence``: ``exact`` is the whole sequence and
nothing else, ``in order`` the expected calls as a subsequence (others may come between),
``any order`` every expected call present (as often as listed), others allowed. Each function
returns the ``(passed, details)`` pair of :mod:`fabtest.engine.checks`, the details naming the
calls seen.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Literal

from fabtest.conversation import ToolCall
from fabtest.engine.checks import Result

__all__ = ["SequenceMode", "check_before", "check_count", "check_only", "check_sequence", "parse_tool_list"]

SequenceMode = Literal["exact", "in order", "any order"]
Bound = Literal["at most", "at least", "exactly"]


def _names(calls: Sequence[ToolCall]) -> list[str]:
    return [c.name for c in calls]


def _seen(calls: Sequence[ToolCall]) -> str:
    return " -> ".join(_names(calls)) if calls else "(no tool calls)"


def check_before(calls: Sequence[ToolCall], first: str, then: str) -> Result:
    """``first`` was called, ``then`` was called, and no ``then`` came before the first ``first``."""
    names = _names(calls)
    if then not in names:
        return False, f"did not call {then}; calls were: {_seen(calls)}"
    if first not in names:
        return False, f"called {then} but never {first}; calls were: {_seen(calls)}"
    if names.index(then) < names.index(first):
        return False, (f"called {then} (call {names.index(then) + 1}) before {first} "
                       f"(call {names.index(first) + 1}); calls were: {_seen(calls)}")
    return True, f"called {first} before {then}: {_seen(calls)}"


def check_sequence(calls: Sequence[ToolCall], expected: Sequence[str], mode: SequenceMode) -> Result:
    """The calls against ``expected`` in one of the three modes (see the module docstring)."""
    names = _names(calls)
    wanted = " -> ".join(expected)
    if mode == "exact":
        if names == list(expected):
            return True, f"called exactly {wanted}"
        return False, f"expected exactly {wanted}; calls were: {_seen(calls)}"
    if mode == "in order":
        position = 0
        for name in names:
            if position < len(expected) and name == expected[position]:
                position += 1
        if position == len(expected):
            return True, f"called {wanted} in order: {_seen(calls)}"
        return False, (f"expected {wanted} in order, missing {expected[position]} "
                       f"after {' -> '.join(expected[:position]) or 'the start'}; calls were: {_seen(calls)}")
    missing = Counter(expected) - Counter(names)
    if not missing:
        return True, f"called {', '.join(expected)}: {_seen(calls)}"
    short = ", ".join(f"{name}" + (f" ({n} more)" if n > 1 else "") for name, n in missing.items())
    return False, f"did not call {short}; calls were: {_seen(calls)}"


def check_count(calls: Sequence[ToolCall], tool: str, bound: Bound, limit: int) -> tuple[bool, str, int]:
    """How often ``tool`` was called against ``at most`` / ``at least`` / ``exactly`` ``limit``."""
    actual = _names(calls).count(tool)
    ok = {"at most": actual <= limit, "at least": actual >= limit, "exactly": actual == limit}[bound]
    times = "time" if actual == 1 else "times"
    return ok, f"called {tool} {actual} {times} ({bound} {limit})", actual


def check_only(calls: Sequence[ToolCall], allowed: Sequence[str]) -> Result:
    """Every call is to one of ``allowed`` (DeepEval's ToolPermission; no calls at all passes)."""
    others = [c.name for c in calls if c.name not in allowed]
    if others:
        outside = ", ".join(dict.fromkeys(others))
        return False, f"called {outside}, outside {', '.join(allowed)}; calls were: {_seen(calls)}"
    return True, f"called only {', '.join(allowed)}: {_seen(calls)}"


def parse_tool_list(text: str) -> list[str]:
    """``"a, b, c"`` as names (blanks dropped)."""
    return [name.strip() for name in text.split(",") if name.strip()]


#: the check kinds of this module, as recorded (``Check.type``)
KINDS = ("call_order", "tool_sequence", "call_count", "only_tools")


def evaluate(kind: str, data: dict[str, object], calls: Sequence[ToolCall]) -> Result | None:
    """Run a recorded trajectory check again from its ``data`` (the step records all it needs, so
    ``fabtest replay`` re-checks it on a new conversation); None when ``data`` is not one of ours."""
    tools = data.get("tools")
    if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
        return None
    names = [str(t) for t in tools]
    if kind == "call_order" and len(names) == 2:
        return check_before(calls, names[0], names[1])
    if kind == "tool_sequence" and data.get("match") in ("exact", "in order", "any order"):
        return check_sequence(calls, names, data["match"])  # type: ignore[arg-type]
    if kind == "call_count" and len(names) == 1 and data.get("bound") in ("at most", "at least", "exactly") \
            and isinstance(data.get("limit"), int):
        ok, details, _ = check_count(calls, names[0], data["bound"], data["limit"])  # type: ignore[arg-type]
        return ok, details
    if kind == "only_tools":
        return check_only(calls, names)
    return None
