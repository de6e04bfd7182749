"""The steps about what the agent did: tool trajectories, tool stubs, seeded history, end state.

Registered as a pytest plugin next to :mod:`fabtest.pytest_plugin.steps` (whose helpers it uses),
so the two vocabularies read as one. ``the agent`` means the latest turn, ``the conversation``
every turn so far, as in the single-call steps.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

import pytest
from pytest_bdd import given, parsers, then, when

from fabtest.agents.stubs import UNSET, ToolStub
from fabtest.conversation import Message, ToolCall
from fabtest.engine import checks, end_state, handoffs, trajectory
from fabtest.engine.extract import extract
from fabtest.engine.patterns import search
from fabtest.engine.scenario import ScenarioState
from fabtest.engine.tool_simulation import ToolSimulator
from fabtest.errors import UsageError
from fabtest.pytest_plugin.steps import MODE, _check_tool_name, _mode, _q, _row_where, _table, check_agent_name

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
    state.tool_check(kind, _mode(mode), label, result, turn=turn, data={"scope": where, **data})


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


# -- handoffs ------------------------------------------------------------------------------------
@then(parsers.re(_SCOPE + r" " + MODE + r" (?P<neg>not )?hand off(?: to " + _q("agent") + r")?"))
def _then_hand_off(fabtest_scenario: ScenarioState, scope: str, mode: str, neg: str | None,
                   agent: str | None = None) -> None:
    """``must hand off to "Seat Booking Agent"`` / ``must not hand off``: the handoff events the
    framework adapter recorded (:mod:`fabtest.engine.handoffs`), by the agents' names."""
    state = fabtest_scenario
    turn = state.last_turn
    if agent is None and not neg:
        raise UsageError(f'{state.where}: say which agent: must hand off to "Seat Booking Agent" '
                         "(only must not hand off goes without a name)")
    if agent is not None:
        check_agent_name(state, agent)
    turns = [turn] if scope == "the agent" else state.conversation.turns
    kind = handoffs.NOT_KIND if neg else handoffs.KIND
    passed, details = handoffs.check_handoff(handoffs.handoffs_of(turns), agent)
    state.deterministic(kind, _mode(mode), f"{kind}:{agent or '*'}", (passed != bool(neg), details),
                        turn=turn.number if scope == "the agent" else None,
                        data={"scope": "turn" if scope == "the agent" else "conversation",
                              **({"agent": agent} if agent else {})})


# -- tool stubs ----------------------------------------------------------------------------------
def _stub_json(state: ScenarioState, text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{state.where}: {what} is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
                         'write text as a JSON string: "503 Service Unavailable"') from None


def _stub_cases(state: ScenarioState,
                rows: list[list[str]]) -> tuple[tuple[tuple[checks.ArgExpectation, ...], Any], ...]:
    """``| argument ... | result |`` rows: each argument cell exact, /regex/ or a comparison (empty: any)."""
    header = [c.strip() for c in rows[0]]
    if len(header) < 2 or header[-1].lower() != "result" or not all(header[:-1]):
        raise UsageError(f"{state.where}: the stub table needs argument columns and a last column result, like "
                         f"| phone | result |, got | {' | '.join(rows[0])} |")
    if len(rows) < 2:
        raise UsageError(f"{state.where}: the stub table has a header but no rows")
    cases = []
    for row in rows[1:]:
        matchers = tuple(checks.ArgExpectation.parse(name, cell, where=state.where)
                         for name, cell in zip(header[:-1], row[:-1], strict=True) if cell.strip())
        cases.append((matchers, _stub_json(state, row[-1], f"the result {row[-1].strip()!r}")))
    return tuple(cases)


@given(parsers.re(r"the tool " + _q("tool") + r" returns:"))
def _given_tool_returns(fabtest_scenario: ScenarioState, tool: str, docstring: str | None = None,
                        datatable: list[list[str]] | None = None) -> None:
    state = fabtest_scenario
    if not docstring and not datatable:
        raise UsageError(f'{state.where}: the tool "{tool}" returns: needs the result as a JSON docstring under the '
                         "step, or a table of argument patterns and results (| argument ... | result |)")
    result = _stub_json(state, docstring, "the docstring") if docstring else UNSET
    cases = _stub_cases(state, datatable) if datatable else ()
    state.define_stub(ToolStub(tool, state.where, result=result, cases=cases))


