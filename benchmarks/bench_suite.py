"""Suite benchmark: N simulated 6-turn scenarios, 3 soft criteria per turn, 100 ms per LLM call.

    python benchmarks/bench_suite.py [--scenarios 50] [--latency 0.1] [--workers 1,2]

A throwaway project gets a deterministic agent (instant; calls the tool ``finish`` on its 6th
reply, which is the simulation's stop condition) and a scenario set of N records. The judge and
simulator talk to a FakeGemini with ``latency`` seconds per call whose handler plays the user for
exactly 6 turns and passes every criterion. pytest runs in a subprocess (sequentially and with
``-n 2``); the fake counts every call.

Critical-path lower bound: the agent is instant, so a scenario cannot be faster than its 6
sequential simulator calls, each counted at the cost of a plain google-genai call to the same
fake measured in the same run (as issue 11 defines it); summed over scenarios and divided by the
workers. ``start-up`` is the same command with ``--collect-only``; ``(wall-start-up)/bound`` is
what the run costs over the bound once pytest, the imports and collection are paid.
Naive LLM count: one judge call per criterion per turn plus one topic classification per turn.
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
from _common import (  # noqa: E402
    SIM_PYPROJECT,
    all_criteria_pass,
    clean_env,
    finishing_agent,
    kind_of,
    plain_call_s,
    run_pytest,
    write,
)

from fabtest.demo.offline_llm import answer as offline_answer  # noqa: E402
from fabtest.testing import (
    FakeGemini,  # noqa: E402
    gemini_wire,  # noqa: E402
)
from fabtest.testing.fake_gemini import FakeRequest  # noqa: E402

TURNS = 6
CRITERIA = 3


FEATURE = '''
Feature: Benchmark
  Background:
    Given the criterion "polite" means "The agent is polite"
    And the criterion "concise" means "The reply has at most three sentences"
    And the criterion "on_topic" means "The agent stays on topic"
    And the topics:
      | topic   | characteristic          | triggers                 | next    |
      | opening | The agent starts        | agent:/Step [12]:/       | working |
      | working | The agent collects info | agent:/Step [345]:/      | closing |
      | closing | The agent wraps up      | tool:finish              |         |
    And the simulation takes at most 8 turns
    And the simulation stops when the agent calls "finish"

  @scenario_set:bench
  Scenario: Six turns
    Given a simulated user from the scenario
    When the simulated user talks to the agent
    Then every response should satisfy "polite"
    And every response should satisfy "concise"
    And every response should satisfy "on_topic"
'''


LATENCY = {"simulator": 0.1, "judge": 0.1}


def handler(request: FakeRequest) -> Any:
    """Plays a user for exactly TURNS turns; passes every criterion; anything else: offline heuristics.

    The latency is applied here (per kind of call) rather than with ``FakeGemini(latency=...)`` so
    that ``--judge-latency`` can isolate the cost of waiting for the judge.
    """
    kind = kind_of(request)
    time.sleep(LATENCY["simulator"] if kind == "simulator" else LATENCY["judge"])
    if kind == "simulator":
        said = request.prompt.count("You: ")
        return {"message": f"Message {said + 1} of my request.", "goal_complete": False}
    if kind == "criteria":
        return all_criteria_pass(request)
    return offline_answer(request)


def make_project(root: Path, scenarios: int) -> None:
    write(root, "pyproject.toml", SIM_PYPROJECT)
    write(root, "benchagent.py", finishing_agent(TURNS))
    write(root, "features/bench.feature", FEATURE)
    records = [{"id": f"s{i:03d}", "goal": f"Get task {i} done"} for i in range(scenarios)]
    (root / "scenarios").mkdir(exist_ok=True)
    (root / "scenarios" / "bench.json").write_text(json.dumps(records), encoding="utf-8")


def run_once(root: Path, fake: FakeGemini, workers: int, scenarios: int, latency: float) -> dict[str, Any]:
    exp_id = f"bench_n{workers}"
    args = ["features", "--fabtest-experiment-id", exp_id]
    if workers > 1:
        args += ["-n", str(workers)]
    startup, _ = run_pytest(root, [*args, "--collect-only", "--fabtest-no-results"], clean_env(fake.env()))
    fake.reset()
    wall, proc = run_pytest(root, args, clean_env(fake.env()))
    if proc.returncode != 0:
        raise SystemExit(f"pytest failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}")
    doc = json.loads((root / "results" / f"{exp_id}.json").read_text())
    results = doc["scenario_results"]
    assert len(results) == scenarios and all(r["passed"] for r in results), "every scenario should pass"
    assert all(r["turns"] == TURNS for r in results), [r["turns"] for r in results]
    kinds: dict[str, int] = {}
    for r in fake.requests:
        kinds[kind_of(r)] = kinds.get(kind_of(r), 0) + 1
    durations = [r["duration_s"] for r in results]
    bound = scenarios * TURNS * latency / workers
    naive = scenarios * TURNS * CRITERIA + scenarios * TURNS  # criteria per turn + one topic call per turn
    judge = kinds.get("criteria", 0) + kinds.get("topic", 0)
    return {"workers": workers, "wall": wall, "bound": bound, "startup": startup, "ratio": wall / bound if bound else float("inf"),
            "sum_call_phase": sum(durations), "per_scenario": sum(durations) / scenarios,
            "sim_calls": kinds.get("simulator", 0), "judge_calls": judge, "naive": naive,
            "max_in_flight": fake.max_in_flight, "other": kinds.get("other", 0)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=50)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts (1 = no xdist)")
    parser.add_argument("--judge-latency", type=float, default=None, help="judge latency (default: --latency)")
    parser.add_argument("--as-shipped", action="store_true",
                        help="keep FakeGemini's Nagle/delayed-ACK stall (~40 ms per call, see README)")
    parser.add_argument("--quick", action="store_true", help="smoke test in seconds (tests/benchmarks runs it)")
    args = parser.parse_args(argv)
    if args.quick:
        args.scenarios, args.latency, args.workers = 1, 0.0, "1"
    LATENCY["simulator"] = args.latency
    LATENCY["judge"] = args.latency if args.judge_latency is None else args.judge_latency
    # FakeGemini writes the response headers and body in two send() calls without TCP_NODELAY, so
    # every answer waits for the client's delayed ACK (~40 ms on Linux). Real Gemini does not do
    # that; unless --as-shipped, switch Nagle off in this process (where the server runs).
    gemini_wire.Handler.disable_nagle_algorithm = not args.as_shipped
    rows = []
    with tempfile.TemporaryDirectory(prefix="fabtest-bench-") as tmp, FakeGemini(handler=handler) as fake:
        root = Path(tmp)
        make_project(root, args.scenarios)
        call_s = plain_call_s(fake)  # the critical path counts each simulator call at this cost
        for workers in (int(w) for w in args.workers.split(",")):
            rows.append(run_once(root, fake, workers, args.scenarios, call_s))
    turns = args.scenarios * TURNS
    table = [[(f"-n {r['workers']}") if r["workers"] > 1 else "sequential", f"{r['wall']:.2f}", f"{r['bound']:.2f}",
              f"{r['ratio']:.2f}x", f"{r['startup']:.2f}", f"{(r['wall'] - r['startup']) / r['bound']:.2f}x",
              f"{r['per_scenario'] * 1000:.0f}", f"{(r['per_scenario'] - TURNS * args.latency) * 1000:.0f}",
              r["sim_calls"], f"{r['judge_calls']} ({r['judge_calls'] / turns:.2f}/turn)", r["naive"],
              "yes" if r["judge_calls"] <= turns else "NO"] for r in rows]
    print(f"Suite: {args.scenarios} simulated scenarios x {TURNS} turns x {CRITERIA} soft criteria per turn, "
          f"simulator latency {LATENCY['simulator'] * 1000:.0f} ms, judge latency {LATENCY['judge'] * 1000:.0f} ms "
          f"per call (a plain google-genai call: {call_s * 1000:.0f} ms), instant agent, "
          f"FakeGemini {'as shipped (Nagle on)' if args.as_shipped else 'with TCP_NODELAY'}")
    print(tabulate(table, headers=["run", "wall s", "bound s", "wall/bound", "start-up s", "(wall-start-up)/bound", "call ms/scen",
                                   "over 6 sim calls ms", "simulator calls", "judge calls", "naive judge calls",
                                   "<=1 judge/turn"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
