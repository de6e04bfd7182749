"""OpenAI chat-completions: the built-in agent's ``provider = "openai"``, and ``{openai = URL}`` agents."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fabtest.agents.base import AgentError
from fabtest.agents.builtin import BuiltinAgent
from fabtest.agents.openai_chat import OpenAIChatAgent
from fabtest.agents.registry import make_agent
from fabtest.conversation import Message
from fabtest.errors import UsageError

from .fake_openai import FakeOpenAI, message, tool_call

TOOLS_MODULE = '''
def weather(city: str) -> dict:
    """The weather in a city."""
    return {"city": city, "sky": "clear"}

TOOLS = [weather]
'''


# -- the built-in agent on an OpenAI-compatible endpoint ------------------------------------------

def test_builtin_agent_runs_the_tool_loop_over_chat_completions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "oa_tools.py").write_text(TOOLS_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))

    def answer(body: dict[str, Any]) -> tuple[int, Any]:
        last = body["messages"][-1]
        if last["role"] == "tool":
            return 200, message(f"It is {json.loads(last['content'])['sky']}.", usage=(30, 5))
        return 200, message(None, [tool_call("call_1", "weather", {"city": "Oslo"})], usage=(20, 8))

    with FakeOpenAI(answer) as server:
        agent = make_agent({"provider": "openai", "model": "llama3.1", "base_url": server.base_url,
                            "tools": "oa_tools:TOOLS", "instructions": "Answer briefly."},
                           {"rootdir": str(tmp_path)}, where="x")
        assert isinstance(agent, BuiltinAgent)
        reply = agent.chat([Message("user", "Weather in Oslo?")])
        follow = agent.chat([Message("user", "Weather in Oslo?"), Message("agent", reply.text), Message("user", "ok")])
    assert reply.text == "It is clear."
    [call] = reply.tool_calls
    assert (call.name, call.arguments, call.result) == ("weather", {"city": "Oslo"}, {"city": "Oslo", "sky": "clear"})
    assert reply.metadata["usage"] == {"calls": 2, "input_tokens": 50, "output_tokens": 13}
    first = server.requests[0]
    assert first["model"] == "llama3.1"
    assert first["messages"][0] == {"role": "system", "content": "Answer briefly."}
    assert first["tools"][0]["function"]["name"] == "weather"
    tool_message = server.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_1"
    # the next turn carries the whole history, tool call and result included
    roles = [m["role"] for m in server.requests[2]["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert follow.text == "It is clear."  # the fake answers the tool message again


# -- an agent that speaks chat completions itself -------------------------------------------------

def test_openai_chat_agent_records_content_tool_calls_and_usage() -> None:
    calls = [tool_call("c1", "search_venues", {"city": "Berlin", "capacity": 10}, result=[{"id": "ber-spree"}]),
             tool_call("c2", "check_availability", '{"venue_id": "ber-spree"}', output={"available": True}),
             tool_call("c3", "noop", "")]
    with FakeOpenAI(lambda body: (200, message("Spreeblick Loft is free.", calls))) as server:
        agent = make_agent({"openai": server.base_url, "model": "venue-agent", "system": "be brief"},
                           {"agent_name": "remote"}, where="x")
        assert isinstance(agent, OpenAIChatAgent)
        seen: list[Any] = []
        reply = agent.chat([Message("user", "Hi"), Message("agent", "Hello"), Message("user", "Berlin, 10")],
                           on_tool_call=seen.append)
    assert server.paths == ["/v1/chat/completions"]
    assert server.requests[0]["model"] == "venue-agent"
    assert server.requests[0]["messages"] == [
        {"role": "system", "content": "be brief"}, {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Berlin, 10"}]
    assert reply.text == "Spreeblick Loft is free."
    assert [(c.name, c.arguments, c.result) for c in reply.tool_calls] == [
        ("search_venues", {"city": "Berlin", "capacity": 10}, [{"id": "ber-spree"}]),
        ("check_availability", {"venue_id": "ber-spree"}, {"available": True}),
        ("noop", {}, None),
    ]
    assert reply.tool_calls[0].metadata == {"id": "c1"} and seen == reply.tool_calls
    assert reply.metadata["usage"] == {"calls": 1, "input_tokens": 11, "output_tokens": 7}
    assert reply.metadata["finish_reason"] == "tool_calls"
    assert agent.metadata()["usage"]["calls"] == 1


def test_a_full_endpoint_url_is_used_as_given() -> None:
    with FakeOpenAI(lambda body: (200, message("hi"))) as server:
        agent = OpenAIChatAgent(server.base_url + "/chat/completions")
        assert agent.chat([Message("user", "x")]).text == "hi"
    assert server.paths == ["/v1/chat/completions"] and "model" not in server.requests[0]


@pytest.mark.parametrize(("status", "body", "message_re"), [
    (500, {"error": "boom"}, r"answered 500"),
    (200, "not json", r"expected \{\"choices\""),
    (200, {"choices": []}, r"expected \{\"choices\""),
    (200, message(None, [{"id": "x", "type": "function", "function": {"arguments": "{}"}}]), r"malformed tool call"),
    (200, message(None, [tool_call("x", "t", "{not json")]), r"arguments that are not JSON"),
    # a list of content parts is a reply (with files, docs/how-to/files.md); a list of anything else is not
    (200, {"choices": [{"message": {"content": ["parts"]}}]}, r"content\[0\] is str, expected a content part"),
])
def test_bad_answers_are_agent_errors(status: int, body: Any, message_re: str) -> None:
    with FakeOpenAI(lambda _: (status, body)) as server:
        agent = OpenAIChatAgent(server.base_url)
        with pytest.raises(AgentError, match=message_re):
            agent.chat([Message("user", "x")])


@pytest.mark.parametrize(("table", "message_re"), [
    ({"openai": "localhost:8000"}, r"openai must be the endpoint's URL"),
    ({"openai": "http://127.0.0.1:1/v1", "modle": "x"}, r"unknown key 'modle'"),
    ({"openai": "http://127.0.0.1:1/v1", "timeout": 0}, r"timeout must be a positive number"),
])
def test_bad_openai_agent_tables(table: dict[str, Any], message_re: str) -> None:
    with pytest.raises(UsageError, match=message_re):
        make_agent(table, {"agent_name": "remote"}, where="f.feature:2")
