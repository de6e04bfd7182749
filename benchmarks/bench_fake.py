"""The fake provider alone (issue 42): CPU per request of FakeGemini and of the wide fake.

FakeGemini is a thread per connection; benchmarks/_wide_fake.py is one asyncio loop. N requests
at once come from another process.

    python benchmarks/bench_fake.py                    # 200 and 500 at once, 2,000 ms, 3 rounds: ~1 min
    python benchmarks/bench_fake.py --quick            # 20 at once, 50 ms: a smoke run

The fake runs in this process with an instant handler (a short JSON answer, as the simulator's)
and answers every call after ``--latency`` seconds. A client process opens N keep-alive
connections and, on each, sends a ``generateContent`` request with a fabtest-sized prompt (about
3 KB) at the same moment as the others, waits for every answer, and does that ``--rounds`` times;
then again with a new connection per request (what fabtest's sharded connection pools do until
every shard has one: a new thread each for FakeGemini).
It is a few lines of raw asyncio, not httpx: httpx's async client at 500 at once took 2 minutes of
CPU and was itself what the slowest answer measured. Printed per fake and N: the fake's CPU (this
process's ``getrusage`` over the client's run: the main thread only waits), per request; the most
requests in flight at the fake; the slowest request as the client timed it, over the latency
(1.00x: answered exactly when due). The client's CPU is not counted: a real provider's is not
ours, and neither is the load generator's.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).parent))
from _wide_fake import WideFake

from fabtest.testing import FakeGemini
from fabtest.testing.gemini_wire import FakeRequest

CLIENT = r'''
import asyncio, json, sys, time

host, port, path, n, rounds = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
fresh = sys.argv[6] == "new"  # a new connection per request, as fabtest's sharded pools make at first
body = json.dumps({
    "systemInstruction": {"parts": [{"text": "You are role-playing a HUMAN USER. " * 40}]},
    "contents": [{"role": "user", "parts": [{"text": "You: Message 1 of my request. Agent: noted. " * 30}]}],
    "generationConfig": {"responseMimeType": "application/json", "temperature": 0.7}}).encode()
request = (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: */*\r\nAccept-Encoding: gzip, deflate\r\n"
           f"Connection: keep-alive\r\nUser-Agent: google-genai-sdk/1.0 gl-python/3.11\r\n"
           f"x-goog-api-key: fake\r\nContent-Type: application/json\r\n"
           f"Content-Length: {len(body)}\r\n\r\n").encode() + body


opened = []


async def connection(times, go):
    reader, writer = await asyncio.open_connection(host, port)
    opened.append(1)
    for round_ in range(rounds):
        await go[round_].wait()
        started = time.perf_counter()
        if fresh and round_:
            writer.close()
            reader, writer = await asyncio.open_connection(host, port)
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        await reader.readexactly(length)
        times[round_].append(time.perf_counter() - started)
    writer.close()


async def main():
    go = [asyncio.Event() for _ in range(rounds)]
    times = [[] for _ in range(rounds)]
    tasks = [asyncio.create_task(connection(times, go)) for _ in range(n)]
    while len(opened) < n:  # every connection open before the first round
        await asyncio.sleep(0.01)
    for round_ in range(rounds):
        go[round_].set()
        while len(times[round_]) < n:
            await asyncio.sleep(0.01)
    await asyncio.gather(*tasks)
    print(json.dumps({"requests": sum(map(len, times)), "slowest": max(max(t) for t in times)}))


asyncio.run(main())
'''


def handler(request: FakeRequest) -> Any:
    """Instant: what a simulator call gets back."""
    return {"message": "Message 2 of my request.", "goal_complete": False}


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(kind: str, n: int, latency: float, rounds: int, connections: str) -> dict[str, Any]:
    fake = WideFake(handler=handler, latency=latency) if kind == "wide" else FakeGemini(handler=handler,
                                                                                          latency=latency)
    with fake:
        path = "/v1beta/models/gemini-2.5-flash:generateContent"
        cpu = _own_cpu()
        done = subprocess.run([sys.executable, "-c", CLIENT, "127.0.0.1", str(fake.port), path, str(n), str(rounds),
                               connections],
                              capture_output=True, text=True, timeout=600)
        cpu = _own_cpu() - cpu
        if done.returncode != 0:
            raise SystemExit(f"the client failed against the {kind} fake:\n{done.stderr[-3000:]}")
        client = json.loads(done.stdout)
        requests, in_flight = len(fake.requests), fake.max_in_flight
    assert requests == client["requests"] == n * rounds, (requests, client)
    return {"fake": kind, "n": n, "requests": requests, "cpu_s": cpu, "ms_per_request": cpu * 1000 / requests,
            "in_flight": in_flight, "slowest": client["slowest"] / latency}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="200,500", help="comma-separated requests at once")
    parser.add_argument("--latency", type=float, default=2.0, help="seconds before the fake answers each call")
    parser.add_argument("--rounds", type=int, default=3, help="times each client sends its N requests at once")
    parser.add_argument("--quick", action="store_true", help="smoke run: 20 at once, 50 ms, 2 rounds")
    args = parser.parse_args(argv)
    if args.quick:
        args.concurrency, args.latency, args.rounds = "20", 0.05, 2
    rows = []
    for n in (int(x) for x in args.concurrency.split(",")):
        for connections in ("keep-alive", "new"):
            threaded, wide = (measure(kind, n, args.latency, args.rounds, connections) for kind in ("threaded", "wide"))
            for row in (threaded, wide):
                rows.append([row["fake"], n, connections, row["requests"], f"{row['cpu_s']:.2f}",
                             f"{row['ms_per_request']:.3f}", row["in_flight"], f"{row['slowest']:.2f}x",
                             f"{threaded['ms_per_request'] / max(1e-9, row['ms_per_request']):.1f}x"])
    print(f"The fake alone: N generateContent requests at once from another process (a raw asyncio client; "
          f"keep-alive: one connection each for every round, new: a connection per request), {args.rounds} rounds, "
          f"answered after {args.latency * 1000:.0f} ms")
    print(tabulate(rows, headers=["fake", "at once", "connections", "requests", "fake CPU s", "CPU ms/request",
                                  "max in flight", "slowest / latency", "threaded CPU / this"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
