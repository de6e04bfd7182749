"""Soft judging off the critical path: one simulated 3-turn scenario x 16 iterations, 200 ms per LLM call.

    python benchmarks/bench_soft.py [--iterations 16] [--latency 0.2] [--workers 1] [--fabtest-src PATH]

The scenario of issue 11: a simulated user (goal only), an instant agent that calls ``finish`` on
its 3rd reply (the stop condition), and two ``every response should satisfy`` criteria declared
after the conversation, so their last judge round is due when the conversation is over. Every
LLM call (simulator and judge) waits ``latency`` in a FakeGemini handler.

Critical path: the scenario's 3 simulator calls, each counted at the cost of a plain google-genai
``generate_content`` call to the same server, measured in the same run (median of 5), times the
iterations, divided by the workers. ``wall`` is the pytest process from start to exit; ``run`` is
``wall`` minus the same project's ``--collect-only`` (start-up and collection cancel out);
``LLM span`` runs from the first LLM call's arrival at the fake to the last answer (start-up, the
google-genai import and the experiment's writing are outside it: the least noisy measure).
``--fabtest-src`` runs another checkout's fabtest (for example the main branch) for a before/after.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).parent))
import bench_suite  # noqa: E402
from _common import SIM_PYPROJECT, clean_env, finishing_agent, kind_of, plain_call_s, run_pytest, write  # noqa: E402

from fabtest.testing import FakeGemini, gemini_wire  # noqa: E402
from fabtest.testing.fake_gemini import FakeRequest  # noqa: E402

TURNS = 3

AGENT = finishing_agent(TURNS)  # the agent calls finish on its 3rd reply

FEATURE = '''
Feature: Soft judging
  Scenario: Three turns
    Given the criterion "polite" means "The agent is polite"
    And the criterion "concise" means "The reply has at most three sentences"
    And a simulated user with the goal "Get the task done"
    And the simulation takes at most 5 turns
    And the simulation stops when the agent calls "finish"
    When the simulated user talks to the agent
    Then every response should satisfy "polite"
    And every response should satisfy "concise"
'''

PYPROJECT = SIM_PYPROJECT.replace("benchagent:build", "softagent:build")
SPAN: list[float] = []  # when each LLM call arrived and when it was answered


def handler(request: FakeRequest) -> Any:
    """bench_suite's user and judge (every criterion passes), timed at the fake."""
    SPAN.append(time.perf_counter())
    try:
        return bench_suite.handler(request)
    finally:
        SPAN.append(time.perf_counter())


def run_once(root: Path, fake: FakeGemini, env: dict[str, str], workers: int, iterations: int,
             call_s: float) -> dict[str, Any]:
    args = ["features", "--fabtest-iterations", str(iterations), "--fabtest-no-preflight"]
    if workers > 1:
        args += ["-n", str(workers)]
    collect_wall, _ = run_pytest(root, [*args, "--collect-only", "--fabtest-no-results"], env)
    fake.reset()
    SPAN.clear()
    exp_id = f"soft_n{workers}"
    wall, proc = run_pytest(root, [*args, "--fabtest-experiment-id", exp_id], env)
    if proc.returncode != 0:
        raise SystemExit(f"pytest failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}")
    doc = json.loads((root / "results" / f"{exp_id}.json").read_text())
    results = doc["scenario_results"]
    assert len(results) == iterations and all(r["turns"] == TURNS for r in results), [r["turns"] for r in results]
    kinds = [kind_of(r) for r in fake.requests]
    bound = iterations * TURNS * call_s / workers
    evaluated = doc["summary"]["evaluations"]["evaluated"]
    return {"workers": workers, "wall": wall, "span": max(SPAN) - min(SPAN), "collect": collect_wall, "bound": bound,
            "judge": kinds.count("criteria") + kinds.count("topic"), "sim": kinds.count("simulator"),
            "turns": iterations * TURNS, "evaluated": evaluated}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=16)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--workers", default="1", help="comma-separated worker counts (1 = no xdist)")
    parser.add_argument("--fabtest-src", default=None, help="run this src/ directory's fabtest (PYTHONPATH)")
    parser.add_argument("--as-shipped", action="store_true", help="keep FakeGemini's Nagle stall (see README)")
    parser.add_argument("--quick", action="store_true", help="smoke test in seconds (tests/benchmarks runs it)")
    args = parser.parse_args(argv)
    if args.quick:
        args.iterations, args.latency, args.workers = 1, 0.0, "1"
    bench_suite.LATENCY.update(simulator=args.latency, judge=args.latency)
    gemini_wire.Handler.disable_nagle_algorithm = not args.as_shipped
    rows = []
    with tempfile.TemporaryDirectory(prefix="fabtest-bench-soft-") as tmp, FakeGemini(handler=handler) as fake:
        root = Path(tmp)
        write(root, "pyproject.toml", PYPROJECT)
        write(root, "softagent.py", AGENT)
        write(root, "features/soft.feature", FEATURE)
        env = clean_env(fake.env())
        if args.fabtest_src:
            env["PYTHONPATH"] = str(Path(args.fabtest_src).resolve())
        call_s = plain_call_s(fake)
        for workers in (int(w) for w in args.workers.split(",")):
            rows.append(run_once(root, fake, env, workers, args.iterations, call_s))
    print(f"Soft judging: 1 simulated scenario x {TURNS} turns x {args.iterations} iterations, 2 soft criteria "
          f"per turn declared after the conversation, {args.latency * 1000:.0f} ms per LLM call "
          f"(a plain google-genai call: {call_s * 1000:.0f} ms), fabtest from {args.fabtest_src or 'this checkout'}")
    table = [["sequential" if r["workers"] == 1 else f"-n {r['workers']}", f"{r['wall']:.2f}", f"{r['collect']:.2f}",
              f"{r['bound']:.2f}", f"{r['wall'] / r['bound']:.2f}x", f"{(r['wall'] - r['collect']) / r['bound']:.2f}x",
              f"{r['span']:.2f}", f"{r['span'] / r['bound']:.2f}x",
              f"{r['judge']} ({r['judge'] / r['turns']:.2f}/turn)", r["sim"], r["evaluated"]] for r in rows]
    print(tabulate(table, headers=["run", "wall s", "collect-only s", "critical path s", "wall/path",
                                   "(wall-collect)/path", "LLM span s", "span/path", "judge calls", "simulator calls", "soft verdicts"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
