"""The Realtime voice agent against fabtest.testing.FakeRealtime: what it sends, what it yields, how it fails."""

from __future__ import annotations

import asyncio
import math
import socket
import struct
from collections.abc import Callable
from typing import Any

import pytest

from fabtest._internal import redaction
from fabtest._internal.wav import resample
from fabtest.agents import realtime_wire as wire
from fabtest.agents.realtime import RealtimeAgent
from fabtest.agents.registry import make_agent
from fabtest.conversation import Audio, ToolCall
from fabtest.engine import preflight
from fabtest.errors import AgentError, UsageError
from fabtest.testing import FakeRealtime, FunctionCall, RealtimeReply


def tone(ms: int, rate: int, hz: float = 440.0) -> bytes:
    n = rate * ms // 1000
    return struct.pack(f"<{n}h", *(int(8000 * math.sin(2 * math.pi * hz * i / rate)) for i in range(n)))


USER = Audio(tone(400, 16000), 16000)


def turns(agent: RealtimeAgent, *audios: Audio, on_tool_call: Callable[[ToolCall], None] | None = None
          ) -> list[list[Audio]]:
    """Every turn's chunks, one connection (entered and left like a scenario's around())."""
    async def run() -> list[list[Audio]]:
        async with agent.around():
            return [[chunk async for chunk in agent.respond(a, on_tool_call)] for a in audios]
    return asyncio.run(run())


def failure(agent: RealtimeAgent, audio: Audio = USER) -> str:
    with pytest.raises(AgentError) as info:
        turns(agent, audio)
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    return message


@pytest.fixture
def fake() -> Any:
    with FakeRealtime([RealtimeReply(audio=tone(300, 24000), transcript="Your table is booked for two.")]) as server:
        yield server


def test_a_turn_sends_the_session_settings_then_the_audio_committed_then_a_response_request(fake: FakeRealtime) -> None:
    agent = RealtimeAgent(fake.url, model="gpt-realtime", voice="marin", instructions="You book tables.",
                          headers={"Authorization": "Bearer k-123456"})
    turns(agent, USER, USER)
    (connection,) = fake.connections  # one connection for the scenario, however many turns
    per_turn = ["input_audio_buffer.append", "input_audio_buffer.commit", "response.create"]
    assert connection.types == ["session.update", *per_turn, *per_turn]
    session = connection.events[0]["session"]
    assert session["type"] == "realtime" and session["instructions"] == "You book tables."
    assert session["audio"]["input"] == {"format": {"type": "audio/pcm", "rate": 24000}, "turn_detection": None}
    assert session["audio"]["output"] == {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "marin"}
    assert connection.path == "/v1/realtime?model=gpt-realtime"
    assert connection.headers["authorization"] == "Bearer k-123456"
    assert agent.metadata()["api"] == "ga" and "k-123456" not in repr(agent.metadata())


def test_a_beta_server_gets_the_flat_settings_and_its_audio_event_names_are_read() -> None:
    with FakeRealtime([RealtimeReply(audio=tone(200, 24000), transcript="Hi.")], api="beta") as fake:
        agent = RealtimeAgent(fake.url, voice="alloy")
        (chunks,) = turns(agent, USER)
    session = fake.connections[0].events[0]["session"]
    assert session == {"modalities": ["audio", "text"], "input_audio_format": "pcm16", "output_audio_format": "pcm16",
                       "turn_detection": None, "voice": "alloy"}
    assert b"".join(c.pcm for c in chunks) == tone(200, 24000) and agent.metadata()["api"] == "beta"


def test_the_users_audio_reaches_the_server_at_24_khz_and_the_reply_comes_back_whole(fake: FakeRealtime) -> None:
    (chunks,) = turns(RealtimeAgent(fake.url), USER)
    heard = fake.connections[0].audio
    assert heard == resample(USER, 24000).pcm and len(heard) == len(USER.pcm) * 3 // 2
    assert all(c.sample_rate == 24000 for c in chunks) and len(chunks) == 3  # 100 ms deltas
    assert b"".join(c.pcm for c in chunks) == tone(300, 24000)


def test_the_models_transcript_rides_on_the_chunks_it_came_with(fake: FakeRealtime) -> None:
    (chunks,) = turns(RealtimeAgent(fake.url), USER)
    assert [c.text for c in chunks] == ["Your table ", "is booked ", "for two."]


def test_words_without_audio_come_in_an_empty_chunk() -> None:
    with FakeRealtime([RealtimeReply(transcript="Only words.")]) as fake:
        (chunks,) = turns(RealtimeAgent(fake.url), USER)
    assert [(c.pcm, c.text) for c in chunks] == [(b"", "Only words.")]


