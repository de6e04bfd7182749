"""The public data model exported by ``fabtest`` (plain data, no I/O)."""

from __future__ import annotations

import dataclasses

import pytest

import fabtest
from fabtest import AgentError, AgentResponse, AgentTimeout, Check, Conversation, Message, ToolCall, Turn


def _turn(number: int, user: str, text: str, *, topic: str | None = None, calls: list[ToolCall] | None = None) -> Turn:
    return Turn(number=number, user=user, response=AgentResponse(text=text, tool_calls=calls or []), topic=topic)


def test_public_names_are_exported():
    for name in ("Agent", "AgentError", "AgentResponse", "AgentTimeout", "Check", "Conversation", "Message",
                 "ToolCall", "Turn", "with_context"):
        assert hasattr(fabtest, name), name
        assert name in fabtest.__all__
    assert issubclass(AgentTimeout, AgentError)


@pytest.mark.parametrize("role", ["user", "agent"])
def test_message_accepts_user_and_agent(role):
    message = Message(role, "hi")
    assert (message.role, message.content) == (role, "hi")


@pytest.mark.parametrize("role", ["assistant", "system", "tool", "User", ""])
def test_message_rejects_other_roles(role):
    with pytest.raises(ValueError, match="role must be 'user' or 'agent'"):
        Message(role, "hi")  # type: ignore[arg-type]


def test_message_is_immutable_and_comparable():
    message = Message("user", "hi")
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.content = "changed"  # type: ignore[misc]
    assert message == Message("user", "hi")
    assert message != Message("agent", "hi")
    assert len({message, Message("user", "hi")}) == 1


def test_tool_call_defaults_are_empty_and_independent():
    first, second = ToolCall("search"), ToolCall("search")
    assert (first.arguments, first.result, first.metadata) == ({}, None, {})
    first.arguments["city"] = "Berlin"
    first.metadata["ms"] = 3
    assert second.arguments == {} and second.metadata == {}
    assert ToolCall("book", {"id": 1}, result="ok").to_dict() == {
        "name": "book", "arguments": {"id": 1}, "result": "ok", "metadata": {}}


def test_agent_response_defaults():
    first, second = AgentResponse("hi"), AgentResponse("there")
    assert first.text == "hi"
    assert first.tool_calls == [] and first.metadata == {}
    first.tool_calls.append(ToolCall("x"))
    assert second.tool_calls == []


def test_turn_tool_calls_are_the_response_tool_calls():
    call = ToolCall("search")
    turn = _turn(1, "hi", "hello", calls=[call])
    assert turn.tool_calls == [call]
    assert turn.topic is None and turn.duration_s == 0.0


def test_empty_conversation():
    conv = Conversation()
    assert conv.messages == [] and conv.tool_calls == [] and conv.topics_visited == []
    assert conv.last_turn is None
    assert conv.backtracked is False
    assert conv.transcript() == ""


def test_conversation_messages_alternate_user_and_agent():
    conv = Conversation(turns=[_turn(1, "hi", "hello"), _turn(2, "book it", "done")])
    assert conv.messages == [Message("user", "hi"), Message("agent", "hello"),
                             Message("user", "book it"), Message("agent", "done")]
    assert conv.last_turn is conv.turns[1]
    assert conv.transcript() == "User: hi\nAgent: hello\nUser: book it\nAgent: done"


def test_conversation_tool_calls_in_order_across_turns():
    a, b, c = ToolCall("search"), ToolCall("check"), ToolCall("book")
    conv = Conversation(turns=[_turn(1, "u1", "a1", calls=[a, b]), _turn(2, "u2", "a2"), _turn(3, "u3", "a3", calls=[c])])
    assert conv.tool_calls == [a, b, c]


def test_topics_visited_are_distinct_in_first_reached_order():
    topics = ["greeting", "details", "details", None, "results", "details", "booking"]
    conv = Conversation(turns=[_turn(i + 1, "u", "a", topic=t) for i, t in enumerate(topics)])
    assert conv.topic_path == ["greeting", "details", "details", "results", "details", "booking"]
    assert conv.topics_visited == ["greeting", "details", "results", "booking"]


@pytest.mark.parametrize(("path", "expected"), [
    ([], False),
    (["a"], False),
    (["a", "a", "b", "b", "c"], False),  # staying in a topic is not backtracking
    (["a", "b", "c"], False),
    (["a", "b", "a"], True),
    (["a", "b", "c", "b"], True),
    (["a", "b", "b", "a"], True),
])
def test_backtracked(path, expected):
    conv = Conversation(turns=[_turn(i + 1, "u", "a", topic=t) for i, t in enumerate(path)])
    assert conv.backtracked is expected


def test_check_passed_and_to_dict():
    assert Check("match", "must", "match:/x/", "passed").passed is True
    assert Check("match", "must", "match:/x/", "failed").passed is False
    assert Check("satisfy", "should", "friendly", "skipped").passed is None
    assert Check("satisfy", "should", "friendly", "inconclusive").passed is None
    record = Check("call_tool", "should", "call_tool:x", "failed", turn=2, details="did not call x").to_dict()
    assert record == {"type": "call_tool", "mode": "should", "criterion": "call_tool:x", "status": "failed",
                      "passed": False, "turn": 2, "details": "did not call x"}


def test_check_fields_have_the_names_of_the_json_and_the_old_names_still_read():
    check = Check(type="call_tool", mode="must", criterion="call_tool:x", status="passed", data={"tool": "x"})
    record = check.to_dict()
    assert [f.name for f in dataclasses.fields(Check)] == [k for k in record if k != "passed"]
    assert (check.kind, check.label) == ("call_tool", "call_tool:x")  # read-only, for code written before 0.2
    with pytest.raises(AttributeError):
        check.kind = "match"  # type: ignore[misc]
    # built with the keywords before 0.2: the same check, and a warning that says what to write now
    with pytest.warns(DeprecationWarning, match="fields are type and criterion"):
        old = Check(kind="call_tool", mode="must", label="call_tool:x", status="passed", data={"tool": "x"})
    assert old == check
    with pytest.raises(TypeError, match="needs a type, a mode, a criterion and a status"):
        Check("match", "must")  # type: ignore[call-arg]


def test_conversation_record_sorts_soft_and_hard_checks():
    conv = Conversation()
    soft = Check("match", "should", "m", "failed")
    hard = Check("match", "must", "m", "passed")
    conv.record(soft)
    conv.record(hard)
    assert conv.evaluations == [soft] and conv.expectations == [hard]
