"""OpenAI Agents SDK tool approvals driven as pauses (issue 40 item 5) on the real SDK: a needs_approval
tool stops the run, the user's decision is applied with state.approve / state.reject and the state is
resumed; the held call is recorded on the turn that resumed it, only when it was made."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from builtin_agent.fake_openai import FakeOpenAI, message, tool_call

from fabtest.config.settings import Settings
from fabtest.engine.scenario import LLMRoles, ScenarioState
from fabtest.errors import AgentError

from .helpers import build, provide, require

require("openai_agents")

from agents import Agent, OpenAIChatCompletionsModel, function_tool, set_tracing_disabled  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402

MADE: list[dict[str, Any]] = []


@function_tool(needs_approval=True)
def refund(order: str, amount: int) -> str:
    """Refund an order."""
    MADE.append({"order": order, "amount": amount})
    return f"refunded {amount} EUR"


def _answer(body: dict[str, Any]) -> tuple[int, Any]:
    last = body["messages"][-1]
    if last["role"] == "tool":
        return 200, message(f"tool said: {last['content']}")
    return 200, message(None, [tool_call("call_7", "refund", {"order": "A1", "amount": 30})])


@pytest.fixture
def state(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[ScenarioState]:
    set_tracing_disabled(True)
    MADE.clear()
    with FakeOpenAI(_answer) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="test-key", max_retries=0)
        agent = Agent(name="desk", tools=[refund], model=OpenAIChatCompletionsModel(model="gpt-4.1-mini",
                                                                                   openai_client=client))
        provide(monkeypatch, "oa_desk", agent=agent)
        yield ScenarioState(settings=Settings(), rootdir=tmp_path, workdir=tmp_path, context={}, llms=LLMRoles(),
                            where="f.feature:4", default_agent=build("openai_agents", "oa_desk:agent"))


def test_an_approval_resumes_the_run_and_the_call_is_made_on_that_turn(state: ScenarioState) -> None:
    state.user_says("refund A1")
    [pause] = state.last_turn.response.pauses
    assert (pause.id, pause.tool, pause.arguments) == ("call_7", "refund", {"order": "A1", "amount": 30})
    assert state.last_turn.tool_calls == [] and MADE == []  # waiting is not calling
    state.user_decides("approved")
    assert MADE == [{"order": "A1", "amount": 30}]
    [call] = state.last_turn.tool_calls
    assert (call.name, call.result) == ("refund", "refunded 30 EUR")
    assert state.last_turn.response.text == "tool said: refunded 30 EUR"
    state.finish()


def test_a_rejection_reaches_the_model_with_its_reason_and_no_call_is_made(state: ScenarioState) -> None:
    state.user_says("refund A1")
    state.user_decides("rejected", reason="no receipt")
    assert MADE == [] and state.last_turn.tool_calls == []
    assert state.last_turn.response.text == "tool said: no receipt"


def test_an_edited_approval_is_refused_in_one_line(state: ScenarioState) -> None:
    state.user_says("refund A1")
    with pytest.raises(AgentError, match=r"approves a call only as the model made it .*cannot be approved with "
                                         r"edited arguments"):
        state.user_decides("edited", arguments={"amount": 20})
    assert MADE == []