@given(parsers.re(r"the tool " + _q("tool") + r' fails with "(?P<error>.*)"'))
def _given_tool_fails(fabtest_scenario: ScenarioState, tool: str, error: str) -> None:
    fabtest_scenario.define_stub(ToolStub(tool, fabtest_scenario.where, error=error.replace('\\"', '"')))


@given(parsers.re(r"the tool " + _q("tool") + r' is simulated as "(?P<description>.*)"'))
def _given_tool_simulated(fabtest_scenario: ScenarioState, tool: str, description: str) -> None:
    state = fabtest_scenario
    state.require_llm("simulator", "a simulated tool")
    assert state.llms.simulator is not None
    simulator = ToolSimulator(tool, description.replace('\\"', '"'), state.llms.simulator,
                              charge=lambda usage: state.charge("simulator", usage))
    state.define_stub(ToolStub(tool, state.where, simulated=simulator))


@given(parsers.re(r"the tool " + _q("tool") + r" takes (?P<seconds>\d+(?:\.\d+)?) seconds?"))
def _given_tool_takes(fabtest_scenario: ScenarioState, tool: str, seconds: str) -> None:
    fabtest_scenario.define_stub(ToolStub(tool, fabtest_scenario.where, delay_s=float(seconds)))


# -- seeded history ------------------------------------------------------------------------------
_ROLES = {"user": "user", "agent": "agent", "assistant": "agent"}


@given("the conversation so far:")
def _given_history(request: pytest.FixtureRequest, fabtest_scenario: ScenarioState,
                   datatable: list[list[str]] | None = None) -> None:
    state = fabtest_scenario
    rows = _table(datatable, state, "the conversation so far")
    if [c.strip().lower() for c in rows[0]] != ["role", "message"] or len(rows) < 2:
        raise UsageError(f"{state.where}: the conversation so far needs the header | role | message | and one row "
                         f"per message, got | {' | '.join(rows[0])} |" + ("" if len(rows) > 1 else " and no rows"))
    if state.conversation.turns:
        raise UsageError(f"{state.where}: the conversation so far comes after the conversation started; "
                         "put it before the first When step")
    history = []
    for index, (role, message) in enumerate(rows[1:], start=1):
        if role.strip().lower() not in _ROLES:
            raise UsageError(f"{_row_where(request, state, index)}: role {role.strip()!r} is not user or agent")
        history.append(Message(_ROLES[role.strip().lower()], message.strip()))  # type: ignore[arg-type]
    state.conversation.history = history


# -- end state -----------------------------------------------------------------------------------
def _check_state(state: ScenarioState, mode: str, rows: list[tuple[str, str, str]]) -> None:
    """Each ``(path, expected, where)`` against the agent's state now: exact, /regex/ or a comparison."""
    _ = state.last_turn
    current = end_state.read_state(state.agent, where=state.where)
    for path, expected, where in rows:
        matcher = checks.ArgExpectation.parse(path, expected, where=where)
        found, value, stopped = end_state.lookup(current, path)
        if not found:
            passed, details = False, f"no state at {path} ({stopped})"
        else:
            passed = matcher.matches({path: value})
            details = (f"state {path} is {json.dumps(value, ensure_ascii=False)}"
                       + ("" if passed else f", not {expected}"))
        state.deterministic("state", _mode(mode), f"state:{path}", (passed, details), turn=None,
                            data={"path": path, "expected": expected, **({"actual": value} if found else {})})


@then(parsers.re(r"the state " + _q("path") + r" " + MODE + r' be "(?P<value>.*)"'))
def _then_state(fabtest_scenario: ScenarioState, path: str, mode: str, value: str) -> None:
    _check_state(fabtest_scenario, mode, [(path, value.replace('\\"', '"'), fabtest_scenario.where)])


