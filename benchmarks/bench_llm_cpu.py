"""CPU per LLM call (issue 42 item 1): what fabtest's client side costs for one judge-sized call.

    python benchmarks/bench_llm_cpu.py            # ~20 s: 2,000 calls, 1 and 32 threads
    python benchmarks/bench_llm_cpu.py --quick    # ~3 s: 100 calls (the test suite's smoke run)

A FakeGemini runs in a child process (its CPU is not counted) and answers at once with a
judge-sized JSON verdict. This process makes the calls through :class:`fabtest.llm.GeminiLLM`
(``complete_json`` with a criteria-like schema, a 4 KiB prompt and a system instruction: the
judge's shape) from 1 thread, then from 32 threads at once, and prints the process CPU time
(user + system, ``time.process_time``) per call. The target is 2 ms per call.

``--profile FILE`` writes a cProfile of the one-thread round (``python -m pstats FILE``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from pydantic import BaseModel
from tabulate import tabulate

SERVER = """
import sys, time
from fabtest.testing import FakeGemini
fake = FakeGemini()
fake.default_json = {"verdicts": [{"criterion": "polite", "passed": True, "reason": "The agent thanks the user.",
                                   "evidence": "thank you"}]}
fake.start()
print(fake.base_url, flush=True)
sys.stdin.read()
"""


class Verdict(BaseModel):
    criterion: str
    passed: bool
    reason: str
    evidence: str = ""


class Verdicts(BaseModel):
    verdicts: list[Verdict]


PROMPT = "Judge the agent's response below against each criterion.\n" + ("The user said something. " * 160)
SYSTEM = "You are a strict, fair judge of a conversational agent. Answer in JSON."


def measure(llm: object, calls: int, threads: int) -> tuple[float, float]:
    """(wall s, CPU ms per call) of ``calls`` complete_json calls spread over ``threads``."""
    def one(_: int) -> None:
        result = llm.complete_json(PROMPT, Verdicts, system=SYSTEM)  # type: ignore[attr-defined]
        assert result.parsed is not None and result.parsed.verdicts[0].passed

    cpu, wall = time.process_time(), time.perf_counter()
    if threads == 1:
        for i in range(calls):
            one(i)
    else:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(one, range(calls)))
    return time.perf_counter() - wall, (time.process_time() - cpu) * 1000 / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--quick", action="store_true", help="100 calls: a smoke run")
    parser.add_argument("--profile", help="write a cProfile of the one-thread round to this file")
    args = parser.parse_args()
    calls = 100 if args.quick else args.calls

    server = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        from fabtest.llm.base import LLMSettings
        from fabtest.llm.gemini import GeminiLLM

        llm = GeminiLLM(LLMSettings(base_url=base_url, max_concurrency=64), api_key="bench-key")
        measure(llm, 20, 1)  # warm: the SDK's lazy imports, the connection, the schema cache
        rows = []
        for threads in args.threads:
            profiler = None
            if args.profile and threads == 1:
                import cProfile

                profiler = cProfile.Profile()
                profiler.enable()
            wall, per_call = measure(llm, calls, threads)
            if profiler is not None:
                profiler.disable()
                profiler.dump_stats(args.profile)
            rows.append([threads, calls, f"{wall:.2f} s", f"{calls / wall:.0f}", f"{per_call:.2f} ms"])
        print(tabulate(rows, headers=["threads", "calls", "wall", "calls/s", "CPU per call"]))
        print(f"load {os.getloadavg()[0]:.2f}; target: at most 2 ms of CPU per call")
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
