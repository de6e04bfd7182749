"""The Realtime agent as the engine calls a voice agent (agents/voice.call_voice_agent): on the shared agent
loop, its tool calls reported, a barge-in closing its stream."""

from __future__ import annotations

import math
import struct

from fabtest.agents import aio
from fabtest.agents.realtime import RealtimeAgent
from fabtest.agents.registry import make_agent
from fabtest.agents.voice import call_voice_agent, is_voice_agent
from fabtest.conversation import Audio
from fabtest.testing import FakeRealtime, FunctionCall, RealtimeReply


def tone(ms: int, rate: int) -> bytes:
    n = rate * ms // 1000
    return struct.pack(f"<{n}h", *(int(8000 * math.sin(2 * math.pi * 440 * i / rate)) for i in range(n)))


USER = Audio(tone(300, 16000), 16000)


def test_a_voice_turn_through_the_engine_hears_the_words_and_records_the_tool_call() -> None:
    reply = RealtimeReply(audio=tone(300, 24000), transcript="A table for two at seven.",
                          function_call=FunctionCall("book_table", {"people": 2, "time": "19:00"}))
    with FakeRealtime([reply]) as fake:
        agent = make_agent({"realtime": fake.url}, {}, where="test")
        assert is_voice_agent(agent) and isinstance(agent, RealtimeAgent)
        leave = aio.enter_async(agent.around())
        try:
            heard = call_voice_agent(agent, USER, timeout=10)
        finally:
            leave()
    assert heard.text == "A table for two at seven." and not heard.interrupted
    assert heard.first_audio_ms is not None and sum(c.duration_ms for c in heard.chunks) == 300
    assert [(c.name, c.arguments) for c in heard.tool_calls] == [("book_table", {"people": 2, "time": "19:00"})]
    assert fake.connections[0].closed  # around() closed the connection


def test_a_barge_in_through_the_engine_cancels_the_response_on_the_server() -> None:
    slow = RealtimeReply(audio=tone(1000, 24000), transcript="Let me tell you about every table we have", pace_s=0.03)
    with FakeRealtime([slow, RealtimeReply(audio=tone(100, 24000), transcript="Sure.")]) as fake:
        agent = RealtimeAgent(fake.url)
        leave = aio.enter_async(agent.around())
        try:
            cut = call_voice_agent(agent, USER, timeout=10, interrupt_after_ms=150)
            after = call_voice_agent(agent, USER, timeout=10)
        finally:
            leave()
    assert cut.interrupted and sum(c.duration_ms for c in cut.chunks) == 150
    truncate = fake.connections[0].of_type("conversation.item.truncate")
    # the engine cut the second 100 ms delta at 50 ms: the server hears of the audio handed out, 200 ms
    assert "response.cancel" in fake.connections[0].types and truncate[0]["audio_end_ms"] == 200
    assert after.text == "Sure."
