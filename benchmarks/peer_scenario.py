"""The peer of bench_scale (issue 17): LangWatch Scenario, K simulated 3-turn conversations at once.

Not part of fabtest's environment: run it in a scratch virtualenv, never the project's::

    python3 -m venv /tmp/peer && /tmp/peer/bin/pip install langwatch-scenario
    LITELLM_LOCAL_MODEL_COST_MAP=True LANGWATCH_ENDPOINT=http://127.0.0.1:9 SCENARIO_HEADLESS=true \\
        /tmp/peer/bin/python benchmarks/peer_scenario.py 32 96

Each conversation is what bench_scale's is: an instant agent, a user simulator for exactly 3 turns
and a judge (``UserSimulatorAgent`` and ``JudgeAgent`` through litellm, ``openai/`` models with
``api_base`` on a fake OpenAI-compatible server on 127.0.0.1 that answers every call after
``--latency`` seconds, 2,000 ms). The fake is ``--fake wide`` (default: one asyncio loop on a
thread, benchmarks/_wide_http.py, standard library only, as bench_scale's Gemini fake) or
``--fake threaded`` (a thread per connection, 512 connections waiting to be accepted: the fake
of the tables before issue 42, unfair to the peer at 1,000 at once). Scenario's judge gives its
verdict on every criterion in one call at the end, so a conversation makes 4 calls, all on its
critical path (3 user turns, the verdict): the same critical path as bench_scale's (3 simulator
calls, then the last turn's judge round). The K conversations run at once with ``asyncio.gather`` in one process (what
pytest-asyncio-concurrent does for Scenario's pytest tests). The environment above keeps litellm
from fetching its price list and Scenario from reporting to LangWatch: nothing leaves the machine.

Printed per K: wall (interpreter start to exit, as bench_scale's), the import of ``scenario``
(its start-up), calls per conversation, the most calls in flight, passed conversations, and the
wide fake's CPU (its loop thread's).
"""

from __future__ import annotations

import time

T0 = time.perf_counter()

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from _wide_http import Connection, WideServer, json_response  # noqa: E402

LATENCY = {"s": 2.0}
STATS: dict[str, Any] = {"in_flight": 0, "max_in_flight": 0, "requests": 0}
LOCK = threading.Lock()


def _value(schema: dict[str, Any]) -> Any:
    """A value matching a tool's JSON schema: the first of an enum ("passed"), objects filled in."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        return {k: _value(v) for k, v in schema.get("properties", {}).items()}
    return {"array": [], "boolean": True, "integer": 1, "number": 1}.get(str(kind), "ok")


def _completion(body: dict[str, Any]) -> dict[str, Any]:
    """``/v1/chat/completions``: text for the user simulator, a ``finish_test`` call for the judge."""
    tools = body.get("tools") or []
    message: dict[str, Any] = {"role": "assistant", "content": "Hi, I need help with my order."}
    reason = "stop"
    if tools:
        names = [t["function"]["name"] for t in tools]
        pick = next((n for n in ("finish_test", "make_verdict") if n in names), names[0])
        args = _value(tools[names.index(pick)]["function"].get("parameters", {}))
        message = {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": pick, "arguments": json.dumps(args)}}]}
        reason = "tool_calls"
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "fake"), "choices": [{"index": 0, "message": message, "finish_reason": reason}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


class _Handler(BaseHTTPRequestHandler):
    """``/v1/chat/completions``: text for the user simulator, a ``finish_test`` call for the judge."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # http.server's name
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        with LOCK:
            STATS["in_flight"] += 1
            STATS["requests"] += 1
            STATS["max_in_flight"] = max(STATS["max_in_flight"], STATS["in_flight"])
        try:
            time.sleep(LATENCY["s"])
            data = json.dumps(_completion(body)).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        finally:
            with LOCK:
                STATS["in_flight"] -= 1


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512


class _WideServer(WideServer):
    """The same answers from one event loop, each ``latency`` seconds after its request."""

    requests = 0

    def arrived(self, connection: Connection, method: str, target: str, headers: dict[str, str], raw: bytes,
                close: bool) -> None:
        body = json.loads(raw or b"{}")
        self.requests += 1  # only the loop's thread counts
        self.answer_later(connection, close, lambda: json_response(200, _completion(body), close))


def serve(kind: str) -> tuple[str, Any]:
    """The fake's base URL, and the wide one (None for the threaded one, which keeps STATS)."""
    if kind == "wide":
        wide = _WideServer(LATENCY["s"]).start()
        return f"{wide.base_url}/v1", wide
    server = _Server(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/v1", None


def run(k: int, kind: str) -> str:
    """One measurement in this process (a fresh one per K: the import is part of the wall)."""
    base, wide = serve(kind)
    import scenario

    imported = time.perf_counter()

    class Instant(scenario.AgentAdapter):  # type: ignore[misc]
        async def call(self, input: Any) -> str:
            return "Sure, happy to help. Done."

    async def one(i: int) -> Any:
        llm = {"model": "openai/fake-model", "api_base": base, "api_key": "fake"}
        return await scenario.run(
            name=f"conversation {i}", description="A customer wants help with an order.",
            agents=[Instant(), scenario.UserSimulatorAgent(**llm),
                    scenario.JudgeAgent(**llm, criteria=["The agent is polite"])],
            script=[scenario.user(), scenario.agent(), scenario.user(), scenario.agent(), scenario.user(),
                    scenario.agent(), scenario.judge()],
        )

    async def every() -> list[Any]:
        return await asyncio.gather(*(one(i) for i in range(k)))

    results = asyncio.run(every())
    wall = time.perf_counter() - T0
    passed = sum(1 for r in results if r.success)
    requests, in_flight = (wide.requests, wide.max_in_flight) if wide else (STATS["requests"], STATS["max_in_flight"])
    fake_cpu = f"{wide.cpu_s():.2f}s" if wide else "-"
    return (f"K={k} wall={wall:.1f} import={imported - T0:.1f} calls/conv={requests / k:.2f} "
            f"max_in_flight={in_flight} passed={passed}/{k} fake={kind} fake_cpu={fake_cpu}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("k", type=int, nargs="+", help="conversations at once (one process per value)")
    parser.add_argument("--latency", type=float, default=2.0)
    parser.add_argument("--fake", choices=["threaded", "wide"], default="wide",
                        help="wide: one asyncio loop (default); threaded: a thread per connection, as before issue 42")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a child process: one K
    args = parser.parse_args()
    LATENCY["s"] = args.latency
    if args.one:
        print(run(args.k[0], args.fake))
        return 0
    for k in args.k:
        proc = subprocess.run([sys.executable, __file__, str(k), "--one", "--latency", str(args.latency),
                               "--fake", args.fake], capture_output=True, text=True, timeout=900)
        line = next((ln[ln.index("K="):] for ln in reversed(proc.stdout.splitlines()) if "K=" in ln), None)
        print(line or f"K={k}: failed ({proc.returncode})\n{proc.stderr[-2000:]}")  # (after Scenario's spinner)
    print(f"load {os.getloadavg()[0]:.1f} (1 min) on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
