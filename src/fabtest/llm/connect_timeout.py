"""A short connect timeout under the long answer timeout of every LLM call.

The role's ``timeout`` (60 s by default) bounds the whole call, and both SDKs pass it per request as
one number, which httpx applies to every phase, connecting included. A connection whose SYN was
dropped (a listen backlog that overflowed when 1,000 conversations opened connections at once)
then waited the full timeout before its retry. Of 6,000 calls in such a run, 2 stalled about 50 s
and held the run's last minute. A server that has not even accepted the connection after
:data:`CONNECT_TIMEOUT_S` is retried at once, like any timeout (``llm/limits.py``). A call that
is connected but still answering keeps its full timeout.

The SDK builds its own HTTP client (httpx or its fork httpx2), so :func:`shorten_connect` wraps that
client's transport: each request's ``timeout`` extension gets ``connect`` capped before it is sent.
The same wrapper splits a large connection pool (``max_concurrency`` sizes it) into shards:
httpcore's per-request bookkeeping walks its whole pool. A thread always sends on the same shard
(by its native thread id), so a scenario's calls, one after the other, reuse one kept-alive
connection and each shard holds only the connections of the few threads that use it. Taken in
turn, as first built, 512 shards made each of a 200-conversation run's first 512 calls open a new
connection (and a server thread, for a threaded server), and kept hundreds of idle ones.
"""

from __future__ import annotations

import copy
import threading
from typing import Any

__all__ = ["CONNECT_TIMEOUT_S", "ShortConnect", "connect_timeout", "shorten_connect"]

#: Longest wait for a TCP (and TLS) connection before the call is retried. Linux retransmits a
#: dropped SYN after 1 s and 3 s, so 5 s lets a slow network connect and a dropped SYN fail fast.
CONNECT_TIMEOUT_S = 5.0


def connect_timeout(total_s: float) -> float:
    """The connect timeout of a call whose whole timeout is ``total_s``."""
    return min(CONNECT_TIMEOUT_S, total_s)


#: threads per pool shard, about: httpcore looks through every connection and queued request of its
#: pool on each request and each response closed (checking each idle one's socket with a system
#: call, and counting the idle ones once per connection: quadratic in the pool's size), so one pool
#: of 1,000 connections costs the process more CPU per call than the call's own work (profiled at
#: 1,000 conversations at once; shards of 128 still spent 7 % of the process's CPU in those checks)
SHARD_CONNECTIONS = 16
#: at most this many shards (``max_concurrency`` 8,192 is 512 shards)
MAX_SHARDS = 512


class ShortConnect:
    """An httpx (or httpx2) transport that caps each request's connect timeout, delegating the rest;
    with ``shards``, each request goes to one of several copies of the inner transport, each with
    its own connection pool (same settings), the one of the sending thread."""

    def __init__(self, inner: Any, connect_s: float, shards: list[Any] | None = None) -> None:
        self.inner = inner
        self.connect_s = connect_s
        self.shards = shards or [inner]

    def handle_request(self, request: Any) -> Any:
        timeouts = request.extensions.get("timeout")
        if isinstance(timeouts, dict):
            connect = timeouts.get("connect")
            request.extensions["timeout"] = {
                **timeouts, "connect": self.connect_s if connect is None else min(connect, self.connect_s)}
        shards = self.shards
        return shards[threading.get_native_id() % len(shards)].handle_request(request)

    def close(self) -> None:
        for shard in self.shards:
            shard.close()

    def __enter__(self) -> ShortConnect:
        self.inner.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.inner.__exit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def shorten_connect(http_client: Any, connect_s: float) -> bool:
    """Wrap ``http_client``'s default transport (an httpx/httpx2 ``Client``) in :class:`ShortConnect`.

    Returns False, changing nothing, when the client does not look like one (another SDK version):
    the calls then keep the single timeout they had."""
    inner = getattr(http_client, "_transport", None)
    if inner is None or not hasattr(inner, "handle_request") or isinstance(inner, ShortConnect):
        return False
    http_client._transport = ShortConnect(inner, connect_s, _shards(inner))
    return True


def _shards(transport: Any) -> list[Any] | None:
    """Copies of an httpx ``HTTPTransport``, each with a connection pool of its own, or None (one pool)
    when the pool is small, or not a plain httpcore ``ConnectionPool`` (a proxy, another version).

    Each copy keeps the pool's limits: the threads that share a shard are few, so its pool stays
    short without a smaller cap, and a smaller cap would queue calls when more threads than it
    allows happen to share one (``max_concurrency``, fabtest's limiter, stays the one cap)."""
    pool: Any = getattr(transport, "_pool", None)
    size = getattr(pool, "_max_connections", None)
    if type(pool).__name__ != "ConnectionPool" or not isinstance(size, int) or size <= 2 * SHARD_CONNECTIONS:
        return None
    count = min(MAX_SHARDS, -(-size // SHARD_CONNECTIONS))
    try:
        settings = {name: getattr(pool, f"_{name}") for name in (
            "max_connections", "max_keepalive_connections", "ssl_context", "keepalive_expiry", "http1", "http2",
            "retries", "local_address", "uds", "network_backend", "socket_options")}
        shards = [transport]
        for _ in range(count - 1):
            shard = copy.copy(transport)
            shard._pool = type(pool)(**settings)
            shards.append(shard)
    except (AttributeError, TypeError):
        return None
    return shards
