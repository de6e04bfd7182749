"""The step vocabulary (docs/reference/steps.md). Each step parses its words and calls ScenarioState.

Registered as a pytest plugin, so the steps are visible to every feature; a project overrides or
extends them with ordinary pytest-bdd steps in its conftest.
"""

from __future__ import annotations

import difflib
import json
import re

import pytest
from pytest_bdd import given, parsers, then, when

from fabtest.agents.base import AgentError, agent_metadata
from fabtest.config.criteria import Criterion, criterion_from_text, parse_examples_table, resolve
from fabtest.conversation import Mode
from fabtest.engine import checks
from fabtest.engine.attacks import hold_against_attack, use_attack, use_record_attack
from fabtest.engine.scenario import ScenarioState
from fabtest.engine.topics import table_rows
from fabtest.errors import UsageError
from fabtest.pytest_plugin.voice_steps import interruption_ahead

MODE = r"(?P<mode>should|must)"
Q = r'"(?P<{}>[^"]*)"'  # a quoted value without double quotes inside


def _q(name: str) -> str:
    return Q.format(name)


def _table(datatable: list[list[str]] | None, state: ScenarioState, what: str) -> list[list[str]]:
    if not datatable:
        raise UsageError(f"{state.where}: {what} needs a data table under the step")
    return datatable


# Set by the plugin before each step: where the step is written ("Feature Background" at line N,
# "Rule Background" at line N, or "Scenario") and the lines of its data table rows.
LEVEL_KEY = pytest.StashKey[tuple[str, int]]()
ROW_LINES_KEY = pytest.StashKey[list[int]]()
_DEFINED_KEY = pytest.StashKey[dict[tuple[tuple[str, int], str], str]]()
_STOP_TOOL_KEY = pytest.StashKey[tuple[str, str]]()  # (tool, where) of the stop condition in force


def _define(request: pytest.FixtureRequest, state: ScenarioState, criterion: Criterion, where: str) -> None:
    """Define a criterion, refusing a second definition of one name at one level.

    A lower level (Rule Background, Scenario) may redefine a name on purpose; two definitions side
    by side are a slip that would silently keep the last one.
    """
    node = request.node
    level = node.stash.get(LEVEL_KEY, ("Scenario", 0))
    first = node.stash.setdefault(_DEFINED_KEY, {}).setdefault((level, criterion.name), where)
    if first != where:
        raise UsageError(f'{where}: the criterion "{criterion.name}" is already defined in this {level[0]} at {first}; '
                         "remove one of them (a Rule Background or a Scenario may redefine it to override)")
    state.define_criterion(criterion)


def _row_where(request: pytest.FixtureRequest, state: ScenarioState, index: int) -> str:
    """``file:line`` of row ``index`` of the step's data table (the step's line if unknown)."""
    lines = request.node.stash.get(ROW_LINES_KEY, [])
    if index >= len(lines):
        return state.where
    return f"{state.where.rsplit(':', 1)[0]}:{lines[index]}"


_NEEDS_SIMULATOR = re.compile(r"the simulated user talks to the agent")
_NEEDS_JUDGE_MUST = re.compile(r"must (satisfy|be grounded in|have the intent|be achieved|hold against)")


def needed_llms(step_texts: list[str]) -> list[tuple[str, str]]:
    """The LLM roles a scenario's steps cannot do without, with what needs them: a scenario whose
    roles are not configured is skipped before its first step (a ``should`` is only recorded as skipped)."""
    needs = []
    if any(_NEEDS_SIMULATOR.search(t) for t in step_texts):
        needs.append(("simulator", "a simulated user"))
    if any(_NEEDS_JUDGE_MUST.search(t) for t in step_texts):
        needs.append(("judge", "a must expectation judged by an LLM"))
    return needs


def _mode(mode: str) -> Mode:
    return "must" if mode == "must" else "should"


# -- setup ---------------------------------------------------------------------------------------
@given(parsers.re(r'the agent ' + _q("name")))
def _given_agent(fabtest_scenario: ScenarioState, name: str) -> None:
    fabtest_scenario.use_agent(name)


