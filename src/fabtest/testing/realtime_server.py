"""The server side of :class:`~fabtest.testing.FakeRealtime`: what one client connection sees, and the scripted data.

A connection's session (``session.created``, the checks a server makes of ``session.update``, the
audio buffer and its commit, each response streamed as the protocol's events, ``response.cancel``
and ``conversation.item.truncate``), apart from the scripting and the thread of ``fake_realtime.py``,
as ``gemini_wire.py`` is to ``fake_gemini.py``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

from fabtest._internal.wav import resample
from fabtest.conversation import Audio

__all__ = ["MAX_PACE_S", "MIN_COMMIT_MS", "FunctionCall", "RealtimeConnection", "RealtimeReply", "Script", "Session"]

#: the longest pause between two chunks, so a script cannot hang a test run
MAX_PACE_S = 2.0
#: the least audio a commit takes (the server refuses a shorter buffer with this code)
MIN_COMMIT_MS = 100


@dataclass(frozen=True)
class FunctionCall:
    """A tool the scripted model calls; with ``output`` the server ran it, and says so in a
    ``function_call_output`` item before a second response that speaks."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    output: Any = None


@dataclass(frozen=True)
class RealtimeReply:
    """One scripted response: its audio (pcm16 bytes at 24 kHz, or a :class:`fabtest.Audio` at any rate,
    resampled), the model's words for it, a tool call, or a fault."""

    audio: bytes | Audio = b""
    transcript: str = ""
    function_call: FunctionCall | None = None
    #: answer with an ``error`` event of this message instead
    error: str | None = None
    #: close the connection (code 1011) instead of answering
    close: bool = False
    #: end the response with ``status = "failed"`` and this error message
    failed: str | None = None
    chunk_ms: int = 100
    #: seconds between two chunks (at most MAX_PACE_S), to leave a client time to interrupt
    pace_s: float = 0.0


@dataclass
class RealtimeConnection:
    """One client connection: its request path and headers (names lower-cased), and every event it sent."""

    path: str
    headers: dict[str, str]
    events: list[dict[str, Any]] = field(default_factory=list)
    #: the client closed the connection (or it was lost)
    closed: bool = False

    @property
    def types(self) -> list[str]:
        """The ``type`` of every event, in the order sent."""
        return [str(e.get("type")) for e in self.events]

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") == kind]

    @property
    def audio(self) -> bytes:
        """Every appended chunk of audio, decoded: what the server heard."""
        return b"".join(base64.b64decode(e.get("audio") or "") for e in self.of_type("input_audio_buffer.append"))


class Script(Protocol):
    """What a session asks of the fake: the protocol's spelling, the rates it takes, the next reply."""

    @property
    def api(self) -> str: ...

    @property
    def rates(self) -> tuple[int, ...]: ...

    def reply(self, audio: bytes) -> RealtimeReply: ...


