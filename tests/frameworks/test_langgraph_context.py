"""LangGraph's runtime context and its agents' handoffs (issue 40 item 1): the table's ``context``
factory is the ``context=`` of every run (a node reads ``runtime.context``, as in LangGraph's
runtime-context how-to), the graph's state stays the end state, and a change of the agent that
names the AI messages is a handoff event."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from fabtest.conversation import Message
from fabtest.engine import end_state
from fabtest.engine.turns import call_agent

from .helpers import build, provide, require

require("langgraph")

from langchain_core.messages import AIMessage  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import END, START, MessagesState, StateGraph  # noqa: E402
from langgraph.runtime import Runtime  # noqa: E402


@dataclass
class Caller:
    user_name: str


class State(MessagesState):
    routed: str


def triage(state: State) -> dict[str, object]:
    return {"messages": [AIMessage("Passing you to billing.", name="triage")], "routed": "billing"}


def billing(state: State, runtime: Runtime[Caller]) -> dict[str, object]:
    return {"messages": [AIMessage(f"Hello {runtime.context.user_name}, billing here.", name="billing")]}


@pytest.fixture(autouse=True)
def graph(monkeypatch: pytest.MonkeyPatch) -> None:
    builder = StateGraph(State, context_schema=Caller)
    builder.add_node("triage", triage)
    builder.add_node("billing", billing)
    builder.add_edge(START, "triage")
    builder.add_edge("triage", "billing")
    builder.add_edge("billing", END)
    provide(monkeypatch, "lg_team", graph=builder.compile(checkpointer=InMemorySaver()),
            caller=lambda: Caller("Ada"))


def test_the_context_reaches_the_nodes_and_a_new_speaker_is_a_handoff() -> None:
    agent = build("langgraph", "lg_team:graph", context="lg_team:caller")
    response = call_agent(agent, [Message("user", "my bill is wrong")], timeout=30)
    assert response.text == "Hello Ada, billing here."
    assert response.metadata["handoffs"] == [{"from": "triage", "to": "billing"}]
    assert end_state.lookup(end_state.read_state(agent, where="f:1"), "routed") == (True, "billing", "")
    again = call_agent(agent, [Message("user", "my bill is wrong"), Message("agent", response.text),
                               Message("user", "thanks")], timeout=30)
    assert again.metadata["handoffs"] == [{"from": "billing", "to": "triage"}, {"from": "triage", "to": "billing"}]
