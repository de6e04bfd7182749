"""Hedged first attempts: a judge or simulator call whose server stays silent past the endpoint's
recent p95 is sent once more in parallel, and the first answer is kept.

Dean & Barroso ("The Tail at Scale", CACM 2013): a request that has not answered after about the
95th-percentile latency gets a second copy, whichever answers first is used and the other is
cancelled; about 5 % more requests buy a tail close to the median's. Before this, a request the
provider lost waited the stall limit (:mod:`fabtest.llm.stalls`: 4x the p95, at least 5 s) and
then a whole call: 5x the latency or more. Hedged after the p95 it costs about the p95 plus one
call: about 2x.

No thread per call. The judge's and simulator's HTTP clients read their sockets through
:class:`WatchedBackend` (:func:`watch_reads`). A first attempt reads its answer with the hedge
delay as the socket's timeout: when the server has sent nothing for that long (measured by the
kernel: time this process spent waiting for its own CPU does not count, the data would be there),
the calling thread itself sends the hedge to a reusable thread and goes back to reading. The first
attempt to answer wins; the other one's socket is shut down, so its thread stops reading at once
and its answer, if any, is never read (:class:`_Race`). An answer before the delay pays a
thread-local lookup and two uncontended locks per socket read.

No hedge is sent when it would add load and cure nothing:

- the call is waiting on fabtest's side: for a slot of its endpoint's limiter (the hedge takes a
  slot without waiting: none is free when calls queue) or for a connection (nothing is read yet);
- the process is saturated: the thread noticed the silence more than :data:`LATE_S` after the
  delay (it waited that long for the GIL);
- the role retries nothing (``max_retries = 0``), or the suite's retry budget has spent half its
  allowance (:meth:`~fabtest.llm.retry_budget.RetryBudget.spend_on_hedge`): a hedge is a retry.

Then the first attempt keeps its stall limit and is cut and asked again after it, as before.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from fabtest._internal.threads import ReusableThreads
from fabtest.errors import TransientFailure
from fabtest.llm.connect_timeout import connect_timeout
from fabtest.llm.limits import ProviderBase, exception_is_timeout
from fabtest.llm.stalls import LatencyTracker, hedged_message, stalled

__all__ = ["LATE_S", "Hedging", "WatchedBackend", "hedging", "watch_reads"]

R = TypeVar("R")

#: a thread that notices its hedge delay this much late waited for the process's CPU: no hedge
LATE_S = 0.5

_FIRST, _HEDGE = 0, 1


class _Local(threading.local):
    #: the race this thread's attempt runs in, and its side (_FIRST or _HEDGE); None: not watched
    side: tuple[_Race, int] | None = None


_LOCAL = _Local()
_THREADS = ReusableThreads("fabtest hedge")


def _shut(stream: Any) -> None:
    """End the attempt reading ``stream``: its blocked read returns at once (end of stream)."""
    if stream is None:
        return
    sock = stream.get_extra_info("socket")
    if isinstance(sock, socket.socket):
        try:  # the plain socket's shutdown: an SSL socket's would drop its SSL object under the reader
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
        except OSError:
            pass


class _Race:
    """One logical call's first attempt and its hedge: which answered first, and the stream each
    side is reading now (set and cleared under the lock, so a loser's stream is shut only while
    its own attempt reads it, never after it went back to the pool for another call)."""

    __slots__ = ("answer", "delay", "done", "failure", "fired", "hedged", "hedging", "lock", "reading", "send",
                 "sent_at", "tracker", "winner")

    def __init__(self, hedging: Hedging, tracker: LatencyTracker, send: Callable[[float | None], Any],
                 delay: float) -> None:
        self.hedging = hedging
        self.tracker = tracker
        self.send = send
        self.delay = delay
        self.lock = threading.Lock()
        self.winner: int | None = None
        self.answer: Any = None
        self.reading: list[Any] = [None, None]
        self.fired = False  # the first attempt's silence reached the delay (at most one hedge is considered)
        self.done: threading.Event | None = None  # a hedge was handed to a thread; set when that has finished
        self.hedged = False  # the hedge went out (a slot was free when its thread ran, nobody had answered)
        self.failure: BaseException | None = None  # the hedge's, when it failed
        self.sent_at = 0.0  # when the hedge was sent (monotonic)

    def claim(self, side: int, answer: Any) -> bool:
        """``side`` has answered: it wins unless the other side did first; the loser's read is ended."""
        with self.lock:
            if self.winner is not None:
                return False
            self.winner, self.answer = side, answer
            _shut(self.reading[1 - side])
            return True

    def close(self) -> None:
        """The first attempt stops waiting: no answer wins from now on; a hedge still reading stops."""
        with self.lock:
            if self.winner is None:
                self.winner = _FIRST
                _shut(self.reading[_HEDGE])

    def read(self, side: int, stream: Any, max_bytes: int, timeout: float | None) -> bytes:
        """``stream.read`` for one side: the first attempt's read notices a silence of the delay."""
        with self.lock:
            if self.winner is not None and self.winner != side:
                _shut(stream)  # lost already: the read below ends at once
            self.reading[side] = stream
        try:
            data: bytes
            if side == _FIRST and not self.fired and (timeout is None or timeout > self.delay):
                began = time.monotonic()
                try:
                    data = stream.read(max_bytes, self.delay)
                    return data
                except Exception as exc:
                    if not exception_is_timeout(exc):
                        raise
                waited = time.monotonic() - began
                self._silent(waited - self.delay)
                timeout = None if timeout is None else max(1e-3, timeout - waited)
            data = stream.read(max_bytes, timeout)
            return data
        finally:
            with self.lock:
                self.reading[side] = None

    def _silent(self, late: float) -> None:
        with self.lock:
            if self.fired or self.winner is not None:
                return
            self.fired = True
        if late <= LATE_S:  # later: this thread waited for the GIL, the process is saturated
            self.hedging.launch(self)


