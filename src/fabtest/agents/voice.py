"""Voice agents: the user's turn goes in as :class:`fabtest.Audio`, the agent's reply comes back as audio.

The protocol, one call per user turn::

    class Receptionist:
        async def respond(self, audio: fabtest.Audio) -> AsyncIterator[fabtest.Audio]:
            ...                                   # audio: the whole user turn, 16-bit mono PCM
            yield fabtest.Audio(pcm, sample_rate=22050, text="Hello, how can I help?")

``respond`` may be

* an async generator of ``Audio`` chunks (a stream: the usual shape, and the one whose time to first
  audio means something);
* an ``async def`` returning one ``Audio`` or a list of them;
* a plain ``def`` returning one ``Audio`` or a list of them: it runs on a worker thread, so a
  blocking agent never holds up the other conversations.

The agent is configured as any Python agent (``agent = "module:attr"``: an object, a class, a factory);
an object with ``respond`` and no ``chat`` is a voice agent, and a plain function ``respond(audio)``
configured as the agent is used as one in voice scenarios. An agent with both ``chat`` and
``respond`` serves text and voice scenarios alike. ``around()``, ``metadata()`` and ``cancel()``
work as for chat agents, and ``respond`` may take ``on_tool_call`` (a keyword) to report tool calls.

How the engine calls it (:func:`call_voice_agent`): ``respond`` runs on the shared agent loop of
:mod:`fabtest.agents.aio`, so a client built in the factory or ``around()`` is usable there. The
clock starts when the user's audio has been handed over (the end of the user's speech): the first
chunk's arrival is the turn's ``time_to_first_audio_ms``. The whole reply is bounded by
``agent_timeout`` (the task is cancelled after it). A barge-in (``When the user interrupts after
1000 ms with "..."``) stops reading once that much of the agent's audio has been heard, keeps the
chunk cut at that point, and closes the generator (``aclose()``: the agent sees ``GeneratorExit`` at its
``yield`` and can stop talking). Each chunk must be a ``fabtest.Audio``: anything else fails the
scenario with the chunk's number and type.
"""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, cast, runtime_checkable

from fabtest.agents import aio
from fabtest.agents.boundary import AgentDataError, accepts_keyword, coerce_tool_call, guarded, guarded_async
from fabtest.conversation import AgentResponse, Audio, ToolCall
from fabtest.errors import AgentError, AgentTimeout, UsageError

__all__ = ["VoiceAgent", "VoiceReply", "call_voice_agent", "is_voice_agent", "voice_respond"]


@runtime_checkable
class VoiceAgent(Protocol):
    """What a voice scenario talks to: ``respond(audio)`` yields (or returns) the spoken reply."""

    def respond(self, audio: Audio) -> AsyncIterator[Audio]: ...


@dataclass
class VoiceReply:
    """What the user heard of one reply, and when."""

    #: the chunks heard, in order (the last one cut at a barge-in)
    chunks: list[Audio] = field(default_factory=list)
    #: from the end of the user's audio to the first chunk (None: the agent sent no audio)
    first_audio_ms: float | None = None
    #: the user cut the reply short (barge-in); the generator was closed
    interrupted: bool = False
    tool_calls: list[ToolCall] = field(default_factory=list)
    #: the whole call, first byte to the last chunk taken (or the interruption)
    elapsed_s: float = 0.0

    @property
    def text(self) -> str | None:
        """The agent's own words for what was heard, when its chunks carry them (else None)."""
        parts = [c.text for c in self.chunks if c.text]
        return " ".join(" ".join(parts).split()) if parts else None


def is_voice_agent(agent: Any) -> bool:
    """An agent that answers audio: it has ``respond``."""
    return callable(getattr(agent, "respond", None))


def voice_respond(agent: Any) -> Callable[..., Any]:
    """The callable a voice turn calls: the agent's ``respond``, or the plain function configured as
    the agent (wrapped as a chat callable by the registry); a text-only agent is a UsageError."""
    respond = getattr(agent, "respond", None)
    if callable(respond):
        return cast(Callable[..., Any], respond)
    func = getattr(agent, "func", None)  # a plain function configured as the agent (agents/python.py)
    if callable(func):
        return cast(Callable[..., Any], func)
    raise UsageError(f"the agent {type(agent).__name__} has no respond(audio) method, so it cannot take a voice "
                     "scenario: give it `async def respond(self, audio)` yielding fabtest.Audio (docs/how-to/voice.md)")


