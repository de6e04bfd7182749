"""The AG-UI adapter against an agent built with ag-ui-protocol's own types and encoder, on 127.0.0.1 in
this process."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("ag_ui.core", reason="needs the ag-ui extra: pip install 'pytest-fabtest[ag-ui]'")

from ag_ui_shop import ShopAgent, app
from support.asgi import serve
from talk import Conversation

from fabtest.agents.base import AgentError
from fabtest.conversation import Attachment, Decision, Message
from fabtest.engine.preflight import config_problem, reachability_problem


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, ShopAgent]]:
    shop = ShopAgent()
    with serve(lambda url: app(shop)) as url:
        yield url + "/agent", shop


def talk_to(url: str, **options: Any) -> Conversation:
    """A scenario with the agent at ``url``: ``{ag_ui = url, ...options}``."""
    return Conversation({"ag_ui": url, **options})


def test_text_tool_call_and_state_events_make_the_turn(server: Any) -> None:
    url, shop = server
    talk = talk_to(url, state={"searches": 0})
    response = talk.say("weather in Paris")
    talk.close()
    assert response.text == "Sunny in Paris."
    (call,) = response.tool_calls
    assert (call.name, call.arguments, call.result) == ("get_weather", {"city": "Paris"},
                                                        {"sky": "sunny", "celsius": 21})
    assert talk.reported == [call]
    assert talk.agent.state() == {"city": "Paris", "searches": 1, "units": "celsius"}  # snapshot, then delta
    assert shop.inputs[-1].state == {"searches": 0}  # the table's state is the first run's
    # what ag-ui-protocol before 1.0 requires of RunAgentInput is always there
    assert (shop.inputs[-1].forwarded_props, shop.inputs[-1].tools, shop.inputs[-1].context) == ({}, [], [])
    assert response.metadata["usage"] == {"calls": 1, "input_tokens": 12, "output_tokens": 5}
    assert response.metadata["model"] == "shop-model" and response.metadata["outcome"] == "success"


def test_one_thread_per_scenario_with_its_messages_sent_back(server: Any) -> None:
    url, shop = server
    talk = talk_to(url)
    assert talk.say("hello").text == "Hello! 1 user message(s) in this thread."
    talk.say("weather in Oslo")
    assert talk.say("hello").text == "Hello! 3 user message(s) in this thread."
    sent = shop.inputs[-1]
    assert [m.role for m in sent.messages] == ["user", "assistant", "user", "assistant", "tool", "user"]
    assert sent.messages[3].tool_calls[0].function.name == "get_weather"  # the assistant's call, as it made it
    assert sent.messages[4].tool_call_id == sent.messages[3].tool_calls[0].id
    assert sent.state == {"city": "Oslo", "searches": 2, "units": "celsius"}  # the state the agent last sent
    thread = sent.thread_id
    other = talk_to(url)  # the next scenario
    assert other.say("hello").text == "Hello! 1 user message(s) in this thread."
    assert shop.inputs[-1].thread_id != thread
    talk.close()
    other.close()


def test_an_interrupt_on_a_tool_call_is_an_approval_resumed_with_the_decision(server: Any) -> None:
    url, shop = server
    talk = talk_to(url)
    asked = talk.say("refund 80")
    assert asked.tool_calls == [] and talk.reported == []  # asked, not made
    (pause,) = asked.pauses
    assert (pause.kind, pause.tool, pause.arguments, pause.question, pause.id) == (
        "approval", "refund", {"amount": 80}, "Approve a refund of 80 euros?", "i-refund")
    assert asked.metadata["outcome"] == "interrupt"
    done = talk.say("", decisions=[Decision("i-refund", "approved")])
    assert done.text == "The refund is issued."
    (entry,) = shop.inputs[-1].resume
    assert (entry.interrupt_id, entry.status, entry.payload) == (
        "i-refund", "resolved", {"decision": "approved", "approved": True})
    (call,) = done.tool_calls  # the approved call is made in the turn that approved it
    assert (call.name, call.arguments, call.result) == ("refund", {"amount": 80}, {"status": "issued"})
    talk.close()


def test_a_rejection_an_edit_and_an_undecided_interrupt(server: Any) -> None:
    url, shop = server
    talk = talk_to(url)
    talk.say("refund 30")
    done = talk.say("", decisions=[Decision("i-refund", "rejected", reason="no receipt")])
    assert done.text == "No refund then." and done.tool_calls == []
    assert shop.inputs[-1].resume[0].payload == {"decision": "rejected", "approved": False, "reason": "no receipt"}
    talk.say("refund 90")
    edited = talk.say("", decisions=[Decision("i-refund", "edited", arguments={"amount": 50})])
    assert shop.inputs[-1].resume[0].payload == {"decision": "edited", "approved": True, "arguments": {"amount": 50}}
    assert [(c.name, c.arguments) for c in edited.tool_calls] == [("refund", {"amount": 50})]  # as approved
    talk.say("refund 40")
    talk.say("what about the weather in Rome?")  # decides nothing: the interrupt is abandoned
    assert [(e.interrupt_id, e.status) for e in shop.inputs[-1].resume] == [("i-refund", "cancelled")]
    talk.close()


def test_the_users_files_go_as_image_and_document_parts(server: Any) -> None:
    url, shop = server
    talk = talk_to(url)
    photo = Attachment.from_bytes(b"\x89PNG fake", name="lamp.png")
    pdf = Attachment.from_bytes(b"%PDF-1.4 fake", name="receipt.pdf")
    assert talk.say("hello", photo, pdf).text == "Hello! 1 user message(s) in this thread, with image, document."
    image = shop.inputs[-1].messages[-1].content[1]
    assert (image.source.type, image.source.mime_type) == ("data", "image/png")
    talk.close()


@pytest.mark.parametrize(("said", "expected"), [
    ("fail", "the run failed (overloaded): the model is overloaded"),
    ("garbage", "sent an event that is not AG-UI: {\"type\": \"NOT_AN_EVENT\"}"),
    ("cut", "the event stream ended before RUN_FINISHED or RUN_ERROR"),
])
def test_a_broken_run_is_one_line_naming_the_cause(server: Any, said: str, expected: str) -> None:
    url, _ = server
    talk = talk_to(url)
    with pytest.raises(AgentError) as err:
        talk.say(said)
    assert str(err.value).startswith(f"AG-UI agent at {url}") and expected in str(err.value), str(err.value)
    assert "\n" not in str(err.value)
    talk.close()


def test_an_unreachable_agent_or_a_bad_table_is_one_line() -> None:
    talk = talk_to("http://127.0.0.1:9/agent")
    with pytest.raises(AgentError, match=r"^AG-UI agent at http://127.0.0.1:9/agent unreachable: ConnectError"):
        talk.say("hello")
    assert "does not accept connections" in (reachability_problem("w", {"ag_ui": "http://127.0.0.1:9/a"}) or "")
    assert "unknown key 'stat' in an AG-UI agent table (did you mean 'state'?)" in (
        config_problem("w", {"ag_ui": "http://x/agent", "stat": {}}) or "")


def test_a_conversation_given_so_far_is_the_threads_first_messages(server: Any) -> None:
    url, shop = server
    talk = talk_to(url)
    talk.messages = [Message("user", "I like green tea"), Message("agent", "Noted.")]  # Given the conversation so far
    talk.say("hello")
    sent = shop.inputs[-1].messages
    assert [(m.role, m.content) for m in sent] == [("user", "I like green tea"), ("assistant", "Noted."),
                                                   ("user", "hello")]
    talk.close()