@given(parsers.re(r"the agent's purpose is " + _q("purpose")))
def _given_purpose(fabtest_scenario: ScenarioState, purpose: str) -> None:
    """What the agent is for: the judge, the simulated user and the attacker are told it (replaces
    ``[tool.fabtest] agent_description``; in a Background, every scenario of the feature inherits it)."""
    fabtest_scenario.define_purpose(purpose)


@given(parsers.re(r'the criterion ' + _q("name") + r' means ' + _q("description")))
def _given_criterion(request: pytest.FixtureRequest, fabtest_scenario: ScenarioState, name: str,
                     description: str) -> None:
    _define(request, fabtest_scenario, _criterion(fabtest_scenario, name, description), fabtest_scenario.where)


@given(parsers.re(r'the criterion ' + _q("name") + r' means ' + _q("description") + r' with examples:'))
def _given_criterion_examples(request: pytest.FixtureRequest, fabtest_scenario: ScenarioState, name: str,
                              description: str, datatable: list[list[str]] | None = None) -> None:
    try:
        good, bad = parse_examples_table(_table(datatable, fabtest_scenario, "examples"))
    except ValueError as exc:
        raise UsageError(f"{fabtest_scenario.where}: {exc}") from None
    _define(request, fabtest_scenario, Criterion(name, description, good, bad), fabtest_scenario.where)


@given(parsers.re(r'the criterion ' + _q("name") + r' means:'))
def _given_criterion_doc(request: pytest.FixtureRequest, fabtest_scenario: ScenarioState, name: str,
                         docstring: str = "") -> None:
    try:
        criterion = criterion_from_text(name, docstring)
    except ValueError as exc:
        raise UsageError(f"{fabtest_scenario.where}: {exc}") from None
    _define(request, fabtest_scenario, criterion, fabtest_scenario.where)


@given("the criteria:")
def _given_criteria(request: pytest.FixtureRequest, fabtest_scenario: ScenarioState,
                    datatable: list[list[str]] | None = None) -> None:
    rows = _table(datatable, fabtest_scenario, "the criteria")
    header = [c.strip().lower() for c in rows[0]]
    if header[:2] != ["criterion", "description"]:
        raise UsageError(f"{fabtest_scenario.where}: the criteria table needs the header | criterion | description |, "
                         f"got | {' | '.join(rows[0])} |")
    for index, row in enumerate(rows[1:], start=1):
        criterion = _criterion(fabtest_scenario, row[0].strip(), row[1].strip())
        _define(request, fabtest_scenario, criterion, _row_where(request, fabtest_scenario, index))


def _criterion(state: ScenarioState, name: str, description: str) -> Criterion:
    try:
        return Criterion(name, description)
    except ValueError as exc:
        raise UsageError(f"{state.where}: {exc}") from None


@given("the topics:")
def _given_topics(fabtest_scenario: ScenarioState, datatable: list[list[str]] | None = None) -> None:
    fabtest_scenario.define_topics(table_rows(_table(datatable, fabtest_scenario, "the topics")))


@given(parsers.re(r'a simulated user with the goal ' + _q("goal")))
def _given_goal(fabtest_scenario: ScenarioState, goal: str) -> None:
    fabtest_scenario.configure_simulator(goal=goal)


@given(parsers.re(r'the persona ' + _q("persona")))
def _given_persona(fabtest_scenario: ScenarioState, persona: str) -> None:
    fabtest_scenario.configure_simulator(persona=persona)


@given("the persona:")
def _given_persona_doc(fabtest_scenario: ScenarioState, docstring: str = "") -> None:
    fabtest_scenario.configure_simulator(persona=docstring.strip())


@given("the simulated user knows:")
def _given_facts(fabtest_scenario: ScenarioState, datatable: list[list[str]] | None = None) -> None:
    rows = _table(datatable, fabtest_scenario, "the simulated user knows")
    if [c.strip().lower() for c in rows[0]][:2] != ["fact", "value"]:
        raise UsageError(f"{fabtest_scenario.where}: the facts table needs the header | fact | value |")
    fabtest_scenario.configure_simulator(facts={r[0].strip(): r[1].strip() for r in rows[1:]})


