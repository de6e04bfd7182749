"""The OpenAI Agents SDK's customer-service example, run as its authors wrote it (issue 40 item 1):
a run context from the table's ``context`` factory (the seat booking flow asserts the handoff hook
filled it), handoffs recorded as the SDK names them (``transfer_to_*`` calls and handoff events),
handoff tools known (a typo is an error), and a ``@fabtest.tool`` that takes the SDK's
``RunContextWrapper`` recorded once. The SDK's default client talks to the OpenAI-compatible fake
on 127.0.0.1; the fixture agent is tests/frameworks.published.customer_service.py."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from builtin_agent.fake_openai import FakeOpenAI

from fabtest.agents.base import agent_metadata
from fabtest.conversation import Message
from fabtest.engine import end_state
from fabtest.engine.turns import call_agent
from fabtest.errors import UsageError

from .helpers import build, require
from .published.airline_model import answer

require("openai_agents")

import agents  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402

SPEC = "frameworks.published.customer_service"


@pytest.fixture(autouse=True)
def fake() -> Iterator[FakeOpenAI]:
    """The SDK's default client and API pointed at the fake, as an app would with its own; put back after."""
    from agents.models import _openai_shared as shared

    agents.set_tracing_disabled(True)
    before = shared.get_default_openai_client(), shared.get_use_responses_by_default()
    with FakeOpenAI(answer) as server:
        agents.set_default_openai_client(AsyncOpenAI(base_url=server.base_url, api_key="sk-fake-airline", max_retries=0),
                                         use_for_tracing=False)
        agents.set_default_openai_api("chat_completions")
        try:
            yield server
        finally:
            shared.set_default_openai_client(before[0])  # type: ignore[arg-type]  # None: the SDK's own default again
            shared.set_use_responses_by_default(before[1])


def _turns(agent: Any, *lines: str) -> list[Any]:
    """Each line a user turn after the last, as the runner sends them (the whole conversation)."""
    messages: list[Message] = []
    responses = []
    for line in lines:
        messages.append(Message("user", line))
        response = call_agent(agent, list(messages), timeout=30)
        messages.append(Message("agent", response.text))
        responses.append(response)
    return responses


def test_without_the_run_context_the_seat_booking_flow_fails_as_the_issue_says() -> None:
    agent = build("openai_agents", f"{SPEC}:triage_agent")
    with pytest.raises(Exception, match="'NoneType' object has no attribute 'flight_number'"):
        _turns(agent, "I want to change my seat")


def test_the_context_factory_runs_the_flow_and_is_the_end_state() -> None:
    agent = build("openai_agents", f"{SPEC}:triage_agent", context=f"{SPEC}:new_context")
    first, second = _turns(agent, "I want to change my seat", "Booking ABC123, seat 12C please")
    assert [c.name for c in first.tool_calls] == ["transfer_to_seat_booking_agent"]
    assert first.metadata["handoffs"] == [{"from": "Triage Agent", "to": "Seat Booking Agent",
                                           "tool": "transfer_to_seat_booking_agent"}]
    assert first.metadata["agent"] == "Seat Booking Agent"
    # the second turn starts at the seat booking agent (the run's last_agent), as the example's loop does
    [seat] = second.tool_calls  # recorded once, without the RunContextWrapper
    assert (seat.name, seat.arguments) == ("update_seat", {"confirmation_number": "ABC123", "new_seat": "12C"})
    assert seat.result == "Seat changed to 12C on booking ABC123"
    assert "handoffs" not in second.metadata and second.text.startswith("Done")
    state = end_state.read_state(agent, where="f:1")
    assert end_state.lookup(state, "seat_number") == (True, "12C", "")
    assert re.fullmatch(r"FLT-\d{3}", end_state.lookup(state, "flight_number")[1])
    fresh = build("openai_agents", f"{SPEC}:triage_agent", context=f"{SPEC}:new_context")
    assert end_state.read_state(fresh, where="f:1").seat_number is None  # one context per scenario


def test_handoff_tools_and_agents_are_known() -> None:
    meta = agent_metadata(build("openai_agents", f"{SPEC}:triage_agent"))
    assert meta["tools"] == ["transfer_to_faq_agent", "transfer_to_seat_booking_agent", "faq_lookup_tool",
                             "transfer_to_triage_agent", "update_seat"]
    assert meta["agents"] == ["Triage Agent", "FAQ Agent", "Seat Booking Agent"]
    assert build("openai_agents", f"{SPEC}:triage_agent").stubbable_tools() == ["faq_lookup_tool", "update_seat"]


