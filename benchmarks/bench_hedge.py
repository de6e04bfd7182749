"""What a request the provider loses costs a call: hedged first attempts against the stall cut alone (issue 42 item 4).

    python benchmarks/bench_hedge.py            # ~40 s: 200 calls at 1 s, 1 request in 50 lost, 16 threads
    python benchmarks/bench_hedge.py --quick    # ~5 s: 24 calls at 0.2 s, shorter limits (the suite's smoke run)

A FakeGemini answers every request after ``--latency`` seconds, except one in ``--lose``, drawn at
random (seeded: both rounds lose the same arrivals), which it holds (a request the server lost,
released when the round ends; a hedge may be lost too). :class:`GeminiLLM`
makes ``--calls`` judge-sized calls from ``--threads`` threads, after enough calls for the
endpoint to know its recent latency, twice, each round on a fresh fake (a fresh endpoint):

- ``cut only``: hedging off, as before it was built: a lost first attempt waits the stall limit
  (4x the recent p95, at least 5 s) and is asked again;
- ``hedged``: a first attempt the server leaves silent past the recent p95 (at least 1 s) is sent
  again in parallel, the first answer kept (``fabtest/llm/hedging.py``).

Printed per round: each call's wall time as a multiple of the latency (p50, p95, p100: the issue's
target is p100 at most 2x), the requests lost, the hedges sent and won, the first attempts cut, and
the retries paid from the suite's retry budget.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tabulate import tabulate

from fabtest.llm import stalls
from fabtest.llm.base import LLMSettings
from fabtest.llm.gemini import GeminiLLM
from fabtest.llm.retry_budget import RetryBudget
from fabtest.testing import FakeGemini

PROMPT = "Judge the agent's response below against each criterion.\n" + ("The user said something. " * 160)


class Losing:
    """A FakeGemini handler holding one request in ``every`` once ``armed`` (until ``released``)."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.draw = random.Random(42)
        self.lock = threading.Lock()
        self.armed = False
        self.lost = 0
        self.released = threading.Event()

    def __call__(self, request: Any) -> str:
        with self.lock:
            lose = self.armed and self.draw.random() * self.every < 1
        if lose:
            self.lost += 1
            self.released.wait(120)
        return "OK"


def one_round(hedged: bool, args: argparse.Namespace) -> list[Any]:
    handler = Losing(args.lose)
    with FakeGemini(handler, latency=args.latency) as fake:
        llm = GeminiLLM(LLMSettings(base_url=fake.base_url, timeout_s=60, max_retries=4, max_concurrency=64),
                        api_key="bench-key", retry_budget=(budget := RetryBudget(0.1)))
        with ThreadPoolExecutor(args.threads) as pool:  # the endpoint's recent latency: MIN_SAMPLES calls
            list(pool.map(lambda _: llm.complete(PROMPT), range(stalls.MIN_SAMPLES + args.threads)))
            if not hedged:
                llm._hedging = None  # the stall cut alone, as before hedging was built
            handler.armed = True

            def timed(_: int) -> float:
                started = time.perf_counter()
                llm.complete(PROMPT)
                return time.perf_counter() - started

            took = sorted(pool.map(timed, range(args.calls)))
        handler.released.set()
        sent, won = llm._latency.hedges
        p95 = took[max(0, -(-len(took) * 95 // 100) - 1)]
        latency = args.latency
        return ["hedged" if hedged else "cut only", len(took), handler.lost,
                f"{statistics.median(took) / latency:.2f}x", f"{p95 / latency:.2f}x", f"{took[-1] / latency:.2f}x",
                f"{sent} / {won}", llm._latency.cut, budget.retries]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--latency", type=float, default=1.0, help="seconds the fake takes to answer")
    parser.add_argument("--lose", type=int, default=50, help="hold every N-th request (a lost request)")
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--quick", action="store_true", help="24 calls at 0.2 s, shorter limits: a smoke run")
    args = parser.parse_args()
    if args.quick:  # measures nothing: the stall limit's 5 s floor alone would make it slow
        args.calls, args.latency, args.lose, args.threads = 24, 0.2, 12, 8
        stalls.FLOOR_S, stalls.HEDGE_FLOOR_S = 1.0, 0.3
    rows = [one_round(hedged, args) for hedged in (False, True)]
    print(tabulate(rows, headers=["round", "calls", "lost", "p50", "p95", "p100", "hedges sent / won",
                                  "cut", "retries"]))
    print(f"latency {args.latency:g} s, 1 request in {args.lose} lost, {args.threads} threads; "
          f"load {os.getloadavg()[0]:.2f}; target: p100 at most 2x the latency")


if __name__ == "__main__":
    main()
