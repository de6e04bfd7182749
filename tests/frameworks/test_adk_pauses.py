"""ADK tool confirmations driven as pauses (issue 40 item 5) on the real ADK against FakeGemini: a
require_confirmation tool makes ADK ask adk_request_confirmation; the user's decision goes back as that
call's function response, and the confirmed call is recorded on the turn that made it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fabtest.config.settings import Settings
from fabtest.engine.scenario import LLMRoles, ScenarioState
from fabtest.errors import AgentError
from fabtest.testing import FakeGemini

from .helpers import build, provide, require

require("adk")

from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.tools import FunctionTool  # noqa: E402

MADE: list[dict[str, Any]] = []


def refund(order: str, amount: int) -> dict[str, Any]:
    """Refund an order."""
    MADE.append({"order": order, "amount": amount})
    return {"refunded": amount}


@pytest.fixture
def state(fake: FakeGemini, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> ScenarioState:
    MADE.clear()
    fake.add_tool_script(r"refund", [{"name": "refund", "args": {"order": "A1", "amount": 30}},
                                     lambda req: f"tool said: {req.function_responses[-1]['response']}"])
    agent = LlmAgent(name="desk", model="gemini-2.5-flash", instruction="Refunds.",
                     tools=[FunctionTool(refund, require_confirmation=True)])
    provide(monkeypatch, "adk_desk", root_agent=agent)
    return ScenarioState(settings=Settings(), rootdir=tmp_path, workdir=tmp_path, context={}, llms=LLMRoles(),
                         where="f.feature:4", default_agent=build("adk", "adk_desk:root_agent"))


def test_a_confirmation_is_an_approval_and_the_call_is_made_when_confirmed(state: ScenarioState) -> None:
    state.user_says("refund A1")
    [pause] = state.last_turn.response.pauses
    assert (pause.kind, pause.tool, pause.arguments) == ("approval", "refund", {"order": "A1", "amount": 30})
    assert "approve or reject" in (pause.question or "")
    assert state.last_turn.tool_calls == [] and MADE == []
    state.user_decides("approved")
    [call] = state.last_turn.tool_calls
    assert (call.name, call.result, MADE) == ("refund", {"refunded": 30}, [{"order": "A1", "amount": 30}])
    assert state.last_turn.response.text == "tool said: {'refunded': 30}"
    state.finish()


def test_a_rejection_makes_no_call(state: ScenarioState) -> None:
    state.user_says("refund A1")
    state.user_decides("rejected", reason="no receipt")
    assert MADE == [] and state.last_turn.tool_calls == []
    assert "rejected" in state.last_turn.response.text


def test_an_edited_approval_is_refused_in_one_line(state: ScenarioState) -> None:
    state.user_says("refund A1")
    with pytest.raises(AgentError, match="cannot be approved with edited arguments"):
        state.user_decides("edited", arguments={"amount": 20})
