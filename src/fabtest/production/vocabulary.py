"""The ``Then`` steps ``fabtest score`` checks on a logged conversation, worded as in a feature.

The wording is the step vocabulary's (docs/reference/steps.md, :mod:`fabtest.pytest_plugin.steps`
and ``tool_steps``), and every step calls the same :class:`~fabtest.engine.scenario.ScenarioState`
method the pytest step calls, so a check is recorded, batched and judged exactly as in a test run
(``tests/production`` checks that each pattern here is a step of the plugin too). Only the steps
that read a finished conversation are here: no ``When``, no simulated user's goal, no files, no
end state. "The response" is the conversation's last reply. The cost is the agent's logged tokens,
priced as a run prices them (the judge scoring it is not the conversation's cost).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fabtest.config.criteria import Criterion, resolve
from fabtest.conversation import Mode
from fabtest.engine import budget, checks, trajectory
from fabtest.engine.scenario import ScenarioState
from fabtest.errors import UsageError
from fabtest.experiment.cost import price_table

__all__ = ["Step", "apply", "define", "is_definition"]

_MODE = r"(?P<mode>should|must)"


def _q(name: str) -> str:
    return f'"(?P<{name}>[^"]*)"'


@dataclass(frozen=True)
class Step:
    """A step as written: its words, ``file:line``, and its data table (rows of cells), if any."""

    text: str
    where: str
    table: list[list[str]] = field(default_factory=list)


def _mode(groups: Mapping[str, Any]) -> Mode:
    return "must" if groups["mode"] == "must" else "should"


def _satisfy(state: ScenarioState, g: Mapping[str, Any], _step: Step) -> None:
    scope = {"the response": "response", "every response": "every", "the conversation": "conversation"}[g["scope"]]
    state.satisfy(resolve(g["criterion"], state.criteria), _mode(g), scope)


def _match(state: ScenarioState, g: Mapping[str, Any], step: Step) -> None:
    regex = checks.compile_regex(g["pattern"], where=step.where)
    turn = state.last_turn
    passed, details = checks.check_regex(turn.response.text, regex, where=step.where)
    kind = "not_match" if g["neg"] else "match"
    state.deterministic(kind, _mode(g), f"{kind}:/{g['pattern']}/", (passed != bool(g["neg"]), details),
                        turn=turn.number)


def _call(state: ScenarioState, g: Mapping[str, Any], step: Step) -> None:
    args = checks.parse_with_table(step.table, where=step.where) if g.get("with") else []
    turn = state.last_turn
    passed, details = checks.check_called(turn.tool_calls, g["tool"], args)
    kind = "not_call_tool" if g["neg"] else "call_tool"
    state.tool_check(kind, _mode(g), f"{kind}:{g['tool']}", (passed != bool(g["neg"]), details), turn=turn.number,
                     data={"tool": g["tool"], "with": [[a.name, a.expected] for a in args]})


def _include(state: ScenarioState, g: Mapping[str, Any], _step: Step) -> None:
    state.includes_call(g["tool"], _mode(g), negated=bool(g["neg"]))


def _turns(state: ScenarioState, g: Mapping[str, Any], _step: Step) -> None:
    actual, limit = len(state.conversation.turns), int(g["n"])
    state.record_check("turn_count", _mode(g), f"turn_count<={limit}", "passed" if actual <= limit else "failed",
                       f"{actual} turn{'' if actual == 1 else 's'} (max {limit})",
                       data={"max": limit, "actual": actual})


def _cost(state: ScenarioState, g: Mapping[str, Any], _step: Step) -> None:
    limit = float(g["limit"])
    spent, unpriced = budget.conversation_cost(state.conversation.turns, {}, {}, price_table(state.settings.prices))
    status, details, data = budget.cost_outcome(limit, spent, unpriced)
    state.record_check("cost", _mode(g), f"cost<${limit:g}", status, details, data=data)


def _latency(state: ScenarioState, g: Mapping[str, Any], _step: Step) -> None:
    state.check_latency(float(g["limit"]), _mode(g), every=g["which"] == "every response")


def _transcript(state: ScenarioState, g: Mapping[str, Any], _step: Step) -> None:
    ok = g["text"] in state.conversation.transcript()
    state.record_check("transcript_contains", _mode(g), f"transcript:{g['text']}", "passed" if ok else "failed",
                       f"transcript {'contains' if ok else 'does not contain'} {g['text']!r}")


def _trajectory(kind: str, label: Callable[[Mapping[str, Any], list[str]], str],
                tools: Callable[[Mapping[str, Any], Step], list[str]],
                extra: Callable[[Mapping[str, Any]], dict[str, Any]] = lambda g: {}) -> Callable[..., None]:
    def check(state: ScenarioState, g: Mapping[str, Any], step: Step) -> None:
        names = tools(g, step)
        if not names:
            raise UsageError(f"{step.where}: name at least one tool")
        turn = state.last_turn
        scoped = (list(turn.tool_calls), turn.number, "turn") if g["scope"] == "the agent" else (
            state.conversation.tool_calls, None, "conversation")
        data: dict[str, Any] = {"tools": names, **extra(g)}
        result = trajectory.evaluate(kind, data, scoped[0])
        assert result is not None, (kind, data)
        state.tool_check(kind, _mode(g), label(g, names), result, turn=scoped[1], data={"scope": scoped[2], **data})
    return check


def _table_tools(_g: Mapping[str, Any], step: Step) -> list[str]:
    rows = step.table
    if not rows or [c.strip().lower() for c in rows[0]] != ["tool"] or len(rows) < 2:
        raise UsageError(f"{step.where}: the tools table needs the header | tool | and one row per expected call")
    return [row[0].strip() for row in rows[1:]]


_SIGN = {"at most": "<=", "at least": ">=", "exactly": "=="}
_HOW = {"order": "in order", "exact order": "exact", "any order": "any order"}
_SCOPE = r"(?P<scope>the agent|the conversation)"

#: (pattern, check): the first pattern that matches the whole step text wins, as in pytest-bdd
STEPS: tuple[tuple[re.Pattern[str], Callable[[ScenarioState, Mapping[str, Any], Step], None]], ...] = tuple(
    (re.compile(pattern), check) for pattern, check in (
        (r"(?P<scope>the response|every response|the conversation) " + _MODE + r" satisfy " + _q("criterion"),
         _satisfy),
        (r"the response " + _MODE + r' (?P<neg>not )?match "(?P<pattern>.*)"', _match),
        (r"the agent " + _MODE + r" (?P<neg>not )?call " + _q("tool") + r"(?P<with> with:)?", _call),
        (r"the conversation " + _MODE + r" (?P<neg>not )?include a call to " + _q("tool"), _include),
        (r"the conversation " + _MODE + r" take at most (?P<n>\d+) turns?", _turns),
        (r"the conversation " + _MODE + r" cost less than \$(?P<limit>\d+(?:\.\d+)?)", _cost),
        (r"(?P<which>every response|the response) " + _MODE + r" take less than (?P<limit>\d+(?:\.\d+)?) seconds?",
         _latency),
        (r"the transcript " + _MODE + r" contain " + _q("text"), _transcript),
        (r"the response " + _MODE + r" be grounded in " + _q("source"),
         lambda s, g, _st: s.grounded_in(g["source"], _mode(g))),
        (r"the response " + _MODE + r" have the intent " + _q("intent"),
         lambda s, g, _st: s.intent(g["intent"], _mode(g))),
        (_SCOPE + " " + _MODE + r" call " + _q("first") + r" before " + _q("then"),
         _trajectory("call_order", lambda g, t: f"call_order:{t[0]}<{t[1]}", lambda g, _s: [g["first"], g["then"]])),
        (_SCOPE + " " + _MODE + r" call the tools in (?P<how>exact order|order|any order):",
         _trajectory("tool_sequence", lambda g, t: f"tool_sequence:{_HOW[g['how']]}:{','.join(t)}", _table_tools,
                     lambda g: {"match": _HOW[g["how"]]})),
        (_SCOPE + " " + _MODE + r" call " + _q("tool") + r" (?P<bound>at most|at least|exactly) (?P<n>\d+) times?",
         _trajectory("call_count", lambda g, t: f"call_count:{t[0]}{_SIGN[g['bound']]}{g['n']}",
                     lambda g, _s: [g["tool"]], lambda g: {"bound": g["bound"], "limit": int(g["n"])})),
        (_SCOPE + " " + _MODE + r" only call tools from: " + _q("tools"),
         _trajectory("only_tools", lambda g, t: f"only_tools:{','.join(t)}",
                     lambda g, _s: trajectory.parse_tool_list(g["tools"]))),
    ))

_CRITERION = re.compile(r"the criterion " + _q("name") + r" means " + _q("description"))


def is_definition(text: str) -> bool:
    """``Given the criterion "x" means "..."`` or ``Given the criteria:``: words defined, nothing done."""
    return bool(_CRITERION.fullmatch(text)) or text == "the criteria:"


def define(state: ScenarioState, step: Step) -> None:
    """Define the criteria of a definition step (:func:`is_definition`)."""
    try:
        if match := _CRITERION.fullmatch(step.text):
            state.define_criterion(Criterion(match["name"], match["description"]))
            return
        rows = step.table
        if not rows or [c.strip().lower() for c in rows[0]][:2] != ["criterion", "description"]:
            raise UsageError(f"{step.where}: the criteria table needs the header | criterion | description |")
        for row in rows[1:]:
            state.define_criterion(Criterion(row[0].strip(), row[1].strip()))
    except ValueError as exc:
        raise UsageError(f"{step.where}: {exc}") from None


def matching(text: str) -> Callable[[ScenarioState, Mapping[str, Any], Step], None] | None:
    """The check a step's words name, or None when ``fabtest score`` has no such step."""
    return next((check for pattern, check in STEPS if pattern.fullmatch(text)), None)


def apply(state: ScenarioState, step: Step) -> None:
    """Run one ``Then`` step on ``state`` (its conversation already holds the logged turns)."""
    for pattern, check in STEPS:
        if match := pattern.fullmatch(step.text):
            state.where = step.where
            check(state, match.groupdict(), step)
            return
    raise UsageError(f"{step.where}: not a step fabtest score can check on a logged conversation: {step.text!r}")