@given(parsers.re(r'the simulated user should (?P<neg>not )?' + _q("rule")))
def _given_rule(fabtest_scenario: ScenarioState, neg: str | None, rule: str) -> None:
    if neg:
        fabtest_scenario.configure_simulator(rules_should_not=[rule])
    else:
        fabtest_scenario.configure_simulator(rules_should=[rule])


@given(parsers.re(r"the simulation takes at most (?P<n>\d+) turns?"))
def _given_max_turns(fabtest_scenario: ScenarioState, n: str) -> None:
    if int(n) < 1:
        raise UsageError(f"{fabtest_scenario.where}: the simulation needs at least 1 turn")
    fabtest_scenario.configure_simulator(max_turns=int(n))


@given(parsers.re(r'the simulation stops when the agent calls ' + _q("tool")))
def _given_stop_tool(request: pytest.FixtureRequest, fabtest_scenario: ScenarioState, tool: str) -> None:
    request.node.stash[_STOP_TOOL_KEY] = (tool, fabtest_scenario.where)  # checked when the simulation starts
    fabtest_scenario.configure_simulator(stop_on_tool=tool)


@given(parsers.re(r'the simulation stops when the conversation reaches the topic ' + _q("topic")))
def _given_stop_topic(fabtest_scenario: ScenarioState, topic: str) -> None:
    fabtest_scenario.configure_simulator(stop_on_topic=topic)


@given("a simulated user from the scenario")
def _given_from_record(fabtest_scenario: ScenarioState) -> None:
    fabtest_scenario.use_record()


@given(parsers.re(r'an adversarial user ' + _q("attack")))
def _given_attack(fabtest_scenario: ScenarioState, attack: str) -> None:
    use_attack(fabtest_scenario, attack)


@given("an adversarial user from the scenario")
def _given_record_attack(fabtest_scenario: ScenarioState) -> None:
    use_record_attack(fabtest_scenario)


# -- actions -------------------------------------------------------------------------------------
@when(parsers.re(r'the user says "(?P<text>.*)"'))
def _when_says(request: pytest.FixtureRequest, fabtest_scenario: ScenarioState, text: str) -> None:
    fabtest_scenario.user_says(text.replace('\\"', '"'), interrupt_after_ms=interruption_ahead(request))


@when(parsers.re(r'the user says exactly "(?P<text>.*)"'))
def _when_says_exactly(request: pytest.FixtureRequest, fabtest_scenario: ScenarioState, text: str) -> None:
    """The text as a JSON string's body: what a feature line cannot hold as itself (a carriage return)
    and what a doc string would change (its indentation) kept exactly; ``fabtest import`` writes it."""
    try:
        said = json.loads(f'"{text}"', strict=False)
    except ValueError as exc:
        raise UsageError(f'{fabtest_scenario.where}: the user says exactly "...": the text is written as a JSON '
                         f'string (escapes \\" \\\\ \\r \\n \\t \\uXXXX): {getattr(exc, "msg", exc)} at column '
                         f'{getattr(exc, "colno", 1) - 1}') from None
    fabtest_scenario.user_says(said, interrupt_after_ms=interruption_ahead(request))


@when("the user says:")
def _when_says_doc(request: pytest.FixtureRequest, fabtest_scenario: ScenarioState, docstring: str = "") -> None:
    fabtest_scenario.user_says(docstring, interrupt_after_ms=interruption_ahead(request))


@when("the simulated user talks to the agent")
def _when_simulate(request: pytest.FixtureRequest, fabtest_scenario: ScenarioState) -> None:
    stop = request.node.stash.get(_STOP_TOOL_KEY, None)
    if stop is not None and fabtest_scenario.simulator_config.stop_on_tool == stop[0]:
        _check_tool_name(fabtest_scenario, stop[0], where=stop[1])
    fabtest_scenario.simulate()


# -- assertions ----------------------------------------------------------------------------------
@then(parsers.re(r'the agent ' + MODE + r' hold against the attack'))
def _then_hold(fabtest_scenario: ScenarioState, mode: str) -> None:
    hold_against_attack(fabtest_scenario, _mode(mode))


