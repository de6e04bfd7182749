"""Tool stubs inside a LangGraph graph's ToolNode, through the turn loop's agent call.

The model is a scripted LangChain chat model (LangChain's fake-model idiom): it looks the account
up, then lists the plans, then says what both tools returned. The real tools count their calls.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from fabtest.agents.stubs import ToolStub, ToolStubs
from fabtest.conversation import Message
from fabtest.engine import stubbing
from fabtest.engine.checks import ArgExpectation
from fabtest.engine.turns import call_agent
from fabtest.errors import UsageError

from .helpers import build, provide, require

require("langgraph")

from langchain_core.language_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import START, MessagesState, StateGraph  # noqa: E402
from langgraph.prebuilt import ToolNode, tools_condition  # noqa: E402

REAL: list[str] = []


class _Support(BaseChatModel):
    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        results = [m for m in messages if isinstance(m, ToolMessage)]
        if not results:
            reply = AIMessage("", tool_calls=[{"name": "lookup_account", "args": {"phone": str(messages[-1].content)},
                                               "id": "call-1"}])
        elif len(results) == 1:
            reply = AIMessage("", tool_calls=[{"name": "list_plans", "args": {}, "id": "call-2"}])
        else:
            reply = AIMessage(" | ".join(f"{m.name}={m.status}:{m.content}" for m in results))
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
def lookup_account(phone: str) -> dict[str, str]:
    """The account of a phone number."""
    REAL.append("lookup_account")
    return {"plan": "real"}


@tool
def list_plans() -> list[str]:
    """The plans on offer."""
    REAL.append("list_plans")
    return ["real"]


def _graph() -> Any:
    builder = StateGraph(MessagesState)
    builder.add_node("model", lambda state: {"messages": [_Support().invoke(state["messages"])]})
    builder.add_node("tools", ToolNode([lookup_account, list_plans]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=InMemorySaver())


GRAPH = _graph()


@pytest.fixture(autouse=True)
def module(monkeypatch: pytest.MonkeyPatch) -> None:
    REAL.clear()
    provide(monkeypatch, "lg_support", graph=GRAPH)


def _stubs(*defined: ToolStub) -> ToolStubs:
    found = ToolStubs()
    for stub in defined:
        found.define(stub)
    return found


def test_a_stub_answers_in_the_tool_node_and_the_call_is_marked_stubbed() -> None:
    agent = build("langgraph", "lg_support:graph")
    stubs = _stubs(ToolStub("lookup_account", "f.feature:3", result={"account_id": "A-17", "plan": "basic"}),
                   ToolStub("list_plans", "f.feature:4", error="503 Service Unavailable"),
                   ToolStub("list_plans", "f.feature:5", delay_s=0.2))
    started = time.perf_counter()
    response = call_agent(agent, [Message("user", "0176")], timeout=30, tool_stubs=stubs)
    assert time.perf_counter() - started >= 0.2
    assert REAL == []  # neither real tool ran
    assert response.text == ('lookup_account=success:{"account_id": "A-17", "plan": "basic"} | '
                             "list_plans=error:503 Service Unavailable")
    lookup, plans = response.tool_calls
    assert (lookup.name, lookup.arguments, lookup.result, lookup.stubbed) == (
        "lookup_account", {"phone": "0176"}, {"account_id": "A-17", "plan": "basic"}, True)
    assert plans.stubbed and plans.metadata["error"] and plans.result == "503 Service Unavailable"


def test_argument_cases_and_the_real_tool_without_a_stub() -> None:
    agent = build("langgraph", "lg_support:graph")
    cases = ((ArgExpectation.parse("phone", "/^030/", where="f:1"),), {"plan": "unlimited"}),
    stubs = _stubs(ToolStub("lookup_account", "f:1", cases=cases))
    response = call_agent(agent, [Message("user", "0301")], timeout=30, tool_stubs=stubs)
    assert REAL == ["list_plans"]
    lookup, plans = response.tool_calls
    assert lookup.stubbed and lookup.result == {"plan": "unlimited"}
    assert not plans.stubbed and plans.result == ["real"]
    # outside a scenario the shared graph runs its real tools
    again = build("langgraph", "lg_support:graph")
    call_agent(again, [Message("user", "0301")], timeout=30)
    assert REAL == ["list_plans", "lookup_account", "list_plans"]


def test_a_stub_of_a_tool_the_graph_lacks_is_a_did_you_mean() -> None:
    agent = build("langgraph", "lg_support:graph")
    assert agent.stubbable_tools() == ["lookup_account", "list_plans"]
    with pytest.raises(UsageError, match=r"""^f.feature:7: no tool "list_plan" to stub: the agent has "lookup_account", """
                                         r""""list_plans" \(did you mean 'list_plans'\?\)$"""):
        stubbing.verify(_stubs(ToolStub("list_plan", "f.feature:7", error="x")), agent)


def test_the_graph_state_after_the_turn_is_the_agents_end_state() -> None:
    from fabtest.engine import end_state

    agent = build("langgraph", "lg_support:graph")
    stubs = _stubs(ToolStub("lookup_account", "f:1", result={"plan": "basic"}))
    call_agent(agent, [Message("user", "0176")], timeout=30, tool_stubs=stubs)
    state = end_state.read_state(agent, where="f:9")
    assert end_state.lookup(state, "messages.0.content") == (True, "0176", "")
    assert end_state.lookup(state, "messages.2.name") == (True, "lookup_account", "")  # the stubbed ToolMessage
    assert end_state.lookup(state, "messages.2.status") == (True, "success", "")