@then(parsers.re(r"the state " + MODE + r" include:"))
def _then_state_include(request: pytest.FixtureRequest, fabtest_scenario: ScenarioState, mode: str,
                        datatable: list[list[str]] | None = None) -> None:
    state = fabtest_scenario
    rows = _table(datatable, state, "the state must include")
    if [c.strip().lower() for c in rows[0]] != ["path", "value"] or len(rows) < 2:
        raise UsageError(f"{state.where}: the state table needs the header | path | value | and one row per path, "
                         f"got | {' | '.join(rows[0])} |" + ("" if len(rows) > 1 else " and no rows"))
    _check_state(state, mode, [(path.strip(), value.strip(), _row_where(request, state, index))
                               for index, (path, value) in enumerate(rows[1:], start=1)])


# -- values carried across turns -----------------------------------------------------------------
@when(parsers.re(r'the response mentions "(?P<pattern>.*)" as ' + _q("name")))
def _when_mentions(fabtest_scenario: ScenarioState, pattern: str, name: str) -> None:
    """Keep what the latest reply says (the first match; its first group when the pattern has one)
    as ``{name}`` for the steps below; a reply without it fails here, naming the pattern."""
    state = fabtest_scenario
    if not re.fullmatch(r"\w+", name):
        raise UsageError(f'{state.where}: the name "{name}" must be one word (letters, digits, _), used as {{{name}}}')
    turn = state.last_turn
    regex = checks.compile_regex(pattern, where=state.where)
    found = search(regex, turn.response.text, where=state.where)
    if found is None:
        state.deterministic("mentions", "must", f"mentions:{name}",
                            (False, f"the response does not mention /{pattern}/"),
                            turn=turn.number, data={"name": name})
        return
    value = found.group(1) if regex.groups else found.group(0)
    state.values[name] = value
    state.deterministic("mentions", "must", f"mentions:{name}", (True, f"{name} = {value!r}"), turn=turn.number,
                        data={"name": name, "value": value})


@when(parsers.re(r'the response mentions (?P<what>[^"].*?) as ' + _q("name")))
def _when_mentions_judged(fabtest_scenario: ScenarioState, what: str, name: str) -> None:
    """The judge takes ``what`` (a description: "a booking reference") from the latest reply."""
    state = fabtest_scenario
    if not re.fullmatch(r"\w+", name):
        raise UsageError(f'{state.where}: the name "{name}" must be one word (letters, digits, _), used as {{{name}}}')
    turn = state.last_turn
    state.require_llm("judge", f"taking {what} from the reply")
    assert state.llms.judge is not None
    found = extract(state.llms.judge, what, turn.response.text, charge=lambda usage: state.charge("judge", usage))
    if not found.found:
        state.deterministic("mentions", "must", f"mentions:{name}", (False, f"the response does not mention {what}"),
                            turn=turn.number, data={"name": name, "what": what})
        return
    state.values[name] = found.value
    state.deterministic("mentions", "must", f"mentions:{name}", (True, f"{name} = {found.value!r}"), turn=turn.number,
                        data={"name": name, "what": what, "value": found.value})


_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def fill(text: str, values: dict[str, str]) -> str:
    """``{name}`` replaced by a value taken earlier; other braces (a regex's ``{3}``) stay."""
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text) if values else text


def pytest_bdd_before_step_call(request: pytest.FixtureRequest, feature: Any, scenario: Any, step: Any,
                                step_func: Any, step_func_args: dict[str, Any]) -> None:
    """Put the scenario's taken values into a step's quoted arguments, docstring and table cells."""
    state = step_func_args.get("fabtest_scenario")
    if not isinstance(state, ScenarioState) or not state.values:
        return
    for key, value in step_func_args.items():
        if isinstance(value, str):
            step_func_args[key] = fill(value, state.values)
        elif key == "datatable" and isinstance(value, list):
            step_func_args[key] = [[fill(cell, state.values) for cell in row] for row in value]
