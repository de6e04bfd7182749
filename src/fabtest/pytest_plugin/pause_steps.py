"""The steps about pauses (docs/how-to/approvals.md): what the agent asked for approval, and the
user's decisions on it.

A module of its own beside ``steps.py`` (registered the same way): the words of approvals,
interrupts and questions in one place. Each step parses its arguments and calls one method of
:class:`~fabtest.engine.scenario.ScenarioState`; the rules live in :mod:`fabtest.engine.pauses`.
"""

from __future__ import annotations

import json
from typing import Any

from pytest_bdd import given, parsers, then, when

from fabtest.engine import checks
from fabtest.engine.scenario import ScenarioState
from fabtest.errors import UsageError
from fabtest.pytest_plugin.steps import MODE, _check_tool_name, _mode, _q

__all__: list[str] = []


def _text(value: str) -> str:
    return value.replace('\\"', '"')


# -- what the agent asked ------------------------------------------------------------------------
@then(parsers.re(r"the agent " + MODE + r" ask for approval of " + _q("tool")))
def _then_ask_approval(fabtest_scenario: ScenarioState, mode: str, tool: str) -> None:
    _check_tool_name(fabtest_scenario, tool)
    fabtest_scenario.asked_approval(tool, _mode(mode))


@then(parsers.re(r"the agent " + MODE + r" ask for approval of " + _q("tool") + r" with:"))
def _then_ask_approval_with(fabtest_scenario: ScenarioState, mode: str, tool: str,
                            datatable: list[list[str]] | None = None) -> None:
    args = checks.parse_with_table(datatable or [], where=fabtest_scenario.where)
    _check_tool_name(fabtest_scenario, tool)
    fabtest_scenario.asked_approval(tool, _mode(mode), args, rows=[[a.name, a.expected] for a in args])


@then(parsers.re(r"the agent " + MODE + r" not ask for approval(?: of " + _q("tool") + r")?"))
def _then_not_ask_approval(fabtest_scenario: ScenarioState, mode: str, tool: str | None = None) -> None:
    if tool:
        _check_tool_name(fabtest_scenario, tool)
    fabtest_scenario.asked_approval(tool or None, _mode(mode), negated=True)


# -- the user's decisions ------------------------------------------------------------------------
@when("the user approves")
def _when_approves(fabtest_scenario: ScenarioState) -> None:
    fabtest_scenario.user_decides("approved")


@when(parsers.re(r"the user approves with " + _q("reason")))
def _when_approves_because(fabtest_scenario: ScenarioState, reason: str) -> None:
    fabtest_scenario.user_decides("approved", reason=_text(reason))


@when("the user rejects")
def _when_rejects(fabtest_scenario: ScenarioState) -> None:
    fabtest_scenario.user_decides("rejected")


@when(parsers.re(r"the user rejects with " + _q("reason")))
def _when_rejects_because(fabtest_scenario: ScenarioState, reason: str) -> None:
    fabtest_scenario.user_decides("rejected", reason=_text(reason))


@when(parsers.re(r'the user answers "(?P<answer>.*)"'))
def _when_answers(fabtest_scenario: ScenarioState, answer: str) -> None:
    fabtest_scenario.user_decides("answered", answer=_text(answer))


@when("the user approves with:")
def _when_approves_edited(fabtest_scenario: ScenarioState, datatable: list[list[str]] | None = None) -> None:
    state = fabtest_scenario
    state.user_decides("edited", arguments=_edited_arguments(state, datatable))


def _edited_arguments(state: ScenarioState, rows: list[list[str]] | None) -> dict[str, Any]:
    """``| argument | value |`` rows: each value as JSON when it parses (``30``, ``true``), else text."""
    if not rows or [c.strip().lower() for c in rows[0]] != ["argument", "value"] or len(rows) < 2:
        got = f"| {' | '.join(rows[0])} |" if rows else "no table"
        raise UsageError(f"{state.where}: When the user approves with: needs a table | argument | value | with one "
                         f"row per changed argument, got {got}")
    out: dict[str, Any] = {}
    for name, value in ((r[0].strip(), r[1].strip()) for r in rows[1:]):
        if not name:
            raise UsageError(f"{state.where}: a row of the approves with: table has an empty argument name")
        try:
            out[name] = json.loads(value)
        except ValueError:
            out[name] = value
    return out


# -- the simulated user's rules ------------------------------------------------------------------
@given(parsers.re(r"the user (?P<verb>approves|rejects) (?P<what>.+)"))
def _given_decision_rule(fabtest_scenario: ScenarioState, verb: str, what: str) -> None:
    """``Given the user approves refunds under 50 euros``: a rule the simulated user decides pauses by."""
    fabtest_scenario.configure_simulator(rules_should=[f"{verb[:-1]} {what.strip()}"])
