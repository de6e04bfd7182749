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
"""

from __future__ import annotations

from typing import Any

__all__ = ["CONNECT_TIMEOUT_S", "ShortConnect", "connect_timeout", "shorten_connect"]

#: Longest wait for a TCP (and TLS) connection before the call is retried. Linux retransmits a
#: dropped SYN after 1 s and 3 s, so 5 s lets a slow network connect and a dropped SYN fail fast.
CONNECT_TIMEOUT_S = 5.0


def connect_timeout(total_s: float) -> float:
    """The connect timeout of a call whose whole timeout is ``total_s``."""
    return min(CONNECT_TIMEOUT_S, total_s)


class ShortConnect:
    """An httpx (or httpx2) transport that caps each request's connect timeout, delegating the rest."""

    def __init__(self, inner: Any, connect_s: float) -> None:
        self.inner = inner
        self.connect_s = connect_s

    def handle_request(self, request: Any) -> Any:
        timeouts = request.extensions.get("timeout")
        if isinstance(timeouts, dict):
            connect = timeouts.get("connect")
            request.extensions["timeout"] = {
                **timeouts, "connect": self.connect_s if connect is None else min(connect, self.connect_s)}
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()

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
    http_client._transport = ShortConnect(inner, connect_s)
    return True
