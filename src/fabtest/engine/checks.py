"""Deterministic matchers: regexes, tool calls and their arguments, transcript, files.

Each check returns a ``(passed, details)`` pair; the details say what was seen so a failure can be
understood without re-running. Bad user input (invalid regex, malformed table) is a UsageError.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabtest._internal.files import path_inside
from fabtest.agents import trace_calls
from fabtest.conversation import Check, ToolCall, Turn, describe_pause
from fabtest.engine.patterns import Pattern, PatternError, compile_pattern, search
from fabtest.errors import ExpectationFailed, UsageError

Result = tuple[bool, str]

_COMPARATORS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt,
}
_NUMERIC_RE = re.compile(r"^\s*(>=|<=|>|<)\s*(-?\d+(?:\.\d+)?)\s*$")


def compile_regex(pattern: str, *, where: str) -> Pattern:
    """A user pattern, matched later with a time limit (see :mod:`fabtest.engine.patterns`)."""
    try:
        return compile_pattern(pattern)
    except PatternError as exc:
        raise UsageError(f"{where}: invalid regular expression {pattern!r}: {exc}") from None


@dataclass(frozen=True)
class ArgExpectation:
    """One row of a ``with:`` table: exact value, ``/regex/`` or a numeric comparison."""

    name: str
    expected: str
    regex: Pattern | None = None
    comparison: tuple[str, float] | None = None

    @classmethod
    def parse(cls, name: str, value: str, *, where: str) -> ArgExpectation:
        value = value.strip()
        if len(value) >= 2 and value.startswith("/") and value.endswith("/"):
            return cls(name, value, regex=compile_regex(value[1:-1], where=where))
        if m := _NUMERIC_RE.match(value):
            return cls(name, value, comparison=(m.group(1), float(m.group(2))))
        if value[:1] in "<>":
            raise UsageError(f"{where}: 'with:' value {value!r} for {name!r}: a comparison needs a number, "
                             "e.g. >= 10")
        return cls(name, value)

    def matches(self, arguments: dict[str, Any]) -> bool:
        if self.name not in arguments:
            return False
        actual = arguments[self.name]
        if self.regex is not None:
            return search(self.regex, _as_text(actual), where=f"argument {self.name!r}") is not None
        if self.comparison is not None:
            op, bound = self.comparison
            number = _as_number(actual)
            return number is not None and _COMPARATORS[op](number, bound)
        if isinstance(actual, bool):
            return self.expected.lower() == str(actual).lower()
        if isinstance(actual, (int, float)):
            number = _as_number(self.expected)
            return number is not None and float(actual) == number
        return _as_text(actual) == self.expected


def parse_with_table(rows: Sequence[Sequence[str]], *, where: str) -> list[ArgExpectation]:
    """``| argument | value |`` rows (header first) into expectations; a malformed table is a UsageError."""
    if not rows:
        raise UsageError(f"{where}: the 'with:' table is empty; expected a header | argument | value |")
    header = [cell.strip().lower() for cell in rows[0]]
    if header != ["argument", "value"]:
        raise UsageError(f"{where}: the 'with:' table must have the header | argument | value |, "
                         f"got | {' | '.join(rows[0])} |")
    if len(rows) == 1:
        raise UsageError(f"{where}: the 'with:' table has a header but no argument rows")
    expectations = []
    for row in rows[1:]:
        if not row[0].strip():
            raise UsageError(f"{where}: a row of the 'with:' table has an empty argument name")
        expectations.append(ArgExpectation.parse(row[0].strip(), row[1], where=where))
    return expectations


def call_matches(call: ToolCall, name: str, args: Sequence[ArgExpectation] = ()) -> bool:
    return call.name == name and all(a.matches(call.arguments) for a in args)


def check_called(calls: Sequence[ToolCall], name: str, args: Sequence[ArgExpectation] = ()) -> Result:
    """Did one of ``calls`` call ``name`` with matching arguments?"""
    if any(call_matches(c, name, args) for c in calls):
        return True, f"called {name}"
    same_name = [c for c in calls if c.name == name]
    if same_name:
        wanted = ", ".join(f"{a.name}={a.expected}" for a in args)
        return False, f"called {name} but not with {wanted}; calls were: {describe_calls(same_name)}"
    return False, f"did not call {name}; calls were: {describe_calls(calls)}"


def check_regex(text: str, regex: Pattern, *, where: str = "") -> Result:
    m = search(regex, text, where=where)
    return (True, f"matched {m.group(0)!r}") if m else (False, f"no match for /{regex.pattern}/")


def check_file(workdir: Path, relative: str, needle: str | None = None) -> Result:
    """Inside ``workdir`` only; a failure names the file and the needle, never the file's content."""
    path = path_inside(workdir, relative)
    if path is None:
        return False, f"{relative} is outside {workdir} (file checks stay inside the working directory)"
    if not path.is_file():
        return False, f"{relative} does not exist in {workdir}"
    if needle is None:
        return True, f"{relative} exists"
    text = path.read_text(encoding="utf-8", errors="replace")
    return (True, f"{relative} contains {needle!r}") if needle in text else (
        False, f"{relative} does not contain {needle!r}")


def describe_calls(calls: Sequence[ToolCall]) -> str:
    if not calls:
        return "(no tool calls)"
    return ", ".join(f"{c.name}({_format_args(c.arguments)})" + (" [stubbed]" if c.stubbed else "") for c in calls)


def untraced(turns: Sequence[Turn]) -> str | None:
    """Why the tool calls of these turns are not known: an agent that exports traces whose spans
    did not arrive (:mod:`fabtest.agents.trace_calls`); None when they are."""
    for turn in turns:
        reason = trace_calls.missing(turn.response)
        if reason:
            return f"turn {turn.number}: {reason}"
    return None


def expectation_failed(check: Check, turn: Turn | None) -> ExpectationFailed:
    """The error a failed or inconclusive ``must`` raises: the turn (or the conversation), the
    check, and the reply it was about."""
    verdict = "was inconclusive" if check.status == "inconclusive" else "failed"
    where = f"Turn {check.turn}" if check.turn else "Conversation"
    return ExpectationFailed(f"{where}: expectation {check.type} {check.criterion!r} (must) {verdict}: "
                             f"{check.details}\n  {describe_turn(turn)}")


def describe_turn(turn: Turn | None) -> str:
    """What the agent actually said and called, for failure messages."""
    if turn is None:
        return "no turn yet: the user has not said anything"
    text = turn.response.text
    shown = text if len(text) <= 500 else text[:497] + "..."
    paused = "".join(f"\n  agent paused: {describe_pause(p)}" for p in turn.response.pauses)
    return f"agent said: {shown!r}\n  agent called: {describe_calls(turn.tool_calls)}{paused}"


def _format_args(arguments: dict[str, Any]) -> str:
    return ", ".join(f"{k}={json.dumps(v, default=str, ensure_ascii=False)}" for k, v in arguments.items())


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