class Hedging:
    """One provider's hedges: its endpoint's limiter (a hedge takes a free slot or is not sent) and
    the suite's retry budget (a hedge is paid as a retry). Called as the
    :class:`~fabtest.llm.stalls.Racer` of :func:`~fabtest.llm.stalls.cut_when_stalled`."""

    def __init__(self, provider: ProviderBase) -> None:
        self.limiter = provider._semaphore
        self.cap = max(1, provider.settings.max_concurrency)
        self.budget = provider._budget
        #: the longest the first attempt waits for a hedge it outlived: the hedge's own timeouts end it sooner
        self.wait_s = provider.settings.timeout_s + connect_timeout(provider.settings.timeout_s) + 1.0

    def __call__(self, tracker: LatencyTracker, send: Callable[[float | None], R], limit: float | None,
                 delay: float) -> R:
        """The first attempt, on the calling thread, hedged after ``delay`` seconds of silence;
        ``tracker`` is the latency of its class of calls, which the answer feeds."""
        race = _Race(self, tracker, send, delay)
        started = time.monotonic()
        failed: Exception | None = None
        _LOCAL.side = (race, _FIRST)
        try:
            answer = send(limit)
        except Exception as exc:
            failed = exc
        finally:
            _LOCAL.side = None
        if failed is not None:
            return self._first_failed(race, failed, limit)  # type: ignore[no-any-return]
        if race.claim(_FIRST, answer):
            race.tracker.record(time.monotonic() - started)
        else:
            answer = race.answer  # the hedge answered first: this answer is dropped
        return _noted(race, answer)  # type: ignore[no-any-return]

    def launch(self, race: _Race) -> None:
        """Send the hedge of ``race`` on a reusable thread, if the budget allows and a slot looks free
        (the hedge's thread takes it: a shared limiter's slot belongs to the thread that took it)."""
        if self.limiter.held >= self.cap:  # every slot is taken: calls queue on our side
            return
        if self.budget is not None and not self.budget.spend_on_hedge():
            return
        race.done = threading.Event()
        race.sent_at = time.monotonic()
        try:
            _THREADS.submit(self._hedge, race, name="fabtest hedge")
        except BaseException:
            self._unsent(race)
            raise

    def _unsent(self, race: _Race) -> None:
        if self.budget is not None:
            self.budget.refund_hedge()
        assert race.done is not None
        race.done.set()

    def _hedge(self, race: _Race) -> None:
        """The hedge itself (a reusable thread): the same request, the role's whole timeout."""
        done = race.done
        assert done is not None
        acquired = self.limiter.acquire(blocking=False)
        with race.lock:
            race.hedged = acquired and race.winner is None  # not when the first attempt answered meanwhile
        if not race.hedged:  # no free slot after all (calls queue on our side), or no need any more
            if acquired:
                self.limiter.release()
            self._unsent(race)
            return
        race.tracker.hedged()
        _LOCAL.side = (race, _HEDGE)
        started = time.monotonic()
        try:
            answer = race.send(None)
        except BaseException as failure:
            race.failure = failure
        else:
            if race.claim(_HEDGE, answer):
                race.tracker.record(time.monotonic() - started)
                race.tracker.hedged(won=True)
        finally:
            _LOCAL.side = None
            self.limiter.release()
            done.set()

    def _first_failed(self, race: _Race, failure: Exception, limit: float | None) -> Any:
        """The first attempt failed (cut at the stall limit, or ended by the hedge's answer): the hedge's
        answer, if it comes within the stall limit of being sent; else a transient failure saying both
        failed, which :func:`~fabtest.llm.limits.call_with_retries` retries as it retries a cut."""
        done = race.done
        if done is not None and isinstance(failure, TransientFailure):
            # the hedge gets as long as the first attempt had (its stall limit), then the cut's retry follows
            done.wait(max(0.0, race.sent_at + (self.wait_s if limit is None else limit) - time.monotonic()))
        race.close()
        if race.winner == _HEDGE:  # the hedge answered (and ended this attempt's read)
            return _noted(race, race.answer)
        if not race.hedged or not isinstance(failure, TransientFailure):
            cut = stalled(race.tracker, limit, failure)
            if cut is failure:
                raise failure
            raise cut from failure
        hedge_failure = race.failure
        if isinstance(hedge_failure, Exception) and not isinstance(hedge_failure, TransientFailure):
            raise hedge_failure  # a definite answer (a 400, a bad key): no retry helps
        first = stalled(race.tracker, limit, failure)
        timeout = isinstance(first, TransientFailure) and first.timeout and (
            not isinstance(hedge_failure, TransientFailure) or hedge_failure.timeout)
        hedge = f"the hedge failed too: {hedge_failure}" if hedge_failure else "the hedge had no answer either"
        raise TransientFailure(f"{first}; it was hedged after {race.delay:.1f}s of silence, and {hedge}",
                               timeout=timeout) from failure