def call_voice_agent(agent: Any, audio: Audio, *, timeout: float,
                     interrupt_after_ms: float | None = None) -> VoiceReply:
    """One voice turn from the scenario's thread: ``respond(audio)`` on the agent loop, its chunks
    taken until the end (or the barge-in), bounded by ``timeout``. Raises AgentTimeout, AgentError
    (the agent raised) or AgentDataError (a chunk that is not ``fabtest.Audio``)."""
    respond = voice_respond(agent)
    reported: list[ToolCall] = []
    problems: list[AgentError] = []
    lock = threading.Lock()

    def on_tool_call(call: Any) -> None:
        with lock:
            try:
                reported.append(coerce_tool_call(call, where=f"on_tool_call(call #{len(reported) + 1})"))
            except AgentError as exc:
                problems.append(exc)

    kwargs = {"on_tool_call": on_tool_call} if accepts_keyword(respond, "on_tool_call") else {}
    try:
        reply = aio.run(_take(respond, audio, kwargs, interrupt_after_ms), timeout=timeout)
    except TimeoutError:  # the engine then asks the agent to cancel() (engine/turns.py cancel_agent)
        raise AgentTimeout(f"the voice agent did not finish its reply within {timeout:g}s (agent_timeout)") from None
    if problems:
        raise AgentDataError(f"the agent reported bad data: {problems[0]}")
    reply.tool_calls = reported
    return reply


async def _take(respond: Callable[..., Any], audio: Audio, kwargs: dict[str, Any],
                interrupt_after_ms: float | None) -> VoiceReply:
    """Call ``respond`` and read its reply on the agent loop, timing the first chunk."""
    reply = VoiceReply()
    started = time.perf_counter()
    if inspect.iscoroutinefunction(respond) or inspect.isasyncgenfunction(respond) or aio.is_async_callable(respond):
        value = guarded("the voice agent raised", respond, audio, **kwargs)
    else:  # a blocking respond: on a worker thread, so the loop (other conversations) keeps going
        import asyncio  # lazily: importing the plugin loads no asyncio (tests/plugin/test_lazy_imports.py)

        value = await asyncio.to_thread(lambda: guarded("the voice agent raised", respond, audio, **kwargs))
    if inspect.isawaitable(value):
        value = await guarded_async("the voice agent raised", value)
    if hasattr(value, "__aiter__"):
        stream = value.__aiter__()
        try:
            while True:
                chunk = await guarded_async("the voice agent raised", _next(stream))
                if chunk is _END:
                    break
                if _heard(reply, chunk, started, interrupt_after_ms):
                    break
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await guarded_async("the voice agent raised while closing its stream", aclose())
    else:
        for chunk in _chunks(value):
            if _heard(reply, chunk, started, interrupt_after_ms):
                break
    reply.elapsed_s = time.perf_counter() - started
    return reply


_END = object()


async def _next(stream: AsyncIterator[Any]) -> Any:
    """The stream's next chunk, or ``_END`` (StopAsyncIteration is the end, not the agent's failure)."""
    try:
        return await stream.__anext__()
    except StopAsyncIteration:
        return _END


def _chunks(value: Any) -> Iterable[Any]:
    """A sync or awaited reply: one ``Audio``, a list of them, or None (no audio)."""
    if value is None or isinstance(value, Audio):
        return () if value is None else (value,)
    if isinstance(value, list | tuple):
        return value
    if isinstance(value, str | AgentResponse):
        raise AgentDataError("the voice agent answered with text, not audio: respond(audio) must yield or return "
                             "fabtest.Audio (a text agent cannot take a voice scenario)")
    raise AgentDataError(f"the voice agent returned {type(value).__name__}; respond(audio) must yield or return "
                         "fabtest.Audio (16-bit mono PCM bytes and their sample rate)")


def _heard(reply: VoiceReply, chunk: Any, started: float, interrupt_after_ms: float | None) -> bool:
    """Add one chunk to what the user heard; True when the barge-in point is reached."""
    if not isinstance(chunk, Audio):
        raise AgentDataError(f"the voice agent sent {type(chunk).__name__} as audio chunk #{len(reply.chunks) + 1}; "
                             "each chunk must be fabtest.Audio (16-bit mono PCM bytes and their sample rate)")
    if reply.first_audio_ms is None and chunk.pcm:
        reply.first_audio_ms = (time.perf_counter() - started) * 1000
    if interrupt_after_ms is None:
        reply.chunks.append(chunk)
        return False
    heard = sum(c.duration_ms for c in reply.chunks)
    left = interrupt_after_ms - heard
    if chunk.duration_ms < left:
        reply.chunks.append(chunk)
        return False
    samples = int(chunk.sample_rate * left / 1000)
    reply.chunks.append(Audio(chunk.pcm[:samples * 2], chunk.sample_rate, chunk.text))
    reply.interrupted = True
    return True
