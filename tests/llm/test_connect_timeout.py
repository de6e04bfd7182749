"""A call that cannot even connect is retried after the short connect timeout, not after the whole
answer timeout (issue 30, "at scale": 2 of 6,000 calls stalled ~50 s behind a dropped SYN). The
stall is made real: a listening socket whose accept queue is full drops the next SYNs, through the
real google-genai client and the OpenAI-compatible httpx client."""

from __future__ import annotations

import dataclasses
import socket
import time
from collections.abc import Iterator

import pytest

from fabtest.llm.base import LLMError, LLMSettings
from fabtest.llm.gemini import GeminiLLM
from fabtest.llm import connect_timeout as ct
from fabtest.llm.openai_compat import OpenAICompatLLM


@pytest.fixture
def stalled_port() -> Iterator[int]:
    """A port on 127.0.0.1 that never completes another connection (its backlog is full)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = server.getsockname()[1]
    filler = socket.create_connection(("127.0.0.1", port), timeout=2)
    probe = socket.socket()
    probe.settimeout(0.5)
    try:
        probe.connect(("127.0.0.1", port))
        pytest.skip("this system does not drop SYNs on a full backlog")
    except OSError:
        pass
    finally:
        probe.close()
    try:
        yield port
    finally:
        filler.close()
        server.close()


@pytest.mark.parametrize("provider", ["gemini", "openai"])
def test_a_call_that_cannot_connect_gives_up_after_the_connect_timeout(
        stalled_port: int, monkeypatch: pytest.MonkeyPatch, provider: str) -> None:
    monkeypatch.setattr(ct, "CONNECT_TIMEOUT_S", 0.5)
    settings = LLMSettings(provider=provider, timeout_s=30.0, max_retries=1,
                           base_url=f"http://127.0.0.1:{stalled_port}" + ("/v1" if provider == "openai" else ""))
    fast = {"backoff_base_s": 0.01, "backoff_max_s": 0.05}
    llm = GeminiLLM(settings, api_key="k", **fast) if provider == "gemini" else OpenAICompatLLM(settings, **fast)
    started = time.monotonic()
    with pytest.raises(LLMError, match="timed out"):
        llm.complete("hello")
    elapsed = time.monotonic() - started
    assert elapsed < 5, f"{elapsed:.1f}s: waited for the answer timeout, not the connect timeout"


def test_the_connect_timeout_never_exceeds_the_call_timeout() -> None:
    assert ct.connect_timeout(2.0) == 2.0
    assert ct.connect_timeout(60.0) == ct.CONNECT_TIMEOUT_S


def test_a_large_pool_is_split_into_shards_one_per_thread(settings: LLMSettings) -> None:
    """``max_concurrency`` sizes the connection pool; above two shards' worth it is split, each shard a
    pool of its own with the same settings (issue 42: httpcore walks its whole pool on every request).
    A thread always sends on the same shard, so its calls reuse one connection; threads spread."""
    from concurrent.futures import ThreadPoolExecutor

    llm = GeminiLLM(dataclasses.replace(settings, max_concurrency=512), api_key="k")
    assert llm.complete("hello").text  # the client is built and works through a shard
    transport = llm._lean._http._transport  # the judge's and simulator's own client (gemini_rest.direct_transport)
    sdk = llm._get_client()._api_client._httpx_client._transport  # the SDK's, for calls with files
    assert isinstance(sdk, ct.ShortConnect) and len(sdk.shards) == 512 // ct.SHARD_CONNECTIONS
    assert isinstance(transport, ct.ShortConnect) and len(transport.shards) == 512 // ct.SHARD_CONNECTIONS
    pools = [shard._pool for shard in transport.shards]
    assert len({id(pool) for pool in pools}) == len(pools)
    assert {pool._max_connections for pool in pools} == {512}  # no smaller cap under the limiter's
    assert len({id(pool._ssl_context) for pool in pools}) == 1  # the same TLS settings
    for _ in range(5):
        assert llm.complete("again").text
    assert sum(len(pool._connections) for pool in pools) == 1  # one thread, one shard, one connection
    with ThreadPoolExecutor(8) as threads:
        assert all(r.text for r in threads.map(lambda _: llm.complete("hello"), range(64)))
    used = [pool for pool in pools if pool._connections]
    assert 2 <= len(used) <= 9  # the 8 threads' shards (and the main thread's), not one per call
    assert sum(len(pool._connections) for pool in pools) <= 9 + 8  # connections kept alive and reused


def test_a_small_pool_stays_one(settings: LLMSettings) -> None:
    llm = GeminiLLM(dataclasses.replace(settings, max_concurrency=8), api_key="k")
    assert llm.complete("hello").text
    for transport in (llm._lean._http._transport, llm._get_client()._api_client._httpx_client._transport):
        assert isinstance(transport, ct.ShortConnect) and transport.shards == [transport.inner]