class Session:
    """One connection's server side: the session, the audio buffer, the response being streamed."""

    def __init__(self, fake: Script, ws: Any, connection: RealtimeConnection) -> None:
        self.fake, self.ws, self.connection = fake, ws, connection
        self.ga = fake.api == "ga"
        self.session: dict[str, Any] = ({"id": f"sess_{uuid.uuid4().hex[:12]}", "object": "realtime.session",
                                         "type": "realtime", "model": "fake-realtime", "output_modalities": ["audio"],
                                         "audio": {"input": {"format": {"type": "audio/pcm", "rate": 24000}},
                                                   "output": {"format": {"type": "audio/pcm", "rate": 24000},
                                                              "voice": "alloy"}}}
                                        if self.ga else
                                        {"id": f"sess_{uuid.uuid4().hex[:12]}", "object": "realtime.session",
                                         "model": "fake-realtime", "modalities": ["audio", "text"], "voice": "alloy",
                                         "input_audio_format": "pcm16", "output_audio_format": "pcm16"})
        self.buffer = bytearray()
        self.committed = b""
        self.items: set[str] = set()
        self.streaming: asyncio.Task[None] | None = None
        self.call_id = ""

    async def send(self, kind: str, **fields: Any) -> None:
        await self.ws.send(json.dumps({"type": kind, "event_id": f"event_{uuid.uuid4().hex[:12]}", **fields}))

    async def error(self, message: str, *, code: str | None = None, about: Any = None,
                    kind: str = "invalid_request_error") -> None:
        await self.send("error", error={"type": kind, "code": code, "message": message, "event_id": about})

    async def run(self) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            await self.send("session.created", session=self.session)
            async for raw in self.ws:
                try:
                    event = json.loads(raw)
                except ValueError:
                    await self.error("The message is not JSON.", code="invalid_json")
                    continue
                self.connection.events.append(event)
                await self.handle(event)
        except ConnectionClosed:
            pass
        finally:
            self.connection.closed = True
            if self.streaming is not None:
                self.streaming.cancel()

    async def handle(self, event: dict[str, Any]) -> None:
        kind, about = event.get("type"), event.get("event_id")
        if kind == "session.update":
            await self.update(event.get("session") or {}, about)
        elif kind == "input_audio_buffer.append":
            try:
                self.buffer += base64.b64decode(str(event.get("audio") or ""), validate=True)
            except (binascii.Error, ValueError):
                await self.error("Invalid 'audio'. Expected base64-encoded audio bytes.", code="invalid_value",
                                 about=about)
        elif kind == "input_audio_buffer.commit":
            await self.commit(about)
        elif kind == "response.create":
            if self.streaming is not None and not self.streaming.done():
                await self.error("Conversation already has an active response", code="conversation_already_has_"
                                 "active_response", about=about)
                return
            self.streaming = asyncio.create_task(self.respond(self.committed))
        elif kind == "response.cancel":
            if self.streaming is None or self.streaming.done():
                await self.error("Cancellation failed: no active response found", code="response_cancel_not_active",
                                 about=about)
                return
            self.streaming.cancel()
        elif kind == "conversation.item.truncate":
            if event.get("item_id") not in self.items:
                await self.error(f"Item {event.get('item_id')!r} not found", code="item_not_found", about=about)
                return
            await self.send("conversation.item.truncated", item_id=event["item_id"],
                            content_index=event.get("content_index", 0), audio_end_ms=event.get("audio_end_ms"))
        else:
            await self.error(f"Invalid value: {kind!r}. Supported values are the client events.",
                             code="invalid_value", about=about)

    async def update(self, session: dict[str, Any], about: Any) -> None:
        if self.ga and session.get("type") != "realtime":
            await self.error("Missing required parameter: 'session.type'.", code="missing_required_parameter",
                             about=about)
            return
        if not self.ga and "type" in session:
            await self.error("Unknown parameter: 'session.type'.", code="unknown_parameter", about=about)
            return
        for side in ("input", "output"):
            fmt = (session.get("audio", {}).get(side, {}).get("format") if self.ga
                   else {"type": session.get(f"{side}_audio_format", "pcm16"), "rate": 24000})
            if fmt and (fmt.get("type") not in ("audio/pcm", "pcm16") or fmt.get("rate", 24000) not in self.fake.rates):
                await self.error(f"Invalid value for the {side} audio format: {fmt}. Supported: pcm16 at "
                                 f"{', '.join(map(str, self.fake.rates))} Hz.", code="invalid_value", about=about)
                return
        self.session.update(session)
        await self.send("session.updated", session=self.session)

    async def commit(self, about: Any) -> None:
        ms = len(self.buffer) / 2 / 24000 * 1000
        if ms < MIN_COMMIT_MS:
            await self.error(f"Error committing input audio buffer: buffer too small. Expected at least "
                             f"{MIN_COMMIT_MS}ms of audio, but buffer only has {ms:.2f}ms of audio.",
                             code="input_audio_buffer_commit_empty", about=about)
            return
        self.committed, self.buffer = bytes(self.buffer), bytearray()
        item = {"id": f"item_{uuid.uuid4().hex[:12]}", "type": "message", "role": "user",
                "content": [{"type": "input_audio"}]}
        await self.send("input_audio_buffer.committed", item_id=item["id"], previous_item_id=None)
        await self.send("conversation.item.added" if self.ga else "conversation.item.created", item=item)

    async def respond(self, heard: bytes) -> None:
        # a model function (speech recognition, text to speech) is CPU work: off the server's loop, so
        # other connections' events keep flowing
        try:
            reply = await asyncio.to_thread(self.fake.reply, heard)
        except asyncio.CancelledError:  # cancelled while the model thought: the response ends, empty
            await self.send("response.done", response={"id": f"resp_{uuid.uuid4().hex[:12]}", "status": "cancelled",
                                                       "output": []})
            return
        if reply.error is not None:
            await self.error(reply.error, code="server_error", kind="server_error")
            return
        if reply.close:
            await self.ws.close(1011, "fake server closing")
            return
        call = reply.function_call
        if call is not None and call.output is not None:
            if await self.response(reply, call=call, speak=False) == "cancelled":
                return
            await self.send("conversation.item.added" if self.ga else "conversation.item.created",
                            item={"id": f"item_{uuid.uuid4().hex[:12]}", "type": "function_call_output",
                                  "call_id": self.call_id, "output": json.dumps(call.output)})
            await self.response(reply, call=None, speak=True)
        else:
            await self.response(reply, call=call, speak=True)

    async def response(self, reply: RealtimeReply, *, call: FunctionCall | None, speak: bool) -> str:
        """One response: an optional function call item, then the audio message item."""
        rid = f"resp_{uuid.uuid4().hex[:12]}"
        output: list[dict[str, Any]] = []
        await self.send("response.created", response={"id": rid, "status": "in_progress", "output": []})
        status = "completed"
        try:
            if call is not None:
                output.append(await self.function_call(rid, call))
            if speak:
                output.append(await self.speak(rid, reply, len(output)))
        except asyncio.CancelledError:
            status = "cancelled"
        if reply.failed is not None and status == "completed":
            status = "failed"
        done: dict[str, Any] = {"id": rid, "status": status, "output": output, "usage": _usage(self.committed, reply)}
        if status == "failed":
            done["status_details"] = {"type": "failed", "error": {"type": "server_error", "message": reply.failed}}
        await self.send("response.done", response=done)
        return status

    async def function_call(self, rid: str, call: FunctionCall) -> dict[str, Any]:
        self.call_id = f"call_{uuid.uuid4().hex[:12]}"
        arguments = json.dumps(call.arguments)
        item = {"id": f"item_{uuid.uuid4().hex[:12]}", "type": "function_call", "status": "in_progress",
                "call_id": self.call_id, "name": call.name, "arguments": ""}
        await self.send("response.output_item.added", response_id=rid, output_index=0, item=item)
        await self.send("response.function_call_arguments.done", response_id=rid, item_id=item["id"],
                        output_index=0, call_id=self.call_id, name=call.name, arguments=arguments)
        done = {**item, "status": "completed", "arguments": arguments}
        await self.send("response.output_item.done", response_id=rid, output_index=0, item=done)
        return done

    async def speak(self, rid: str, reply: RealtimeReply, index: int) -> dict[str, Any]:
        item_id = f"item_{uuid.uuid4().hex[:12]}"
        self.items.add(item_id)
        item = {"id": item_id, "type": "message", "role": "assistant", "status": "in_progress", "content": []}
        await self.send("response.output_item.added", response_id=rid, output_index=index, item=item)
        step = max(2, 24000 * 2 * reply.chunk_ms // 1000)
        pcm = resample(reply.audio, 24000).pcm if isinstance(reply.audio, Audio) else reply.audio
        chunks = [pcm[i:i + step] for i in range(0, len(pcm), step)] or [b""]
        words = reply.transcript.split(" ") if reply.transcript else []
        per = -(-len(words) // len(chunks)) if words else 0
        audio_delta = "response.output_audio.delta" if self.ga else "response.audio.delta"
        text_delta = "response.output_audio_transcript.delta" if self.ga else "response.audio_transcript.delta"
        where = {"response_id": rid, "item_id": item_id, "output_index": index, "content_index": 0}
        for n, chunk in enumerate(chunks):
            if n and reply.pace_s:
                await asyncio.sleep(min(reply.pace_s, MAX_PACE_S))
            said = words[n * per:(n + 1) * per]
            if said:
                await self.send(text_delta, **where, delta=" ".join(said) + (" " if (n + 1) * per < len(words) else ""))
            if chunk:
                await self.send(audio_delta, **where, delta=base64.b64encode(chunk).decode("ascii"))
        await self.send(text_delta.replace(".delta", ".done"), **where, transcript=reply.transcript)
        await self.send(audio_delta.replace(".delta", ".done"), **where)
        done = {**item, "status": "completed", "content": [{"type": "output_audio" if self.ga else "audio",
                                                              "transcript": reply.transcript}]}
        await self.send("response.output_item.done", response_id=rid, output_index=index, item=done)
        return done


def _usage(heard: bytes, reply: RealtimeReply) -> dict[str, int]:
    """Tokens as a server counts them, roughly: a token per 1/30 s of audio heard, one per word said."""
    heard_tokens, said = len(heard) // 1600, len(reply.transcript.split())
    return {"total_tokens": heard_tokens + said, "input_tokens": heard_tokens, "output_tokens": said}