def test_function_calls_are_the_turns_tool_calls_with_the_output_a_server_reports() -> None:
    replies = [RealtimeReply(audio=tone(100, 24000), transcript="Checking.",
                             function_call=FunctionCall("check_availability", {"people": 2})),
               RealtimeReply(audio=tone(100, 24000), transcript="Booked.",
                             function_call=FunctionCall("book_table", {"time": "19:00"}, output={"confirmed": True}))]
    seen: list[ToolCall] = []
    with FakeRealtime(replies) as fake:
        agent = RealtimeAgent(fake.url)
        first, second = turns(agent, USER, USER, on_tool_call=seen.append)
    assert [(c.name, c.arguments, c.result) for c in seen] == [
        ("check_availability", {"people": 2}, None), ("book_table", {"time": "19:00"}, {"confirmed": True})]
    assert [c.name for c in agent.tool_calls] == ["book_table"]  # the latest turn's
    # the server ran book_table and answered in a second response: the turn waited for its words
    assert "".join(c.text or "" for c in second) == "Booked."


def test_closing_the_stream_early_cancels_the_response_and_truncates_at_what_was_heard() -> None:
    slow = RealtimeReply(audio=tone(1000, 24000), transcript="a long answer " * 5, pace_s=0.05)
    with FakeRealtime([slow, RealtimeReply(audio=tone(100, 24000), transcript="Yes?")]) as fake:
        agent = RealtimeAgent(fake.url)

        async def scenario() -> list[Audio]:
            async with agent.around():
                stream = agent.respond(USER)
                heard = [await anext(stream), await anext(stream)]
                await stream.aclose()  # the user talks over the agent
                return heard + [c async for c in agent.respond(USER)]
        chunks = asyncio.run(scenario())
    connection = fake.connections[0]
    assert connection.types[4:6] == ["response.cancel", "conversation.item.truncate"]
    truncate = connection.of_type("conversation.item.truncate")[0]
    assert truncate["audio_end_ms"] == 200 and truncate["content_index"] == 0
    assert truncate["item_id"].startswith("item_")
    assert chunks[-1].text == "Yes?"  # the next turn reads past the cancelled response's end


def test_a_cancel_that_comes_too_late_is_not_an_error() -> None:
    with FakeRealtime([RealtimeReply(audio=tone(200, 24000)), RealtimeReply(audio=tone(100, 24000), transcript="Ok.")]
                      ) as fake:
        agent = RealtimeAgent(fake.url)

        async def scenario() -> list[Audio]:
            async with agent.around():
                stream = agent.respond(USER)
                await anext(stream), await anext(stream)  # all the audio, not yet response.done
                await asyncio.sleep(0.05)  # the server finishes the response meanwhile
                await stream.aclose()
                return [c async for c in agent.respond(USER)]
        chunks = asyncio.run(scenario())
    assert "response.cancel" in fake.connections[0].types and chunks[-1].text == "Ok."


def test_a_tool_call_the_server_leaves_to_the_client_is_named_when_nothing_follows() -> None:
    with FakeRealtime([RealtimeReply(function_call=FunctionCall("lookup", {"q": "x"}))]) as fake:
        with pytest.raises(AgentError, match=r"no event from the server within 0.3s \(waiting for the server's "
                           r"response after its call to lookup: fabtest records tool calls and does not run them\)"):
            turns(RealtimeAgent(fake.url, timeout=0.3), USER)


def test_an_error_event_fails_the_turn_with_the_servers_words() -> None:
    with FakeRealtime([RealtimeReply(error="The model is overloaded, try again later")]) as fake:
        message = failure(RealtimeAgent(fake.url))
    assert message == (f"Realtime agent at {fake.url}: the server sent an error: The model is overloaded, "
                       "try again later (server_error)")


def test_a_server_that_closes_the_connection_is_named() -> None:
    with FakeRealtime([RealtimeReply(close=True)]) as fake:
        message = failure(RealtimeAgent(fake.url))
    assert "the server closed the connection (1011 fake server closing) while fabtest waited for the response" \
        in message


def test_an_unreachable_server_is_one_line() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    message = failure(RealtimeAgent(f"ws://127.0.0.1:{port}/v1/realtime", timeout=5))
    assert message.startswith(f"Realtime agent at ws://127.0.0.1:{port}/v1/realtime: cannot connect:")


def test_a_refused_key_is_the_http_status() -> None:
    with FakeRealtime(api_key="sk-right-key") as fake:
        message = failure(RealtimeAgent(fake.url, headers={"Authorization": "Bearer sk-wrong-key"}))
        assert message == f"Realtime agent at {fake.url}: the server refused the connection: HTTP 401 Unauthorized"
        turns(RealtimeAgent(fake.url, headers={"Authorization": "Bearer sk-right-key"}), USER)