@then(parsers.re(r'(?P<scope>the response|every response|the conversation) ' + MODE + r' satisfy ' + _q("criterion")))
def _then_satisfy(fabtest_scenario: ScenarioState, scope: str, mode: str, criterion: str) -> None:
    _check_not_misspelled(fabtest_scenario, criterion)
    chosen = resolve(criterion, fabtest_scenario.criteria)
    fabtest_scenario.satisfy(chosen, _mode(mode), scope.split()[0] if scope != "the conversation" else "conversation")


def _check_not_misspelled(state: ScenarioState, text: str) -> None:
    """A one-word name close to a declared criterion is a typo, not an ad-hoc criterion."""
    name = text.strip()
    if name in state.criteria or " " in name:
        return
    close = difflib.get_close_matches(name, list(state.criteria), n=1, cutoff=0.8)
    if close:
        raise UsageError(f'{state.where}: unknown criterion "{name}"; did you mean "{close[0]}"? '
                         "(an ad-hoc criterion is written as a sentence)")


@then(parsers.re(r'the response ' + MODE + r' (?P<neg>not )?match "(?P<pattern>.*)"'))
def _then_match(fabtest_scenario: ScenarioState, mode: str, neg: str | None, pattern: str) -> None:
    state = fabtest_scenario
    regex = checks.compile_regex(pattern, where=state.where)
    turn = state.last_turn
    passed, details = checks.check_regex(turn.response.text, regex, where=state.where)
    kind = "not_match" if neg else "match"
    state.deterministic(kind, _mode(mode), f"{kind}:/{pattern}/", (passed != bool(neg), details), turn=turn.number)


@then(parsers.re(r'the agent ' + MODE + r' (?P<neg>not )?call ' + _q("tool")))
def _then_call(fabtest_scenario: ScenarioState, mode: str, neg: str | None, tool: str) -> None:
    _check_call(fabtest_scenario, mode, neg, tool, [])


@then(parsers.re(r'the agent ' + MODE + r' (?P<neg>not )?call ' + _q("tool") + r' with:'))
def _then_call_with(fabtest_scenario: ScenarioState, mode: str, neg: str | None, tool: str,
                    datatable: list[list[str]] | None = None) -> None:
    args = checks.parse_with_table(datatable or [], where=fabtest_scenario.where)
    _check_call(fabtest_scenario, mode, neg, tool, args)


def _check_call(state: ScenarioState, mode: str, neg: str | None, tool: str, args: list[checks.ArgExpectation]) -> None:
    turn = state.last_turn
    _check_tool_name(state, tool)
    passed, details = checks.check_called(turn.tool_calls, tool, args)
    kind = "not_call_tool" if neg else "call_tool"
    # the `with:` rows as written, so the check can be run again on a recorded turn (replay, mutate)
    state.tool_check(kind, _mode(mode), f"{kind}:{tool}", (passed != bool(neg), details), turn=turn.number,
                     data={"tool": tool, "with": [[a.name, a.expected] for a in args]})


def _check_tool_name(state: ScenarioState, tool: str, *, where: str | None = None) -> None:
    """A tool the agent does not declare (``tools`` in its metadata) is a typo: ``must not call
    "serch_books"`` would pass forever. Agents that declare no tools are not checked."""
    declared = _declared_tools(state)
    if not declared or tool in declared or any(c.name == tool for c in state.conversation.tool_calls):
        return
    close = difflib.get_close_matches(tool, declared, n=1, cutoff=0.6)
    shown = ", ".join(f'"{name}"' for name in declared[:20]) + (", ..." if len(declared) > 20 else "")
    hint = f'; did you mean "{close[0]}"?' if close else ""
    raise UsageError(f'{where or state.where}: unknown tool "{tool}": the agent declares {shown}{hint}')


def _declared_tools(state: ScenarioState) -> list[str]:
    try:
        meta = agent_metadata(state.agent)
    except AgentError:  # the agent's own failure is reported where it happens, not as a typo
        return []
    tools = meta.get("tools")
    if not isinstance(tools, list):
        return []
    names = [t if isinstance(t, str) else t.get("name") if isinstance(t, dict) else None for t in tools]
    return [n for n in names if isinstance(n, str) and n]


