"""The real Gemini CLI as the agent: per-turn time over ACP vs one CLI process per turn.

    python benchmarks/bench_acp.py [--turns 4] [--latency 0.2]

A 4-turn conversation against FakeGemini on 127.0.0.1 (every model call answered after
``--latency`` seconds), driven side by side in one run by :class:`fabtest.agents.cli_agent.CliAgent`
(a Node process per turn) and :class:`fabtest.agents.acp.AcpAgent` (one process, one session).
The ACP figures are split into start-up (process start, ``initialize``, ``session/new``: paid once
per scenario, inside the first turn) and the later turns. Needs ``gemini`` on PATH (or
``FABTEST_GEMINI_CLI``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tabulate import tabulate

from fabtest.agents.acp import AcpAgent
from fabtest.agents.cli_agent import CliAgent
from fabtest.conversation import Message
from fabtest.testing import FakeGemini

GEMINI = os.environ.get("FABTEST_GEMINI_CLI") or shutil.which("gemini")


def _env(home: Path, base_url: str) -> dict[str, str]:
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps({
        "security": {"auth": {"selectedType": "gemini-api-key"}}, "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False}, "general": {"disableAutoUpdate": True, "disableUpdateNag": True}}))
    return {"HOME": str(home), "GEMINI_API_KEY": "fake-key", "GOOGLE_GEMINI_BASE_URL": base_url,
            "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9",
            "NO_PROXY": "127.0.0.1,localhost", "NO_COLOR": "1"}


def _conversation(agent: object, turns: int) -> list[float]:
    messages: list[Message] = []
    times = []
    for number in range(1, turns + 1):
        messages.append(Message("user", f"Turn {number}: tell me about venue {number}."))
        started = time.perf_counter()
        reply = agent.chat(messages)  # type: ignore[attr-defined]
        times.append(time.perf_counter() - started)
        messages.append(Message("agent", reply.text))
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds FakeGemini waits per call")
    parser.add_argument("--quick", action="store_true", help="smoke test in seconds (tests/benchmarks runs it)")
    args = parser.parse_args()
    if args.quick:
        args.turns, args.latency = 2, 0.0
    if not GEMINI:
        print("the Gemini CLI is not installed: npm install -g @google/gemini-cli@0.61", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="fabtest-bench-acp-"))
    try:
        with FakeGemini(default_text="Spreeblick Loft seats 12 and is free on 12 March.", latency=args.latency) as fake:
            env = _env(root / "home", fake.base_url)
            (root / "ws").mkdir()
            cli = _conversation(CliAgent(executable=GEMINI, cwd=root / "ws", env=env, timeout_s=300), args.turns)
            acp_agent = AcpAgent([GEMINI, "--acp", "--skip-trust", "-m", "gemini-2.5-flash", "--approval-mode", "yolo"],
                                 cwd=root / "ws", env=env, timeout_s=300)
            with acp_agent.around():
                acp = _conversation(acp_agent, args.turns)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    cli_mean, acp_mean = statistics.mean(cli), statistics.mean(acp)
    later = statistics.mean(acp[1:]) if len(acp) > 1 else acp[0]
    rows = [
        ["per-turn CLI (a process per turn)", f"{cli_mean:.2f} s", f"{statistics.mean(cli[1:]):.2f} s", "1.00x"],
        ["ACP (one process, one session)", f"{acp_mean:.2f} s", f"{later:.3f} s", f"{acp_mean / cli_mean:.2f}x"],
    ]
    print(f"{args.turns}-turn conversation, FakeGemini latency {args.latency:g} s per call, Gemini CLI at {GEMINI}")
    print(tabulate(rows, headers=["adapter", "mean per turn", "mean of turns 2+", "vs per-turn CLI"]))
    print(f"ACP first turn (start-up included): {acp[0]:.2f} s; later turns {later / cli_mean:.3f}x "
          f"the per-turn CLI's mean; whole conversation {sum(acp):.2f} s vs {sum(cli):.2f} s "
          f"({sum(cli) / sum(acp):.1f}x faster)")
    print("raw (s): cli", [round(t, 3) for t in cli], "acp", [round(t, 3) for t in acp])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
