"""LangGraph interrupts driven as pauses (issue 40 item 5) on the real framework, offline: a graph whose
refund tool asks an Agent Inbox HumanInterrupt before it runs, one whose node asks a question, and one
with LangChain's human-in-the-loop request; each resumed with Command(resume=...) from the user's
decision, recorded on its turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fabtest.config.settings import Settings
from fabtest.engine.scenario import LLMRoles, ScenarioState
from fabtest.errors import AgentError
from fabtest.experiment.model import turn_records

from .helpers import build, provide, require

require("langgraph")

from langchain_core.messages import AIMessage  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import START, MessagesState, StateGraph  # noqa: E402
from langgraph.types import interrupt  # noqa: E402

RESUMED: list[Any] = []
CONFIG = {"allow_accept": True, "allow_edit": True, "allow_respond": True, "allow_ignore": False}


def _refund(state: MessagesState) -> dict[str, Any]:
    """Asks before refunding, the Agent Inbox way (interrupt([request])[0]), then acts on the response."""
    args = {"order": "A1", "amount": 30}
    response = interrupt([{"action_request": {"action": "refund", "args": args}, "config": CONFIG,
                           "description": "Refund 30 EUR for A1?"}])[0]
    RESUMED.append(response)
    if response["type"] == "accept":
        return {"messages": [AIMessage(f"Refunded {args['amount']} EUR.")]}
    if response["type"] == "edit":
        return {"messages": [AIMessage(f"Refunded {response['args']['args']['amount']} EUR.")]}
    return {"messages": [AIMessage(f"No refund: {response['args']}.")]}


def _ask_size(state: MessagesState) -> dict[str, Any]:
    size = interrupt("Which size?")
    RESUMED.append(size)
    return {"messages": [AIMessage(f"Size {size} it is.")]}


def _hitl(state: MessagesState) -> dict[str, Any]:
    answer = interrupt({"action_requests": [{"name": "refund", "args": {"order": "A1"}, "description": "ok?"}],
                        "review_configs": [{"action_name": "refund", "allowed_decisions": ["approve", "reject"]}]})
    RESUMED.append(answer)
    return {"messages": [AIMessage(str(answer["decisions"][0]["type"]))]}


def _graph(node: Any, checkpointer: bool = True) -> Any:
    builder = StateGraph(MessagesState)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    return builder.compile(checkpointer=InMemorySaver()) if checkpointer else builder.compile()


@pytest.fixture(autouse=True)
def graphs(monkeypatch: pytest.MonkeyPatch) -> None:
    RESUMED.clear()
    provide(monkeypatch, "lg_pauses", refund=lambda context: _graph(_refund), size=lambda context: _graph(_ask_size),
            hitl=lambda context: _graph(_hitl), stateless=lambda context: _graph(_refund, checkpointer=False))


def _state(tmp_path: Path, graph: str) -> ScenarioState:
    return ScenarioState(settings=Settings(), rootdir=tmp_path, workdir=tmp_path, context={}, llms=LLMRoles(),
                         where="f.feature:4", default_agent=build("langgraph", f"lg_pauses:{graph}"))


def test_a_human_interrupt_is_an_approval_resumed_with_a_human_response(tmp_path: Path) -> None:
    state = _state(tmp_path, "refund")
    state.user_says("refund A1")
    [pause] = state.last_turn.response.pauses
    assert (pause.kind, pause.tool, pause.arguments, pause.question) == (
        "approval", "refund", {"order": "A1", "amount": 30}, "Refund 30 EUR for A1?")
    state.asked_approval("refund", "must")
    state.user_decides("approved")
    assert RESUMED == [{"type": "accept", "args": None}] and state.last_turn.response.text == "Refunded 30 EUR."
    state.finish()
    [asked, _] = [t.model_dump(mode="json") for t in turn_records(state.conversation)]
    assert asked["pauses"][0]["decision"] == "approved" and asked["pauses"][0]["decided_in_turn"] == 2


@pytest.mark.parametrize(("decide", "resumed", "reply"), [
    ({"decision": "rejected", "reason": "no receipt"}, {"type": "response", "args": "no receipt"},
     "No refund: no receipt."),
    ({"decision": "edited", "arguments": {"amount": 20}},
     {"type": "edit", "args": {"action": "refund", "args": {"order": "A1", "amount": 20}}}, "Refunded 20 EUR."),
])
def test_rejections_and_edits_become_the_human_response_the_graph_reads(
        tmp_path: Path, decide: dict[str, Any], resumed: dict[str, Any], reply: str) -> None:
    state = _state(tmp_path, "refund")
    state.user_says("refund A1")
    state.user_decides(decide.pop("decision"), **decide)
    assert RESUMED == [resumed] and state.last_turn.response.text == reply


def test_a_decision_the_interrupt_does_not_allow_is_one_line_naming_it(tmp_path: Path) -> None:
    state = _state(tmp_path, "refund")
    state.user_says("refund A1")
    with pytest.raises(AgentError, match=r"does not allow 'ignore' \(its config allows accept, edit, respond\)"):
        state.user_decides("rejected")  # no reason: Agent Inbox's "ignore", which this config forbids
    assert RESUMED == []


def test_a_plain_interrupt_is_a_question_resumed_with_the_answer(tmp_path: Path) -> None:
    state = _state(tmp_path, "size")
    state.user_says("a shirt please")
    [pause] = state.last_turn.response.pauses
    assert (pause.kind, pause.question) == ("question", "Which size?")
    with pytest.raises(Exception, match="is not an approval"):
        state.user_decides("approved")
    state.user_decides("answered", answer="M")
    assert RESUMED == ["M"] and state.last_turn.response.text == "Size M it is."
    state.finish()


def test_langchains_human_in_the_loop_request_gets_its_decisions(tmp_path: Path) -> None:
    state = _state(tmp_path, "hitl")
    state.user_says("refund A1")
    state.user_decides("rejected", reason="no receipt")
    assert RESUMED == [{"decisions": [{"type": "reject", "message": "no receipt"}]}]
    state2 = _state(tmp_path, "hitl")
    state2.user_says("refund A1")
    with pytest.raises(AgentError, match=r"does not allow 'edit' \(allowed_decisions: approve, reject\)"):
        state2.user_decides("edited", arguments={"order": "B2"})


def test_an_interrupt_in_a_graph_without_a_checkpointer_is_the_agents_error(tmp_path: Path) -> None:
    state = _state(tmp_path, "stateless")
    with pytest.raises(AgentError, match="called interrupt\\(\\) but has no checkpointer, so it cannot be resumed"):
        state.user_says("refund A1")