@then(parsers.re(r'the conversation ' + MODE + r' (?P<neg>not )?include a call to ' + _q("tool")))
def _then_include(fabtest_scenario: ScenarioState, mode: str, neg: str | None, tool: str) -> None:
    _ = fabtest_scenario.last_turn  # "no response yet" comes before a misspelled tool
    _check_tool_name(fabtest_scenario, tool)
    fabtest_scenario.includes_call(tool, _mode(mode), negated=bool(neg))


@then(parsers.re(r'the conversation ' + MODE + r' take at most (?P<n>\d+) turns?'))
def _then_turns(fabtest_scenario: ScenarioState, mode: str, n: str) -> None:
    actual = len(fabtest_scenario.conversation.turns)
    fabtest_scenario.record_check("turn_count", _mode(mode), f"turn_count<={n}",
                                  "passed" if actual <= int(n) else "failed",
                                  f"{actual} turn{'' if actual == 1 else 's'} (max {n})",
                                  data={"max": int(n), "actual": actual})


_NUMBER = r"(?P<limit>\d+(?:\.\d+)?)"


@then(parsers.re(r'the conversation ' + MODE + r' cost less than \$' + _NUMBER))
def _then_cost(fabtest_scenario: ScenarioState, mode: str, limit: str) -> None:
    fabtest_scenario.check_cost(float(limit), _mode(mode))


@then(parsers.re(r'(?P<which>every response|the response) ' + MODE + r' take less than ' + _NUMBER + r' seconds?'))
def _then_latency(fabtest_scenario: ScenarioState, which: str, mode: str, limit: str) -> None:
    fabtest_scenario.check_latency(float(limit), _mode(mode), every=which == "every response")


@then(parsers.re(r'the transcript ' + MODE + r' contain ' + _q("text")))
def _then_transcript(fabtest_scenario: ScenarioState, mode: str, text: str) -> None:
    transcript = fabtest_scenario.conversation.transcript()
    ok = text in transcript
    fabtest_scenario.record_check("transcript_contains", _mode(mode), f"transcript:{text}",
                                  "passed" if ok else "failed",
                                  f"transcript {'contains' if ok else 'does not contain'} {text!r}")


@then(parsers.re(r'the file ' + _q("path") + r' ' + MODE + r' exist'))
def _then_file_exists(fabtest_scenario: ScenarioState, path: str, mode: str) -> None:
    result = checks.check_file(fabtest_scenario.workdir, path)
    fabtest_scenario.deterministic("file_exists", _mode(mode), f"file:{path}", result, turn=None)


@then(parsers.re(r'the file ' + _q("path") + r' ' + MODE + r' contain ' + _q("text")))
def _then_file_contains(fabtest_scenario: ScenarioState, path: str, mode: str, text: str) -> None:
    result = checks.check_file(fabtest_scenario.workdir, path, text)
    fabtest_scenario.deterministic("file_contains", _mode(mode), f"file:{path}:{text}", result, turn=None)


@then(parsers.re(r'the response ' + MODE + r' be grounded in ' + _q("source")))
def _then_grounded(fabtest_scenario: ScenarioState, mode: str, source: str) -> None:
    fabtest_scenario.grounded_in(source, _mode(mode))


@then(parsers.re(r'the response ' + MODE + r' have the intent ' + _q("intent")))
def _then_intent(fabtest_scenario: ScenarioState, mode: str, intent: str) -> None:
    fabtest_scenario.intent(intent, _mode(mode))


@then(parsers.re(r'the goal ' + MODE + r' be achieved'))
def _then_goal(fabtest_scenario: ScenarioState, mode: str) -> None:
    fabtest_scenario.goal_achieved(_mode(mode))


@then(parsers.re(r'the conversation ' + MODE + r' reach the topic ' + _q("topic")))
def _then_reach(fabtest_scenario: ScenarioState, mode: str, topic: str) -> None:
    fabtest_scenario.check_reached(topic, _mode(mode))


@then(parsers.re(r'the conversation ' + MODE + r' follow the topics ' + _q("topics")))
def _then_follow(fabtest_scenario: ScenarioState, mode: str, topics: str) -> None:
    sequence = [t.strip() for t in topics.split(",") if t.strip()]
    if not sequence:
        raise UsageError(f"{fabtest_scenario.where}: follow the topics needs a comma-separated list of topics")
    fabtest_scenario.check_follows(sequence, _mode(mode))
