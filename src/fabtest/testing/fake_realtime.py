"""A local stand-in for an OpenAI Realtime server, so voice agents over WebSocket are tested offline.

:class:`FakeRealtime` is a WebSocket server on ``127.0.0.1`` (a free port, its own thread and event
loop) that speaks the Realtime event protocol the way the server does: ``session.created`` on
connect, ``session.update`` checked and answered with ``session.updated``, the user's audio
appended and committed, and each ``response.create`` answered by the next scripted
:class:`RealtimeReply`: its audio in chunks (``response.output_audio.delta``, or the beta's
``response.audio.delta`` with ``api="beta"``), its transcript beside them, an optional function
call, or a fault (an ``error`` event, a closed connection)::

    from fabtest.testing import FakeRealtime, RealtimeReply, FunctionCall

    with FakeRealtime([RealtimeReply(audio=pcm24k, transcript="Table booked.",
                                     function_call=FunctionCall("book_table", {"people": 2}))]) as fake:
        ...  # [tool.fabtest.agents.phone] realtime = fake.url
        assert fake.connections[0].types[:2] == ["session.update", "input_audio_buffer.append"]

``response.cancel`` stops the reply being streamed (``pace_s`` between chunks leaves time to
interrupt) and ``conversation.item.truncate`` is acknowledged, as the server does. Every client
event is recorded per connection (:attr:`FakeRealtime.connections`) with the request's headers.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import Any, Literal

from fabtest.conversation import Audio
from fabtest.testing.realtime_server import FunctionCall, RealtimeConnection, RealtimeReply, Session

__all__ = ["FakeRealtime", "FunctionCall", "RealtimeConnection", "RealtimeReply"]


Replies = Sequence[RealtimeReply] | Callable[[Audio], RealtimeReply]


class FakeRealtime:
    """The server; see the module docstring. ``replies`` is a list answered in order (the last one
    repeats) or a function of the user's committed audio (a :class:`fabtest.Audio` at 24 kHz): a model
    of your own; ``rates`` are the pcm rates the session accepts."""

    def __init__(self, replies: Replies = (), *, api: Literal["ga", "beta"] = "ga",
                 rates: Sequence[int] = (24000,), api_key: str | None = None) -> None:
        self._replies = replies if callable(replies) else list(replies) or [RealtimeReply(transcript="Hello.")]
        self._next = 0
        self.api = api
        self.rates = tuple(rates)
        #: when set, a connection without ``Authorization: Bearer <api_key>`` is refused with HTTP 401
        self.api_key = api_key
        self.connections: list[RealtimeConnection] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/v1/realtime"

    @property
    def events(self) -> list[dict[str, Any]]:
        """Every event of every connection."""
        return [e for c in self.connections for e in c.events]

    def __enter__(self) -> FakeRealtime:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Serve on a free port of 127.0.0.1 until :meth:`close`."""
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, args=(ready,), name="fake-realtime", daemon=True)
        self._thread.start()
        ready.wait(10)

    def close(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)
        self._thread = None

    def _serve(self, ready: threading.Event) -> None:
        assert self._loop is not None
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._main(ready))
        self._loop.close()

    async def _main(self, ready: threading.Event) -> None:
        from websockets.asyncio.server import serve

        self._stop = asyncio.Event()
        async with serve(self._session, "127.0.0.1", 0, max_size=2 ** 24, process_request=self._check_key) as server:
            self.port = next(iter(server.sockets)).getsockname()[1]
            ready.set()
            await self._stop.wait()

    def _check_key(self, connection: Any, request: Any) -> Any:
        from http import HTTPStatus

        if self.api_key is None or request.headers.get("Authorization") == f"Bearer {self.api_key}":
            return None
        return connection.respond(HTTPStatus.UNAUTHORIZED, "Incorrect API key provided.\n")

    def reply(self, audio: bytes) -> RealtimeReply:
        """The reply to the user's committed audio (called by the connection's session)."""
        if callable(self._replies):
            return self._replies(Audio(audio, 24000))
        reply = self._replies[min(self._next, len(self._replies) - 1)]
        self._next += 1
        return reply

    async def _session(self, ws: Any) -> None:
        headers = {k.lower(): v for k, v in ws.request.headers.raw_items()}
        connection = RealtimeConnection(ws.request.path, headers)
        self.connections.append(connection)
        await Session(self, ws, connection).run()
