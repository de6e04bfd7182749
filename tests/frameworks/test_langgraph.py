"""The LangGraph adapter on the real framework: a graph with a model node (a LangChain chat model with a
script, LangChain's fake-model idiom) and a ToolNode running a real tool, with and without a checkpointer."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fabtest.errors import UsageError

from .helpers import build, provide, require, say

require("langgraph")

from langchain_core.language_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import START, MessagesState, StateGraph  # noqa: E402
from langgraph.prebuilt import ToolNode, tools_condition  # noqa: E402

SEEN: list[list[BaseMessage]] = []


class _Scripted(BaseChatModel):
    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        SEEN.append(list(messages))
        last = messages[-1]
        if isinstance(last, ToolMessage):
            reply = AIMessage(f"tea costs {json.loads(str(last.content))['usd']}")
        elif "tea" in str(last.content):
            reply = AIMessage("", tool_calls=[{"name": "price", "args": {"item": "tea"}, "id": f"c{len(SEEN)}"}])
        else:
            reply = AIMessage(f"you said: {last.content}")
        reply.usage_metadata = {"input_tokens": 10, "output_tokens": 3, "total_tokens": 13}
        reply.response_metadata = {"model_name": "gemini-2.5-flash"}
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
def price(item: str) -> dict[str, Any]:
    """The price of an item."""
    return {"item": item, "usd": 3}


def _builder() -> StateGraph:
    builder = StateGraph(MessagesState)
    builder.add_node("model", lambda state: {"messages": [_Scripted().invoke(state["messages"])]})
    builder.add_node("tools", ToolNode([price]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    return builder


@pytest.fixture(autouse=True)
def module(monkeypatch: pytest.MonkeyPatch) -> None:
    SEEN.clear()
    provide(monkeypatch, "lg_shop", graph=_builder().compile(checkpointer=InMemorySaver()),
            stateless=_builder().compile(), builder=_builder(), make_graph=lambda context: _builder().compile(),
            make_builder=_builder)


@pytest.mark.parametrize("graph", ["graph", "stateless", "make_graph"])
def test_a_turn_maps_tool_calls_tool_messages_usage_and_model(graph: str) -> None:
    agent = build("langgraph", f"lg_shop:{graph}")
    response, reported = say(agent, "how much is tea?")
    [call] = response.tool_calls
    assert (call.name, call.arguments, call.result) == ("price", {"item": "tea"}, {"item": "tea", "usd": 3})
    assert reported == response.tool_calls and response.text == "tea costs 3"
    assert response.metadata["usage"] == {"calls": 2, "input_tokens": 20, "output_tokens": 6}
    assert response.metadata["model"] == "gemini-2.5-flash"
    # the second turn continues the scenario's thread (or its messages): the tool result is in the input
    response, _ = say(agent, "how much is tea?", "tea costs 3", "thanks")
    assert response.text == "you said: thanks" and response.tool_calls == []
    assert any(isinstance(m, ToolMessage) for m in SEEN[-1])


def test_each_scenario_has_its_own_thread() -> None:
    first, second = build("langgraph", "lg_shop:graph"), build("langgraph", "lg_shop:graph")
    say(first, "how much is tea?")
    response, _ = say(second, "hello")
    assert [m.content for m in SEEN[-1]] == ["hello"]
    assert first.metadata()["thread_id"] != response.metadata["thread_id"]


def test_a_conversation_it_did_not_have_is_rebuilt_from_the_text() -> None:
    response, _ = say(build("langgraph", "lg_shop:graph"), "earlier", "an answer", "now")
    assert response.text == "you said: now"
    assert [m.content for m in SEEN[-1]] == ["earlier", "an answer", "now"]


@pytest.mark.parametrize(("target", "got"), [("builder", "got"), ("make_builder", "the factory returned")])
def test_an_uncompiled_graph_is_one_line_naming_compile(target: str, got: str) -> None:
    with pytest.raises(UsageError, match=rf"^[^\n]*{got} langgraph\.graph\.state\.StateGraph: this StateGraph was "
                                         r"not compiled: point the table at graph = builder\.compile\("):
        build("langgraph", f"lg_shop:{target}")
