"""A voice agent behind the OpenAI Realtime event protocol over WebSocket: ``realtime = "wss://..."``.

The Realtime protocol is the shape most voice stacks can expose (OpenAI's own models, and servers
that put a pipeline of their own behind the same events), so one adapter reaches them all. fabtest
is the client, and decides when the user's turn ends: the session has no server turn detection;
each turn appends the user's audio (pcm16 resampled to the server's rate, 24 kHz by default),
commits it and asks for a response, then yields the server's audio deltas as :class:`fabtest.Audio`
chunks, each carrying the model's transcript that arrived with it (``Audio.text``). Function calls
(items of type ``function_call``, with the outputs a server that runs its own tools reports) are
the turn's tool calls (:attr:`RealtimeAgent.tool_calls`, and ``on_tool_call``). A response that only
calls tools is followed by the server's next response, as a server that runs its tools sends it.

One connection per scenario, opened on the first turn and closed when the scenario ends
(``around()``). When the caller stops reading a turn early (the user interrupts: the generator is
closed), the adapter sends ``response.cancel`` and ``conversation.item.truncate`` at the audio
handed out so far, so the server's context holds only what the user heard. Every failure (no
connection, a closed socket, an ``error`` event, a format the server refuses) is an
:class:`~fabtest.errors.AgentError` of one line naming the server's words; event names of the beta
and GA protocols are both read (:mod:`fabtest.agents.realtime_wire`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlencode, urlsplit

from fabtest._internal.extras import require_extra
from fabtest._internal.wav import resample
from fabtest.agents import realtime_wire as wire
from fabtest.agents.base import declared_tools
from fabtest.conversation import Audio, TokenUsage, ToolCall
from fabtest.errors import AgentError, AgentTimeout, UsageError

__all__ = ["RealtimeAgent", "build_realtime_agent"]

_KEYS = {"realtime", "model", "headers", "voice", "instructions", "timeout", "sample_rate", "api", "tools"}
#: the user's audio goes out in appends of half a second (32 kB of base64 at 24 kHz): far below any
#: server's frame limit, few enough events that a turn costs no time
_APPEND_BYTES = 24000


def build_realtime_agent(table: Mapping[str, Any], context: Mapping[str, Any], *, where: str) -> RealtimeAgent:
    """The registry's entry point: check the table's keys and values, one-line errors naming them."""
    name = context.get("agent_name")
    where = f"{where}: [tool.fabtest.agents.{name}]" if name else where
    require_extra("realtime", where=where)
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise UsageError(f"{where}: unknown key {unknown[0]!r} for a Realtime agent "
                         f"(allowed: {', '.join(sorted(_KEYS))})")
    url = table["realtime"]
    if not isinstance(url, str) or not url.startswith(("ws://", "wss://")):
        raise UsageError(f"{where}: realtime must be the WebSocket URL, like \"wss://api.openai.com/v1/realtime\", "
                         f"got {url!r}")
    for key in ("model", "voice", "instructions"):
        if not isinstance(table.get(key, ""), str):
            raise UsageError(f"{where}: {key} must be a string, got {table[key]!r}")
    if not isinstance(table.get("headers", {}), Mapping):
        raise UsageError(f"{where}: headers must be a table, like {{ Authorization = \"Bearer ${{OPENAI_API_KEY}}\" }}")
    timeout = table.get("timeout", 30)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise UsageError(f"{where}: timeout must be a positive number of seconds, got {timeout!r}")
    rate = table.get("sample_rate", 24000)
    if isinstance(rate, bool) or not isinstance(rate, int) or rate <= 0:
        raise UsageError(f"{where}: sample_rate must be a whole number of Hz, like 24000, got {rate!r}")
    api = table.get("api", "auto")
    if api not in ("auto", "ga", "beta"):
        raise UsageError(f"{where}: api must be \"auto\", \"ga\" or \"beta\", got {api!r}")
    return RealtimeAgent(url, model=table.get("model", ""), headers=table.get("headers"), voice=table.get("voice", ""),
                         instructions=table.get("instructions", ""), timeout=float(timeout), sample_rate=rate,
                         api=api, tools=declared_tools(table.get("tools"), where=where))


class RealtimeAgent:
    """One Realtime session per scenario; ``respond`` is one turn (see the module docstring)."""

    def __init__(self, url: str, *, model: str = "", headers: Mapping[str, str] | None = None, voice: str = "",
                 instructions: str = "", timeout: float = 30.0, sample_rate: int = 24000, api: str = "auto",
                 tools: Sequence[str] | None = None) -> None:
        if model and "model=" not in (urlsplit(url).query or ""):
            url = f"{url}{'&' if urlsplit(url).query else '?'}{urlencode({'model': model})}"
        self.url, self.model, self.voice, self.instructions = url, model, voice, instructions
        self.timeout, self.sample_rate, self.api = timeout, sample_rate, api
        self.tools = list(tools) if tools is not None else None
        #: the tool calls of the latest turn
        self.tool_calls: list[ToolCall] = []
        self._headers = dict(headers or {})  # never in metadata: they hold the key
        self._ws: Any = None
        self._session_id: str | None = None
        self._open_response = False  # a response.create whose response.done has not arrived
        self._ignored: set[str] = set()  # our cancel / truncate events, whose errors mean "too late"
        self._usage = TokenUsage()
        self._where = f"Realtime agent at {url}"

    def metadata(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"adapter": "realtime", "url": self.url, "model": self.model, "voice": self.voice,
                                "api": self.api, "sample_rate": self.sample_rate, "usage": self._usage.to_dict()}
        if self._session_id:
            meta["session_id"] = self._session_id
        if self.tools is not None:
            meta["tools"] = list(self.tools)
        return meta

    @contextlib.asynccontextmanager
    async def around(self) -> AsyncIterator[None]:
        """The scenario: whatever happens in it, the connection is closed afterwards."""
        try:
            yield
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ws.close(), self.timeout)

    async def respond(self, audio: Audio, on_tool_call: Callable[[ToolCall], None] | None = None
                      ) -> AsyncIterator[Audio]:
        """One turn: send ``audio``, yield the reply's chunks until the server's ``response.done``."""
        await self._connect()
        await self._finish_cancelled()
        self.tool_calls = []
        # CPU work: off the agent loop that every conversation in flight shares (none with
        # [tool.fabtest.speech] sample_rate = 24000, which speaks at the server's rate already)
        pcm = audio.pcm if audio.sample_rate == self.sample_rate else \
            (await asyncio.to_thread(resample, audio, self.sample_rate)).pcm
        for start in range(0, len(pcm), _APPEND_BYTES):
            await self._send({"type": "input_audio_buffer.append",
                              "audio": base64.b64encode(pcm[start:start + _APPEND_BYTES]).decode("ascii")})
        await self._send({"type": "input_audio_buffer.commit"})
        await self._send({"type": "response.create"})
        self._open_response = True
        calls, words = wire.TurnCalls(), list[str]()
        heard: dict[str, float] = {}  # audio item id -> ms handed to the caller
        waiting = "the response"
        try:
            while True:
                event = await self._receive(waiting)
                kind = event.get("type")
                if kind in wire.AUDIO_DELTAS:
                    chunk = self._decode(event.get("delta"))
                    text, words = "".join(words) or None, []
                    item = str(event.get("item_id") or "")
                    heard[item] = heard.get(item, 0.0) + len(chunk) / 2 / self.sample_rate * 1000
                    yield Audio(chunk, self.sample_rate, text)
                elif kind in wire.TEXT_DELTAS:
                    words.append(str(event.get("delta") or ""))
                elif kind in wire.ITEM_EVENTS:
                    calls.item(event.get("item"))
                elif kind == "response.function_call_arguments.done":
                    calls.arguments_done(event)
                elif kind == "response.done":
                    self._open_response = False
                    if self._response_done(event.get("response"), calls, heard):
                        break
                    waiting = (f"the server's response after its call to {', '.join(calls.unanswered()) or 'a tool'}: "
                               "fabtest records tool calls and does not run them")
            if words:  # words after the last audio chunk
                yield Audio(b"", self.sample_rate, "".join(words))
        except GeneratorExit:  # the caller stopped listening: the user interrupted
            await self._interrupt(heard)
            raise
        finally:  # an interrupted turn's calls happened too
            self.tool_calls = calls.tool_calls()
            report = on_tool_call or (lambda call: None)
            for call in self.tool_calls:
                report(call)

    def _response_done(self, response: Any, calls: wire.TurnCalls, heard: Mapping[str, float]) -> bool:
        """Account a ``response.done``; True when the turn is over, False when the server's next response
        (after the tools it runs) is still to come."""
        response = response if isinstance(response, Mapping) else {}
        self._count_usage(response.get("usage"))
        for item in response.get("output") or ():
            calls.item(item)
        status = response.get("status")
        if status == "failed":
            details = response.get("status_details") or {}
            raise AgentError(f"{self._where}: the response failed: {wire.error_line(details)}")
        if heard or not calls.calls or status == "cancelled":
            return True
        self._open_response = True  # a server that runs its tools answers again
        return False

    async def _interrupt(self, heard: Mapping[str, float]) -> None:
        """Cancel the response and cut the reply at what was handed out: ``audio_end_ms`` of the last item."""
        if self._ws is None:
            return
        with contextlib.suppress(AgentError):
            if self._open_response:
                await self._send({"type": "response.cancel"}, ignore_errors=True)
            item, ms = list(heard.items())[-1] if heard else ("", 0.0)
            if item:
                await self._send({"type": "conversation.item.truncate", "item_id": item, "content_index": 0,
                                  "audio_end_ms": int(ms)}, ignore_errors=True)

    async def _finish_cancelled(self) -> None:
        """Before a turn: read the rest of an interrupted response (its ``response.done``), dropped."""
        while self._open_response:
            event = await self._receive("the interrupted response to end")
            if event.get("type") == "response.done":
                self._open_response = False

    async def _connect(self) -> None:
        if self._ws is not None:
            return
        from websockets.asyncio.client import connect
        from websockets.exceptions import InvalidStatus, WebSocketException

        try:
            self._ws = await connect(self.url, additional_headers=self._headers, open_timeout=self.timeout,
                                     max_size=2 ** 24)
        except InvalidStatus as exc:
            raise AgentError(f"{self._where}: the server refused the connection: HTTP "
                             f"{exc.response.status_code} {exc.response.reason_phrase}".rstrip()) from None
        except (OSError, TimeoutError, WebSocketException) as exc:
            raise AgentError(f"{self._where}: cannot connect: {exc or type(exc).__name__}") from None
        self._open_response = False  # a new session: nothing of an old one is still to come
        created = await self._receive("session.created")
        if created.get("type") != "session.created":
            raise AgentError(f"{self._where}: expected session.created first, got {created.get('type')!r}")
        session = created.get("session")
        self._session_id = str(session.get("id")) if isinstance(session, Mapping) and session.get("id") else None
        api: wire.Api = wire.detect_api(session) if self.api == "auto" else "beta" if self.api == "beta" else "ga"
        self.api = api
        await self._send(wire.session_update(api, instructions=self.instructions, voice=self.voice,
                                             sample_rate=self.sample_rate))
        while True:
            event = await self._receive("session.updated", refused=True)
            if event.get("type") == "session.updated":
                problem = wire.output_format_problem(event.get("session"), self.sample_rate)
                if problem:
                    raise AgentError(f"{self._where}: {problem}")
                return

    async def _send(self, event: dict[str, Any], *, ignore_errors: bool = False) -> str:
        """Send one client event with an id of our own (an ``error`` names the event it is about)."""
        from websockets.exceptions import ConnectionClosed

        event_id = f"fabtest_{uuid.uuid4().hex[:16]}"
        if ignore_errors:
            self._ignored.add(event_id)
        try:
            await self._ws.send(json.dumps({"event_id": event_id, **event}))
        except ConnectionClosed as exc:
            self._ws = None
            raise AgentError(f"{self._where}: {_closed(exc)} while fabtest sent {event['type']}") from None
        return event_id

    async def _receive(self, waiting_for: str, *, refused: bool = False) -> dict[str, Any]:
        """The next server event; an ``error`` event raises (but one about a cancel that came too late)."""
        from websockets.exceptions import ConnectionClosed

        while True:
            try:
                raw = await asyncio.wait_for(self._ws.recv(), self.timeout)
            except TimeoutError:
                raise AgentTimeout(f"{self._where}: no event from the server within {self.timeout:g}s "
                                   f"(waiting for {waiting_for})") from None
            except ConnectionClosed as exc:
                self._ws = None
                raise AgentError(f"{self._where}: {_closed(exc)} while fabtest waited for {waiting_for}") from None
            try:
                event = json.loads(raw)
            except ValueError:
                raise AgentError(f"{self._where}: the server sent a message that is not JSON: {str(raw)[:80]!r}") \
                    from None
            if not isinstance(event, dict):
                raise AgentError(f"{self._where}: the server sent {type(event).__name__}, expected an event object")
            if event.get("type") != "error":
                return event
            about = (event.get("error") or {}).get("event_id") if isinstance(event.get("error"), Mapping) else None
            if about in self._ignored:
                continue
            what = "refused the session settings" if refused else "sent an error"
            raise AgentError(f"{self._where}: the server {what}: {wire.error_line(event)}")

    def _decode(self, delta: Any) -> bytes:
        try:
            chunk = base64.b64decode(str(delta or ""), validate=True)
        except ValueError:
            raise AgentError(f"{self._where}: an audio delta is not base64 pcm16") from None
        if len(chunk) % 2:
            raise AgentError(f"{self._where}: an audio delta has an odd number of bytes ({len(chunk)}): "
                             "not 16-bit pcm16 samples")
        return chunk

    def _count_usage(self, raw: Any) -> None:
        if isinstance(raw, Mapping):
            with contextlib.suppress(TypeError, ValueError):
                self._usage.add(TokenUsage(calls=1, input_tokens=int(raw.get("input_tokens") or 0),
                                           output_tokens=int(raw.get("output_tokens") or 0)))


def _closed(exc: Any) -> str:
    """``the server closed the connection (1011 overloaded)``: the close frame's code and reason."""
    frame = getattr(exc, "rcvd", None) or getattr(exc, "sent", None)
    if frame is None:
        return "the connection was lost"
    return f"the server closed the connection ({frame.code}{' ' + frame.reason if frame.reason else ''})"
