"""A stubbed call and a seeded history are visible wherever a person reads the conversation:
under a failure, in the HTML report and in fabtest view."""

from __future__ import annotations


def test_stubbed_calls_and_the_seeded_history_show_where_a_person_reads_the_conversation() -> None:
    from fabtest.conversation import AgentResponse, Conversation, Message, ToolCall, Turn
    from fabtest.engine import transcript
    from fabtest.report.html import _transcript
    from fabtest.view.scenarios import conversation_page

    conversation = Conversation(history=[Message("user", "change my plan"), Message("agent", "your number?")])
    conversation.turns.append(Turn(1, "0176", AgentResponse("basic", [ToolCall("lookup", {"phone": "0176"}, {"plan": "basic"},
                                                                               stubbed=True)])))
    shown = transcript.render(conversation)
    assert shown.splitlines()[:3] == ["Seeded history", "  user:  change my plan", "  agent: your number?"]
    assert 'lookup(phone="0176") [stubbed]' in shown
    entry = {"transcript": [{"number": 1, "user": "0176", "agent": "basic",
                             "tool_calls": [{"name": "lookup", "arguments": {}, "result": 1, "stubbed": True}]}]}
    assert "<b>lookup</b>({}) <span class=\"muted\">stubbed</span>" in _transcript(entry)
    assert "<b>lookup</b> <span class=\"muted\">stubbed</span><pre>{}</pre>" in conversation_page({"experiment": {"id": "exp_1"}}, {"name": "s", **entry})
