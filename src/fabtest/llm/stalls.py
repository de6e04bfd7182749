"""No stalled call: a first attempt far slower than the endpoint's recent calls is cut and asked again.

At 1,000 conversations at once, 2 of 6,000 calls stalled about 50 s (a request the server never
answered) and held the run's last minute: the role's ``timeout`` (60 s) is sized for the slowest
legitimate answer, not for a request that was lost. Each endpoint (provider and base URL, shared by
the judge and the simulator, like its concurrency limit) keeps the durations of its last
:data:`WINDOW` answered calls. Once it has :data:`MIN_SAMPLES`, a call's first attempt gets
:data:`MULTIPLE` times their 95th percentile (at least :data:`FLOOR_S`, at most the role's
timeout) to answer; one that does not is a transient timeout, retried at once from the suite's
retry budget like any other (:func:`fabtest.llm.limits.call_with_retries`).

Only the first attempt is cut this way: a retry waits the role's full timeout, so an answer that
is slow for a good reason (a long verdict) costs at most one extra call and never fails for it.

Before that limit, a first attempt whose server has said nothing for :func:`hedge_delay` (the
recent p95, at least :data:`HEDGE_MEDIAN_MULTIPLE` times the median and :data:`HEDGE_FLOOR_S`) is
hedged: sent once more in parallel, the first answer kept (:mod:`fabtest.llm.hedging`). The cut
stays as the fallback when no hedge could be sent.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol, TypeVar

from fabtest.errors import TransientFailure

R = TypeVar("R")

__all__ = ["FLOOR_S", "HEDGE_FLOOR_S", "HEDGE_MEDIAN_MULTIPLE", "MIN_SAMPLES", "MULTIPLE", "WINDOW",
           "LatencyTracker", "Racer", "cut_when_stalled", "hedge_delay", "hedged_message", "latency_tracker", "stalled",
           "stalled_message"]

#: how many times the recent p95 a first attempt may take before it counts as stalled
MULTIPLE = 4.0
#: never cut a first attempt before this many seconds, whatever the recent latency
FLOOR_S = 5.0
#: never hedge a first attempt before this many seconds of silence: under a second a p95 says more
#: about this machine's jitter (a GC pause, a new connection) than about the server, and a hedge
#: would spend the retry budget to save a few hundred milliseconds
HEDGE_FLOOR_S = 1.0
#: nor before this many times the recent median: where every answer takes about as long (a narrow
#: distribution, like a fixed-latency server), the p95 is barely above the median and the paper's
#: rule would send 5 % of all calls twice for a few milliseconds; at 1,000 conversations at once
#: 1-2 % of the judge's calls were (the provider bills both). Where latencies spread, as an LLM's
#: do with the length of its answers, the p95 is well above this and the paper's rule holds.
HEDGE_MEDIAN_MULTIPLE = 1.25
#: answered calls remembered per endpoint
WINDOW = 256
#: answered calls needed before any attempt is cut (too few say nothing about a p95)
MIN_SAMPLES = 20
#: the p95 is computed again once this many calls were answered since it last was: sorting the
#: window on every first attempt took 3-4 % of a process's CPU at 1,000 conversations at once
#: (py-spy), and a p95 a few calls old says the same thing about a window of 256
REFRESH = 8


class LatencyTracker:
    """The recent answered-call durations of one endpoint; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._durations: deque[float] = deque(maxlen=WINDOW)
        self._percentiles: tuple[float, float] | None = None  # (p50, p95)
        self._fresh = 0  # answers recorded since the p95 was computed
        self._cut = 0
        self._hedged = 0
        self._hedges_won = 0

    def record(self, seconds: float) -> None:
        """One attempt was answered after ``seconds``."""
        with self._lock:
            self._durations.append(seconds)
            self._fresh += 1

    def p95(self) -> float | None:
        """The 95th percentile of the recent durations (at most :data:`REFRESH` answers old), or
        None with fewer than :data:`MIN_SAMPLES`."""
        both = self._p50_p95()
        return None if both is None else both[1]

    def _p50_p95(self) -> tuple[float, float] | None:
        with self._lock:
            if len(self._durations) < MIN_SAMPLES:
                return None
            if self._percentiles is None or self._fresh >= REFRESH:
                ordered = sorted(self._durations)
                self._percentiles = (ordered[math.ceil(0.5 * len(ordered)) - 1],  # nearest rank
                                     ordered[math.ceil(0.95 * len(ordered)) - 1])
                self._fresh = 0
            return self._percentiles

    def limits(self, timeout_s: float) -> tuple[float | None, float | None]:
        """``(stall limit, hedge delay)`` of a first attempt, from one reading of the percentiles: the
        seconds it may take before it is cut (None: the whole ``timeout_s``) and the seconds of
        silence before it is hedged (None: never)."""
        both = self._p50_p95()
        p50, p95 = both if both is not None else (None, None)
        limit = _stall_limit(p95, timeout_s)
        return limit, hedge_delay(p95, limit if limit is not None else timeout_s, p50)

    def stalled(self) -> None:
        """Count a first attempt that was cut."""
        with self._lock:
            self._cut += 1

    def hedged(self, won: bool = False) -> None:
        """Count a hedge sent (``won``: count one whose answer came first instead)."""
        with self._lock:
            if won:
                self._hedges_won += 1
            else:
                self._hedged += 1

    @property
    def cut(self) -> int:
        """First attempts cut as stalled so far (for tests and benchmarks)."""
        return self._cut

    @property
    def hedges(self) -> tuple[int, int]:
        """``(hedges sent, hedges whose answer came first)`` so far (for tests and benchmarks)."""
        return self._hedged, self._hedges_won


