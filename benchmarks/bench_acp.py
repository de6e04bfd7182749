"""The real Gemini CLI as the agent: per-turn time over ACP vs one CLI process per turn.

    python benchmarks/bench_acp.py [--turns 4] [--latency 0.2]
    python benchmarks/bench_acp.py --playbook [--steps 4] [--latencies 0.2,2] [--reps 3] [--baseline-src DIR]

A 4-turn conversation against FakeGemini on 127.0.0.1 (every model call answered after
``--latency`` seconds), driven side by side in one run by :class:`fabtest.agents.cli_agent.CliAgent`
(a Node process per turn) and :class:`fabtest.agents.acp.AcpAgent` (one process, one session).
The ACP figures are split into start-up (process start, ``initialize``, ``session/new``: paid once
per scenario, inside the first turn) and the later turns. Needs ``gemini`` on PATH (or
``FABTEST_GEMINI_CLI``).

``--playbook`` measures what a user waits for instead (issue 42's "the 4-step ACP playbook under
2.5x one CLI run"): the wall time of ``fabtest run`` (its own process, the default agent: the
Gemini CLI over ACP, pre-flight and experiment file included) on a ``--steps``-step playbook whose
every step is judged, against the wall time of one ``gemini -m gemini-2.5-flash -p PROMPT`` run
(the same model pin, so neither asks the CLI's router), alternated, ``--reps`` times per latency,
medians. The load average is printed before and after: the ratio is only as good as the machine's quiet.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tabulate import tabulate

from fabtest.agents.acp import AcpAgent
from fabtest.agents.cli_agent import CliAgent
from fabtest.conversation import Message
from fabtest.testing import FakeGemini
from fabtest.testing.fake_gemini import FakeRequest

sys.path.insert(0, str(Path(__file__).parent))
from _common import all_criteria_pass, kind_of

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


REPLY = "Spreeblick Loft seats 12 and is free on 12 March."


def _answer(request: FakeRequest) -> object:
    """The judge's verdicts pass; every other call (the CLI's) gets the venue sentence."""
    return all_criteria_pass(request) if kind_of(request) == "criteria" else REPLY


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else "?"


def _timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=900,
                          stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:3])} ... exited {done.returncode}:\n"
                         f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return wall


def playbook_mode(steps: int, latencies: list[float], reps: int, baseline: str | None = None, *,
                  quick: bool = False) -> int:
    """``fabtest run`` of a ``steps``-step playbook over ACP vs one ``gemini -p`` run (module docstring).
    ``baseline``: another tree's ``src`` (``git archive main src | tar -x -C DIR``), run in turn with this
    one on every repetition (``PYTHONPATH``), so a before/after comparison shares the machine's load."""
    script = Path(sys.executable).with_name("fabtest")  # the console script, as a user runs it
    fabtest = [str(script)] if script.exists() else [sys.executable, "-m", "fabtest.cli"]
    trees = {"this tree": {}, **({"baseline": {"PYTHONPATH": baseline}} if baseline else {})}
    rows, before = [], _load()
    for latency in latencies:
        root = Path(tempfile.mkdtemp(prefix="fabtest-bench-acp-pb-"))
        try:
            with FakeGemini(handler=_answer, latency=latency) as fake:
                env = {**{k: v for k, v in os.environ.items() if not k.startswith(("FABTEST_", "GEMINI_", "GOOGLE_"))},
                       **fake.gemini_cli_env(root / "home"), "FABTEST_GEMINI_CLI": str(GEMINI)}
                project = root / "project"
                project.mkdir()
                (project / "pyproject.toml").write_text("[tool.fabtest]\nresults_dir = \"results\"\n")
                (project / "pb.playbook.json").write_text(json.dumps({
                    "name": "bench_acp", "agent_model": "gemini-2.5-flash", "timeout": 300,
                    "steps": [{"user_input": f"Step {n}: tell me about venue {n}.",
                               "expected_outcome": "The agent names a venue"} for n in range(1, steps + 1)]}))
                # the first run on a machine asks the CLI whether it speaks ACP (a CLI start more); later
                # runs find the answer kept (agents/gemini_probe.py), as every run after a user's first does
                cold = None if quick else _timed([*fabtest, "run", "pb.playbook.json"], project, env)
                cli: list[float] = []
                runs: dict[str, list[float]] = {name: [] for name in trees}
                for _ in range(reps):  # alternated, so a burst of load hits each
                    cli.append(_timed([str(GEMINI), "--skip-trust", "-m", "gemini-2.5-flash", "-p",
                                       "Step 1: tell me about venue 1."], project, env))
                    for name, extra in trees.items():
                        fake.reset()
                        runs[name].append(_timed([*fabtest, "run", "pb.playbook.json"], project, {**env, **extra}))
                        kinds = [kind_of(r) for r in fake.requests]
                calls = f"{kinds.count('criteria')} judge + {len(kinds) - kinds.count('criteria')} other"
        finally:
            shutil.rmtree(root, ignore_errors=True)
        cli_s = statistics.median(cli)
        for name, run in runs.items():
            run_s = statistics.median(run)
            rows.append([f"{latency:g} s", name, f"{cli_s:.2f} s", f"{run_s:.2f} s", f"{run_s / cli_s:.2f}x",
                         f"{cold:.2f} s ({cold / cli_s:.2f}x)" if cold and name == "this tree" else "", calls,
                         " ".join(f"{c:.1f}/{r:.1f}" for c, r in zip(cli, run, strict=True))])
    print(f"{steps}-step playbook (fabtest run, Gemini CLI over ACP) vs one gemini -p run, median of {reps}; "
          f"Gemini CLI at {GEMINI}")
    print(tabulate(rows, headers=["latency per call", "fabtest", "gemini -p", "fabtest run", "ratio", "first run",
                                  "calls in a run", "each rep (cli/run s)"]))
    print(f"load average before: {before}; after: {_load()}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds FakeGemini waits per call")
    parser.add_argument("--playbook", action="store_true", help="fabtest run of a playbook vs one gemini -p run")
    parser.add_argument("--steps", type=int, default=4, help="--playbook: the playbook's steps")
    parser.add_argument("--latencies", default="0.2,2", help="--playbook: comma-separated seconds per call")
    parser.add_argument("--reps", type=int, default=3, help="--playbook: repetitions per latency (median)")
    parser.add_argument("--baseline-src", default=None, metavar="DIR",
                        help="--playbook: also time the fabtest of this src directory, in turn (before/after)")
    parser.add_argument("--quick", action="store_true", help="smoke test in seconds (tests/benchmarks runs it)")
    args = parser.parse_args()
    if args.quick:
        args.turns, args.latency = 2, 0.0
    if not GEMINI:
        print("the Gemini CLI is not installed: npm install -g @google/gemini-cli@0.61", file=sys.stderr)
        return 2
    if args.playbook or args.quick:
        playbook_mode(2 if args.quick else args.steps,
                      [0.0] if args.quick else [float(x) for x in args.latencies.split(",")],
                      1 if args.quick else args.reps, args.baseline_src, quick=args.quick)
        if args.playbook:
            return 0
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
