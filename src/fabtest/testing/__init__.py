"""Test utilities for fabtest users and fabtest's own tests.

:class:`FakeLLM` is an in-process judge and simulated user scripted by kind of call (the user's
lines, a verdict per criterion, the next topic, ...), for testing your own features offline
without reading fabtest's prompts (also ``pytest --fabtest-fake-llm script.yaml``).
:class:`FakeGemini` is a scripted, local Gemini REST server (127.0.0.1) that the real
google-genai client and the Gemini CLI can talk to, so LLM-backed paths run without the
internet. See :mod:`fabtest.testing.fake_gemini` for the rules, faults and records it offers.
:class:`FakeRealtime` is a scripted, local OpenAI Realtime server (WebSocket, 127.0.0.1) for voice
agents over that protocol (:mod:`fabtest.testing.fake_realtime`).
"""

from fabtest.testing.fake_gemini import FakeGemini, FakeRequest, Fault, Reply, Rule
from fabtest.testing.fake_realtime import FakeRealtime, FunctionCall, RealtimeConnection, RealtimeReply
from fabtest.testing.scripted import FakeLLM, FakeLLMError, load_fake_llm

__all__ = ["FakeGemini", "FakeLLM", "FakeLLMError", "FakeRealtime", "FakeRequest", "Fault", "FunctionCall",
           "RealtimeConnection", "RealtimeReply", "Reply", "Rule", "load_fake_llm"]
