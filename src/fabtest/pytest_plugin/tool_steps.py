"""The steps about what the agent did with its tools: trajectories, stubs, seeded history, end state.

Registered as a pytest plugin next to :mod:`fabtest.pytest_plugin.steps` (whose helpers it uses),
so the two vocabularies read as one. ``the agent`` means the latest turn, ``the conversation``
every turn so far, as in the single-call steps.
"""

from __future__ import annotations

from typing import Literal

from pytest_bdd import parsers, then

from fabtest.conversation import ToolCall
from fabtest.engine import trajectory
from fabtest.engine.scenario import ScenarioState
from fabtest.errors import UsageError
from fabtest.pytest_plugin.steps import MODE, _check_tool_name, _mode, _q, _table

_SCOPE = r"(?P<scope>the agent|the conversation)"


def _calls(state: ScenarioState, scope: str) -> tuple[list[ToolCall], int | None, Literal["turn", "conversation"]]:
    """The calls a step looks at: the latest turn's (``the agent``) or every turn's."""
    turn = state.last_turn  # "no response yet" comes before a misspelt tool
    if scope == "the agent":
        return list(turn.tool_calls), turn.number, "turn"
    return state.conversation.tool_calls, None, "conversation"


def _record(state: ScenarioState, kind: str, mode: str, label: str, scope: str, data: dict[str, object]) -> None:
    calls, turn, where = _calls(state, scope)
    for tool in data["tools"]:  # type: ignore[attr-defined]
        _check_tool_name(state, str(tool))
    result = trajectory.evaluate(kind, data, calls)
    assert result is not None, (kind, data)  # the steps below build the data evaluate reads
    state.deterministic(kind, _mode(mode), label, result, turn=turn, data={"scope": where, **data})


# -- trajectories --------------------------------------------------------------------------------
@then(parsers.re(_SCOPE + r" " + MODE + r" call " + _q("first") + r" before " + _q("then")))
def _then_call_before(fabtest_scenario: ScenarioState, scope: str, mode: str, first: str, then: str) -> None:
    _record(fabtest_scenario, "call_order", mode, f"call_order:{first}<{then}", scope, {"tools": [first, then]})


@then(parsers.re(_SCOPE + r" " + MODE + r" call the tools in (?P<how>exact order|order|any order):"))
def _then_call_sequence(fabtest_scenario: ScenarioState, scope: str, mode: str, how: str,
                        datatable: list[list[str]] | None = None) -> None:
    rows = _table(datatable, fabtest_scenario, "call the tools")
    if [c.strip().lower() for c in rows[0]] != ["tool"] or len(rows) < 2:
        raise UsageError(f"{fabtest_scenario.where}: the tools table needs the header | tool | and one row per "
                         f"expected call, got | {' | '.join(rows[0])} |" + ("" if len(rows) > 1 else " and no rows"))
    tools = [row[0].strip() for row in rows[1:]]
    match = {"order": "in order", "exact order": "exact", "any order": "any order"}[how]
    _record(fabtest_scenario, "tool_sequence", mode, f"tool_sequence:{match}:{','.join(tools)}", scope,
            {"tools": tools, "match": match})


@then(parsers.re(_SCOPE + r" " + MODE + r" call " + _q("tool")
                 + r" (?P<bound>at most|at least|exactly) (?P<n>\d+) times?"))
def _then_call_count(fabtest_scenario: ScenarioState, scope: str, mode: str, tool: str, bound: str, n: str) -> None:
    sign = {"at most": "<=", "at least": ">=", "exactly": "=="}[bound]
    _record(fabtest_scenario, "call_count", mode, f"call_count:{tool}{sign}{n}", scope,
            {"tools": [tool], "bound": bound, "limit": int(n)})


@then(parsers.re(_SCOPE + r" " + MODE + r" only call tools from: " + _q("tools")))
def _then_only_tools(fabtest_scenario: ScenarioState, scope: str, mode: str, tools: str) -> None:
    allowed = trajectory.parse_tool_list(tools)
    if not allowed:
        raise UsageError(f'{fabtest_scenario.where}: only call tools from needs a comma-separated list of tool names, '
                         f'like "lookup_account, change_plan"')
    _record(fabtest_scenario, "only_tools", mode, f"only_tools:{','.join(allowed)}", scope, {"tools": allowed})