def test_a_failed_response_is_named() -> None:
    with FakeRealtime([RealtimeReply(failed="Audio could not be generated")]) as fake:
        message = failure(RealtimeAgent(fake.url))
    assert message.endswith(": the response failed: Audio could not be generated (server_error)")


@pytest.mark.parametrize(("session", "problem"), [
    ({"output_audio_format": "g711_ulaw"}, "the server answers in 'g711_ulaw', fabtest reads pcm16"),
    ({"audio": {"output": {"format": {"type": "audio/pcmu"}}}}, "the server answers in 'audio/pcmu'"),
    ({"audio": {"output": {"format": {"type": "audio/pcm", "rate": 16000}}}}, "the server answers at 16000 Hz"),
    ({"audio": {"output": {"format": {"type": "audio/pcm", "rate": 24000}}}}, None),
])
def test_an_output_format_fabtest_cannot_read_is_named(session: dict[str, Any], problem: str | None) -> None:
    found = wire.output_format_problem(session, 24000)
    assert found == problem if problem is None else (found or "").startswith(problem)


def test_a_format_the_server_refuses_is_named() -> None:
    with FakeRealtime(rates=(24000,)) as fake:
        message = failure(RealtimeAgent(fake.url, sample_rate=16000))
    assert "the server refused the session settings: Invalid value for the input audio format" in message
    assert "Supported: pcm16 at 24000 Hz. (invalid_value)" in message


def test_too_little_audio_is_the_servers_refusal_not_a_hang(fake: FakeRealtime) -> None:
    message = failure(RealtimeAgent(fake.url), Audio(tone(20, 16000), 16000))
    assert "buffer too small" in message and "(input_audio_buffer_commit_empty)" in message


def test_the_agent_table_builds_it_and_keeps_the_key_a_secret(fake: FakeRealtime, monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    monkeypatch.setenv("RT_TEST_KEY", "sk-realtime-secret-42")
    table = {"realtime": fake.url, "model": "gpt-realtime", "voice": "marin",
             "headers": {"Authorization": "Bearer ${RT_TEST_KEY}"}}
    try:
        agent = make_agent(table, {"agent_name": "phone"}, where="pyproject.toml")
        assert isinstance(agent, RealtimeAgent)
        turns(agent, USER)
        assert fake.connections[0].headers["authorization"] == "Bearer sk-realtime-secret-42"
        assert "sk-realtime-secret-42" not in repr(agent.metadata())
        assert redaction.redact("Bearer sk-realtime-secret-42") == "Bearer ***"
    finally:
        redaction.clear()


@pytest.mark.parametrize(("table", "expected"), [
    ({"realtime": "http://x"}, "realtime must be the WebSocket URL"),
    ({"realtime": "ws://x", "vioce": "a"}, "unknown key 'vioce' for a Realtime agent"),
    ({"realtime": "ws://x", "sample_rate": "24k"}, "sample_rate must be a whole number of Hz"),
    ({"realtime": "ws://x", "api": "v2"}, "api must be \"auto\", \"ga\" or \"beta\""),
])
def test_a_bad_agent_table_is_one_line_naming_the_key(table: dict[str, Any], expected: str) -> None:
    with pytest.raises(UsageError, match=expected) as info:
        make_agent(table, {"agent_name": "phone"}, where="pyproject.toml")
    assert str(info.value).startswith("pyproject.toml: [tool.fabtest.agents.phone]: ")


def test_the_pre_flight_checks_the_table_then_that_the_host_listens(fake: FakeRealtime) -> None:
    where = "[tool.fabtest.agents] phone"
    assert preflight.config_problem(where, {"realtime": "ws://x", "vioce": "a"}) == (
        f"{where}: unknown key 'vioce' for a Realtime agent (allowed: api, headers, instructions, model, realtime, "
        "sample_rate, timeout, tools, voice)")
    assert preflight.config_problem(where, {"realtime": fake.url}) is None
    assert preflight.reachability_problem(where, {"realtime": fake.url}) is None
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert preflight.reachability_problem(where, {"realtime": f"ws://127.0.0.1:{port}/v1/realtime?k=x"}) == (
        f"{where}: the Realtime agent at ws://127.0.0.1:{port} does not accept connections (Connection refused); "
        "is the server running?")


def test_a_forced_spelling_the_server_does_not_speak_is_its_refusal(fake: FakeRealtime) -> None:
    message = failure(RealtimeAgent(fake.url, api="beta"))
    assert message.endswith("the server refused the session settings: Missing required parameter: 'session.type'. "
                            "(missing_required_parameter)")