def _stall_limit(p95: float | None, timeout_s: float) -> float | None:
    if p95 is None:
        return None
    limit = max(FLOOR_S, MULTIPLE * p95)
    return limit if limit < timeout_s else None


def hedge_delay(p95: float | None, before_s: float, p50: float | None = None) -> float | None:
    """Seconds of silence after which a first attempt is hedged: the recent p95 (Dean & Barroso's
    rule: about 5 % of calls wait that long), at least :data:`HEDGE_MEDIAN_MULTIPLE` times the
    median ``p50`` and :data:`HEDGE_FLOOR_S`; None without a p95 or when that is not shorter than
    ``before_s`` (the stall limit or the timeout, which come first)."""
    if p95 is None:
        return None
    delay = max(HEDGE_FLOOR_S, p95, HEDGE_MEDIAN_MULTIPLE * (p50 or 0.0))
    return delay if delay < before_s else None


_LOCK = threading.Lock()
_TRACKERS: dict[tuple[str, str, str], LatencyTracker] = {}


def latency_tracker(provider: str, base_url: str | None, *, files: bool = False) -> LatencyTracker:
    """The one tracker of an endpoint, shared by every LLM that calls it in this process; ``files``:
    its calls that carry files, another class of requests (an image takes longer to read than a
    transcript), with a p95 of their own."""
    key = (provider, (base_url or "").rstrip("/"), "files" if files else "")
    with _LOCK:
        tracker = _TRACKERS.get(key)
        if tracker is None:
            tracker = _TRACKERS[key] = LatencyTracker()
        return tracker


def stalled_message(limit_s: float) -> str:
    """Why a first attempt was cut (a retry's reason, and the last error if every attempt failed)."""
    return (f"timed out: no answer after {limit_s:.1f}s, {MULTIPLE:g}x the endpoint's recent p95 latency "
            f"(at least {FLOOR_S:g}s); asked again")


def hedged_message(delay_s: float, *, hedge_won: bool) -> str:
    """Why a call was sent twice (an answer's ``metadata["hedged"]``, and part of the error if both failed)."""
    kept = ("the second's answer kept, the first abandoned" if hedge_won
            else "the first's answer kept, the second abandoned")
    return (f"hedged: no answer after {delay_s:.1f}s, the endpoint's recent p95 latency (at least "
            f"{HEDGE_MEDIAN_MULTIPLE:g}x its median and {HEDGE_FLOOR_S:g}s); asked again in parallel, {kept}")


def stalled(tracker: LatencyTracker, limit: float | None, failure: Exception) -> Exception:
    """What a first attempt's failure is raised as: a timeout at the stall limit becomes a transient
    failure saying why (and is counted); anything else is itself."""
    if limit is not None and isinstance(failure, TransientFailure) and failure.timeout:
        tracker.stalled()
        return TransientFailure(stalled_message(limit), timeout=True)
    return failure


class Racer(Protocol):
    """Makes a first attempt hedged after ``delay`` seconds of silence (:class:`fabtest.llm.hedging.Hedging`)."""

    def __call__(self, tracker: LatencyTracker, send: Callable[[float | None], R], limit: float | None,
                 delay: float) -> R: ...


def cut_when_stalled(tracker: LatencyTracker, timeout_s: float, send: Callable[[float | None], R],
                     racer: Racer | None = None) -> Callable[[], R]:
    """One logical call's attempt function: ``send(limit)`` makes one attempt, ``limit`` being the
    seconds it may take (None: the role's own timeout) and a timeout being raised as a
    :class:`TransientFailure` with ``timeout`` set. The first attempt gets the tracker's stall limit
    and, with a ``racer``, a hedge after the hedge delay; answered attempts feed the tracker."""
    attempts = 0

    def attempt() -> R:
        nonlocal attempts
        attempts += 1
        limit = None
        if attempts == 1:
            limit, delay = tracker.limits(timeout_s)
            if racer is not None and delay is not None:
                return racer(tracker, send, limit, delay)
        started = time.monotonic()
        try:
            result = send(limit)
        except TransientFailure as failure:
            cut = stalled(tracker, limit, failure)
            if cut is failure:
                raise
            raise cut from failure
        tracker.record(time.monotonic() - started)
        return result

    return attempt