def test_state_without_a_context_names_the_table_key() -> None:
    with pytest.raises(UsageError, match=r'context = "module:factory"'):
        end_state.read_state(build("openai_agents", f"{SPEC}:triage_agent"), where="f:1")


def test_a_context_factory_that_raises_or_does_not_import_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> None:
        raise RuntimeError("no database")

    import frameworks.published.customer_service as module

    monkeypatch.setattr(module, "broken", broken, raising=False)
    with pytest.raises(UsageError) as raised:
        build("openai_agents", f"{SPEC}:triage_agent", context=f"{SPEC}:broken")
    assert str(raised.value) == ("pyproject.toml: [tool.fabtest.agents.shop]: context = "
                                 "'frameworks.published.customer_service:broken' raised RuntimeError: no database")
    with pytest.raises(UsageError, match=r"^[^\n]*context factory 'frameworks.published.customer_service:new_contxt'.*"
                                         r"did you mean 'new_context'"):
        build("openai_agents", f"{SPEC}:triage_agent", context=f"{SPEC}:new_contxt")


FEATURE = '''
Feature: Seat changes
  Scenario: The seat booking agent changes the seat
    Given the agent "airline"
    When the user says "I want to change my seat"
    Then the agent must hand off to "Seat Booking Agent"
    And the agent must call "transfer_to_seat_booking_agent"
    And the agent must not hand off to "FAQ Agent"
    When the user says "Booking ABC123, seat 12C please"
    Then the agent must call "update_seat" exactly 1 time
    And the agent must not hand off
    And the conversation must hand off to "Seat Booking Agent"
    And the state "seat_number" must be "12C"

  Scenario: A misspelt tool
    Given the agent "airline"
    When the user says "I want to change my seat"
    Then the agent must not call "updte_seat"

  Scenario: A misspelt agent
    Given the agent "airline"
    When the user says "I want to change my seat"
    Then the agent must not hand off to "Seat Bookng Agent"
'''


def test_the_steps_on_the_example(pytester: pytest.Pytester) -> None:
    """The feature a user writes for the example: handoff steps, a call counted once, the end state;
    a misspelt tool or agent is a usage error with a "did you mean"."""
    pytester.makefile(".toml", pyproject=f'''
[tool.fabtest]
results_dir = "results"

[tool.fabtest.agents.airline]
openai_agents = "{SPEC}:triage_agent"
context = "{SPEC}:new_context"
''')
    pytester.makefile(".feature", seats=FEATURE)
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--fabtest-no-preflight", "-q")
    out = result.stdout.str()
    result.assert_outcomes(passed=1, failed=2)
    assert 'unknown tool "updte_seat" (did you mean "update_seat"?): the agent declares' in out
    assert 'unknown agent "Seat Bookng Agent" (did you mean "Seat Booking Agent"?)' in out


def test_fabtest_import_reads_the_sdks_saved_history(tmp_path: Path) -> None:
    """The history the example's loop keeps (``result.to_input_list()``) imports with its tool calls:
    the handoff's transfer_to_* call and update_seat with its arguments and result (issue 40 item 3)."""
    from fabtest.authoring.transcripts import read_conversation

    from .published import customer_service

    async def conversation() -> list[Any]:
        context = customer_service.new_context()
        result = await agents.Runner.run(customer_service.triage_agent, "I want to change my seat", context=context)
        items = [*result.to_input_list(), {"role": "user", "content": "Booking ABC123, seat 12C please"}]
        result = await agents.Runner.run(result.last_agent, items, context=context)
        return result.to_input_list()

    saved = tmp_path / "history.json"
    saved.write_text(json.dumps(asyncio.run(conversation())), encoding="utf-8")
    recorded = read_conversation(saved)
    assert recorded.source_format == "openai-agents" and [t.user for t in recorded.turns] == [
        "I want to change my seat", "Booking ABC123, seat 12C please"]
    [handoff] = recorded.turns[0].tool_calls
    assert (handoff.name, handoff.arguments) == ("transfer_to_seat_booking_agent", {})
    assert handoff.result == {"assistant": "Seat Booking Agent"}
    [seat] = recorded.turns[1].tool_calls
    assert (seat.name, seat.arguments, seat.result) == (
        "update_seat", {"confirmation_number": "ABC123", "new_seat": "12C"}, "Seat changed to 12C on booking ABC123")
    assert recorded.turns[1].agent == "Done: Seat changed to 12C on booking ABC123"