def _noted(race: _Race, answer: Any) -> Any:
    """``answer``, its metadata saying it was hedged when a hedge was sent (the trace shows it)."""
    if race.hedged:
        metadata = getattr(answer, "metadata", None)
        if isinstance(metadata, dict):
            metadata["hedged"] = hedged_message(race.delay, hedge_won=race.winner == _HEDGE)
    return answer


class _WatchedStream:
    """An httpcore network stream whose reads go through the calling thread's race, if any."""

    __slots__ = ("_inner",)

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        side = _LOCAL.side
        if side is None:
            data: bytes = self._inner.read(max_bytes, timeout)
            return data
        return side[0].read(side[1], self._inner, max_bytes, timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, timeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> _WatchedStream:
        return _WatchedStream(self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class WatchedBackend:
    """An httpcore network backend whose streams are :class:`_WatchedStream`."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def connect_tcp(self, *args: Any, **kwargs: Any) -> _WatchedStream:
        return _WatchedStream(self.inner.connect_tcp(*args, **kwargs))

    def connect_unix_socket(self, *args: Any, **kwargs: Any) -> _WatchedStream:
        return _WatchedStream(self.inner.connect_unix_socket(*args, **kwargs))

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)


def watch_reads(http_client: Any) -> bool:
    """Read every socket of ``http_client`` (an httpx or httpx2 ``Client``, its transport possibly
    split by :class:`~fabtest.llm.connect_timeout.ShortConnect`) through :class:`WatchedBackend`.

    False, changing nothing, when its transports are not plain HTTP/1.1 httpcore connection pools
    (HTTP/2 shares one socket between calls, so a socket cannot be shut for one of them; a custom
    transport; another version): that client's calls are then never hedged, only cut."""
    transport = getattr(http_client, "_transport", None)
    shards = getattr(transport, "shards", None) or [transport]
    pools = [getattr(shard, "_pool", None) for shard in shards]
    if not all(type(pool).__name__ == "ConnectionPool" and getattr(pool, "_http2", True) is False
               and getattr(pool, "_network_backend", None) is not None for pool in pools):
        return False
    for pool in pools:
        if not isinstance(pool._network_backend, WatchedBackend):  # type: ignore[union-attr]
            pool._network_backend = WatchedBackend(pool._network_backend)  # type: ignore[union-attr]
    return True


def hedging(provider: ProviderBase, http_client: Any = None) -> Hedging | None:
    """The hedges of ``provider``'s calls; None when its role retries nothing (``max_retries = 0``: a
    hedge is a retry) or ``http_client``, given, cannot be watched (:func:`watch_reads`). A call on
    a client that is not watched never notices a silence, so it is never hedged, only cut."""
    if provider._policy.max_retries < 1:
        return None
    if http_client is not None and not watch_reads(http_client):
        return None
    return Hedging(provider)
