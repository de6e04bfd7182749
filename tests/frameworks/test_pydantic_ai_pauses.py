"""PydanticAI deferred tool calls driven as pauses (issue 40 item 5) on the real framework with its
FunctionModel: a requires_approval tool is an approval resumed with DeferredToolResults (True,
ToolDenied(reason), ToolApproved(override_args)), a CallDeferred(kind="question") a question resumed with
the answer as the call's result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fabtest.config.settings import Settings
from fabtest.engine.scenario import LLMRoles, ScenarioState

from .helpers import build, provide, require

require("pydantic_ai")

from pydantic_ai import Agent, CallDeferred, DeferredToolRequests  # noqa: E402
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart  # noqa: E402
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402

MADE: list[dict[str, Any]] = []


def _reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returned = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
    if returned:
        return ModelResponse(parts=[TextPart(f"tool said: {returned[0].content}")])
    asked = str(messages[-1].parts[-1].content)
    if "size" in asked:
        return ModelResponse(parts=[ToolCallPart("ask_size", {"question": "Which size?"}, tool_call_id="q1")])
    return ModelResponse(parts=[ToolCallPart("refund", {"order": "A1", "amount": 30}, tool_call_id="r1")])


@pytest.fixture
def state(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> ScenarioState:
    MADE.clear()
    agent = Agent(FunctionModel(_reply, model_name="gemini-2.5-flash"), name="desk",
                  output_type=[str, DeferredToolRequests])

    @agent.tool_plain(requires_approval=True)
    def refund(order: str, amount: int) -> str:
        MADE.append({"order": order, "amount": amount})
        return f"refunded {amount}"

    @agent.tool_plain
    def ask_size(question: str) -> str:
        raise CallDeferred(kind="question")

    provide(monkeypatch, "pai_desk", agent=agent)
    return ScenarioState(settings=Settings(), rootdir=tmp_path, workdir=tmp_path, context={}, llms=LLMRoles(),
                         where="f.feature:4", default_agent=build("pydantic_ai", "pai_desk:agent"))


def test_an_approval_runs_the_tool_on_the_resumed_turn(state: ScenarioState) -> None:
    state.user_says("refund A1")
    [pause] = state.last_turn.response.pauses
    assert (pause.id, pause.kind, pause.tool, pause.arguments) == ("r1", "approval", "refund",
                                                                  {"order": "A1", "amount": 30})
    assert state.last_turn.tool_calls == [] and MADE == []
    state.user_decides("approved")
    [call] = state.last_turn.tool_calls
    assert (call.name, call.result, MADE) == ("refund", "refunded 30", [{"order": "A1", "amount": 30}])
    assert state.last_turn.response.text == "tool said: refunded 30"
    state.finish()


@pytest.mark.parametrize(("decide", "made", "reply"), [
    ({"decision": "rejected", "reason": "no receipt"}, [], "tool said: no receipt"),
    ({"decision": "edited", "arguments": {"amount": 20}}, [{"order": "A1", "amount": 20}], "tool said: refunded 20"),
])
def test_a_rejection_and_an_edit_reach_the_run(state: ScenarioState, decide: dict[str, Any],
                                               made: list[dict[str, Any]], reply: str) -> None:
    state.user_says("refund A1")
    state.user_decides(decide.pop("decision"), **decide)
    assert MADE == made and state.last_turn.response.text == reply
    assert [c.arguments for c in state.last_turn.tool_calls] == made


def test_a_deferred_question_is_answered_with_the_users_text(state: ScenarioState) -> None:
    state.user_says("what size?")
    [pause] = state.last_turn.response.pauses
    assert (pause.kind, pause.question) == ("question", "Which size?")
    state.user_decides("answered", answer="M")
    assert state.last_turn.response.text == "tool said: M" and state.last_turn.tool_calls == []
