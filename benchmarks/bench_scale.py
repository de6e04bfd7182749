"""Scale benchmark (issue 17): many conversations at once, in one process and with ``-n``.

    python benchmarks/bench_scale.py                 # ~4 min at 2,000 ms per call
    python benchmarks/bench_scale.py --quick         # ~1 min: fewer conversations, 200 ms per call

A throwaway project holds one simulated scenario of exactly 3 turns (the agent is instant and calls
``finish`` on its 3rd reply) with one soft criterion on every response (one judge call per agent
turn), run K times (``--fabtest-iterations K``). Judge and simulator talk through the real
google-genai client to a fake Gemini that answers every call after ``--latency`` seconds
(2,000 ms). The fake is ``--fake wide`` (default: benchmarks/_wide_fake.py, one asyncio loop: any
number of calls wait their latency at once, on a timer, for under a millisecond of CPU
each, as a provider's CPU is not the machine's under test) or ``--fake threaded``
(``fabtest.testing.FakeGemini``, a thread per connection: the fake of the tables before issue 42,
which at 5,000 at once served at most 1,279 calls at once and took 59 s of the 2 cores). Each
row prints the fake's own CPU (the benchmark process's, over the row's pytest run), so a reader
sees whether it was the bottleneck. Each row is one pytest run:

* ``sequential``: one conversation at a time, on a few iterations (``--seq-k``); its time per
  conversation is what the speed-up of every other row is measured against.
* ``concurrency N``: ``--fabtest-concurrency N`` (issue 17 item 1), K conversations;
* ``-n 2 x N``: two xdist workers with N each.

Columns:

* **wall**: the whole pytest process, interpreter start to exit.
* **start-up**: the same command with every scenario deselected (``-k``): what no concurrency hides.
* **critical path**: one conversation's calls that must follow one another: its 3 simulator calls
  and the judge round of its last turn, each at the cost of a plain google-genai call to the same
  fake (measured in this run). K conversations at N at once cannot take less than
  ``ceil(K / N)`` times that.
* **wall / (crit + start-up)**: the targets' ratio (96 at once: at most 1.5x; 32: at most 1.3x).
* **speed-up**: sequential seconds per conversation (wall minus start-up, over its K) times K,
  divided by the row's wall minus start-up: the work sequential fabtest would need, over the time taken.
* **in flight**: the most requests the fake served at once (``max_concurrency`` caps it: the project
  sets it to 512, above every row's need (96 conversations judge 3 responses each at once: 288), so
  the limiter is not what is measured).
* **peak RSS**: the largest pytest process (``ru_maxrss``); **RSS/conv**: that process's peak above
  its resident size when its first scenario started (with httpx, the LLM clients' library, loaded), over the
  conversations it had in flight (target: at most 1 MiB). That includes what the first scenario
  loads once (fabtest's engine, the first call: several MiB), so at low N it overstates;
  **marginal**: the growth of that peak from the row above (same workers) per conversation added
  in flight, the cost of one more conversation.
* **CPU ms/call**, **CPU ms/conv**: the pytest processes' CPU (the controller's and workers'
  included) less the start-up row's, over the LLM calls made, and over the conversations.
* **auto workers**: rows written ``autoxCONCxK`` run without ``-p no:xdist``, so fabtest's
  automatic workers (docs/concurrency.md) decide whether to spread the run over processes.
* **judge/turn**: judge calls per agent turn (target 1.00); **calls ok**: every conversation made
  exactly 3 simulator and 3 judge calls (none made twice).
* **fake CPU**: this process's CPU while the row's pytest ran (the fake's: the main thread only
  waits for pytest), in seconds and per LLM call; the fake shares the cores with what it measures.

Then the issue's sequential target: one scenario repeated 32 times at 200 ms per call, sequential:
(wall minus start-up) over the simulator calls' critical path (at most 1.05x; 1.10x with the
simulator-fidelity review on). The judge and simulator no longer load google-genai, so nothing a
run that calls an LLM loads is left out of the start-up run any more but its HTTP clients.

Without ``--fabtest-concurrency`` in the fabtest under test the concurrency rows are left out and
said so. The machine's load (``os.getloadavg``) is printed with the table: on a shared machine
every number waits for the other jobs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).parent))
from _common import (
    SIM_PYPROJECT,
    all_criteria_pass,
    clean_env,
    finishing_agent,
    kind_of,
    plain_call_s,
    run_pytest,
    write,
)
from _wide_fake import WideFake

from fabtest.demo.offline_llm import answer as offline_answer
from fabtest.testing import FakeGemini, gemini_wire
from fabtest.testing.fake_gemini import FakeRequest

TURNS = 3

FEATURE = '''
Feature: Scale benchmark
  Background:
    Given the criterion "polite" means "The agent is polite"
    And the simulation takes at most 5 turns
    And the simulation stops when the agent calls "finish"

  Scenario: Three turns
    Given a simulated user with the goal "Get the task done"
    When the simulated user talks to the agent
    Then every response should satisfy "polite"
'''

# Each pytest process appends "<pid> <worker> <RSS kB at its first scenario> <peak RSS kB>" to $BENCH_RSS.
RSS_CONFTEST = '''
import os
import resource

_PATH = os.environ.get("BENCH_RSS")
_BASE = {}


def _rss_kb():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


_SLOWEST = [0.0]  # the longest logical LLM call (retries included), as the judge or simulator waited for it


def pytest_configure(config):
    import time

    import fabtest.llm.gemini as gemini

    plain = gemini.complete_validated

    def timed(*args, **kwargs):
        started = time.monotonic()
        try:
            return plain(*args, **kwargs)
        finally:
            _SLOWEST[0] = max(_SLOWEST[0], time.monotonic() - started)

    gemini.complete_validated = timed


def pytest_runtest_logstart(nodeid, location):
    if "kb" not in _BASE:
        import httpx  # noqa: F401 - the baseline has the LLM clients' library loaded (the warm-up may still be at it);
        # not google-genai: the judge and simulator no longer load it, and importing it here cost every process 0.8 s

        _BASE["kb"] = _rss_kb()


def pytest_unconfigure(config):
    if _PATH and "kb" in _BASE:
        who = getattr(config, "workerinput", {}).get("workerid", "main")
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        with open(_PATH, "a", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()} {who} {_BASE['kb']} {peak} {_SLOWEST[0]:.3f}\\n")
'''

Fake = FakeGemini | WideFake
FAKES = {"wide": "benchmarks/_wide_fake.py, one asyncio loop", "threaded": "FakeGemini, a thread per connection"}


def handler(request: FakeRequest) -> Any:
    """Plays a user for exactly TURNS turns and passes every criterion; instant (the fake holds the latency)."""
    kind = kind_of(request)
    if kind == "simulator":
        said = request.prompt.count("You: ")
        return {"message": f"Message {said + 1} of my request.", "goal_complete": False}
    if kind == "criteria":
        return all_criteria_pass(request)
    return offline_answer(request)


def make_project(root: Path) -> None:
    write(root, "pyproject.toml", SIM_PYPROJECT.replace('results_dir = "results"',
                                                       'results_dir = "results"\nmax_concurrency = 8192'))
    write(root, "benchagent.py", finishing_agent(TURNS))
    write(root, "features/scale.feature", FEATURE)
    write(root, "conftest.py", RSS_CONFTEST)


def has_concurrency(root: Path, env: dict[str, str]) -> bool:
    """The fabtest under test knows ``--fabtest-concurrency`` (issue 17 item 1)."""
    _, proc = run_pytest(root, ["--help"], env, timeout=120)
    return "--fabtest-concurrency" in proc.stdout


def _args(workers: int, concurrency: int) -> list[str]:
    """``workers``: that many ``-n`` workers; 0: one process; -1: whatever fabtest's automatic
    workers decide (docs/concurrency.md, "every core, automatically")."""
    if workers < 0:
        return ["--fabtest-concurrency", str(concurrency)]
    args = ["-n", str(workers)] if workers else ["-p", "no:xdist"]
    return args + (["--fabtest-concurrency", str(concurrency)] if concurrency > 1 else [])


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def startup(root: Path, env: dict[str, str], workers: int, concurrency: int) -> tuple[float, float]:
    """(wall, CPU) of the same command with every scenario deselected."""
    cpu = _children_cpu()
    wall, proc = run_pytest(root, ["features", "-k", "not Three", "--fabtest-no-results", *_args(workers, concurrency)],
                            env)
    if proc.returncode != 5:  # pytest: no tests ran
        raise SystemExit(f"start-up run failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    return wall, _children_cpu() - cpu


def make_fake(kind: str, latency: float) -> Fake:
    """The fake Gemini of ``--fake``, answering with :func:`handler` after ``latency`` seconds."""
    if kind == "threaded":
        gemini_wire.Handler.disable_nagle_algorithm = True  # as bench_suite: the fake answers like a real server
        return FakeGemini(handler=handler, latency=latency)
    return WideFake(handler=handler, latency=latency)


def _own_cpu() -> float:
    """This process's CPU: the fake's, while a row's pytest runs (the main thread only waits for it)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_row(root: Path, fake: Fake, env: dict[str, str], *, label: str, k: int, workers: int,
            concurrency: int) -> dict[str, Any]:
    fake.reset()
    rss_file = root / f"rss_{label.replace(' ', '_')}.txt"
    rss_file.unlink(missing_ok=True)
    exp_id = f"bench_{label.replace(' ', '_')}"
    args = ["features", "--fabtest-iterations", str(k), "--fabtest-experiment-id", exp_id, "--fabtest-progress", "off",
            *_args(workers, concurrency)]
    cpu, fake_cpu = _children_cpu(), _own_cpu()
    wall, proc = run_pytest(root, args, {**env, "BENCH_RSS": str(rss_file)})
    cpu, fake_cpu = _children_cpu() - cpu, _own_cpu() - fake_cpu
    if proc.returncode != 0:
        raise SystemExit(f"{label}: pytest failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}")
    results = json.loads((root / "results" / f"{exp_id}.json").read_text())["scenario_results"]
    assert len(results) == k and all(r["passed"] for r in results), f"{label}: every scenario should pass"
    kinds: dict[str, int] = {}
    for request in fake.requests:
        kinds[kind_of(request)] = kinds.get(kind_of(request), 0) + 1
    processes = [line.split() for line in rss_file.read_text().splitlines()] if rss_file.exists() else []
    peak_kb = max((int(p[3]) for p in processes), default=0)
    per_process = max(1, workers)
    in_flight_per_process = min(concurrency, math.ceil(k / per_process))
    above = max((int(p[3]) - int(p[2]) for p in processes), default=0)
    start_wall, start_cpu = startup(root, env, workers, concurrency)
    calls = len(fake.requests)
    return {"label": label, "k": k, "workers": workers, "concurrency": concurrency, "wall": wall,
            "startup": start_wall, "calls": calls, "cpu_per_call_ms": (cpu - start_cpu) * 1000 / max(1, calls),
            "fake_cpu": fake_cpu,
            "slowest_call": max((float(p[4]) for p in processes if len(p) > 4), default=0.0),
            "waves": math.ceil(k / (concurrency * max(1, workers))),
            "sim": kinds.get("simulator", 0), "judge": kinds.get("criteria", 0), "other": kinds.get("other", 0),
            "in_flight": fake.max_in_flight, "peak_mib": peak_kb / 1024, "above_kib": above,
            "conv_in_flight": in_flight_per_process, "rss_per_conv_kib": above / max(1, in_flight_per_process)}


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f} (1 min) / {five:.1f} (5 min) on {os.cpu_count()} cores"


def print_target(row: dict[str, Any], call_200: float) -> None:
    """The sequential target's line: (wall - start-up) over the simulator calls' critical path."""
    path = 32 * TURNS * call_200
    print(f"Sequential target: 32 iterations at 200 ms per call: wall {row['wall']:.2f} s, start-up "
          f"{row['startup']:.2f} s, simulator critical path {path:.2f} s: (wall - start-up)/path = "
          f"{(row['wall'] - row['startup']) / path:.3f}x (target <= 1.05x; <= 1.10x with the fidelity review on); "
          f"{row['other']} fidelity reviews (and other calls) beside {row['sim']} simulator and {row['judge']} "
          "judge calls")


def target_only(kind: str) -> int:
    """The issue's sequential target alone: one simulated scenario 32 times at 200 ms per call, each
    conversation reviewed for fidelity by the judge (the default ``simulator_fidelity = "judge"``)."""
    with tempfile.TemporaryDirectory(prefix="fabtest-bench-scale-") as tmp, make_fake(kind, 0.2) as fake:
        root = Path(tmp)
        make_project(root)
        env = clean_env(fake.env())
        call_200 = plain_call_s(fake)
        row = run_row(root, fake, env, label="target 200ms", k=32, workers=0, concurrency=1)
    print_target(row, call_200)
    print(load())
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=2.0, help="seconds before the fake answers each call")
    parser.add_argument("--seq-k", type=int, default=4, help="conversations of the sequential row")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: 50 ms per call, few conversations, no 32-iteration target run")
    parser.add_argument("--rows", default=None,
                        help="comma-separated rows to run, as concurrency[xK], n2xCONCxK (-n 2) or autoxCONCxK "
                             "(fabtest's automatic workers) (default: the issue's)")
    parser.add_argument("--skip-target", action="store_true", help="leave out the 200 ms sequential target run")
    parser.add_argument("--target-only", action="store_true",
                        help="only the 200 ms sequential target run (its fidelity reviews overlapped, issue 42 item 2)")
    parser.add_argument("--fake", choices=sorted(FAKES), default="wide",
                        help="wide: one asyncio loop (default); threaded: FakeGemini, as the tables before issue 42")
    args = parser.parse_args(argv)
    if args.target_only:
        return target_only(args.fake)
    if args.quick:
        args.latency = min(args.latency, 0.05)
        args.seq_k = min(args.seq_k, 1)
        args.skip_target = True
    rows_spec = args.rows or ("2x2" if args.quick else "8x32,32x32,96x96,n2x48x96")
    out: list[dict[str, Any]] = []
    notes: list[str] = []
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="fabtest-bench-scale-") as tmp, \
            make_fake(args.fake, args.latency) as fake:
        root = Path(tmp)
        make_project(root)
        env = clean_env(fake.env())
        call_s = plain_call_s(fake)
        concurrent = has_concurrency(root, env)
        out.append(run_row(root, fake, env, label="sequential", k=args.seq_k, workers=0, concurrency=1))
        for spec in rows_spec.split(","):
            parts = spec.split("x")
            workers = -1 if parts[0] == "auto" else int(parts[0][1:]) if parts[0].startswith("n") else 0
            if workers:
                parts.pop(0)
            concurrency, k = int(parts[0]), int(parts[1] if len(parts) > 1 else parts[0])
            if concurrency > 1 and not concurrent:
                notes.append(f"{spec}: skipped (this fabtest has no --fabtest-concurrency)")
                continue
            label = ("auto workers" if workers < 0 else f"-n {workers} x {concurrency}" if workers
                     else f"concurrency {concurrency}") + (f" x {concurrency}" if workers < 0 else "")
            out.append(run_row(root, fake, env, label=label, k=k, workers=workers, concurrency=concurrency))
        target = None
        if not args.skip_target:
            fake.latency = 0.2
            call_200 = plain_call_s(fake)
            row = run_row(root, fake, env, label="target 200ms", k=32, workers=0, concurrency=1)
            target = (row, call_200)
    seq = out[0]
    seq_per_conv = (seq["wall"] - seq["startup"]) / seq["k"]
    critical = (TURNS + 1) * call_s  # 3 simulator calls and the last turn's judge round
    table = []
    previous: dict[int, dict[str, Any]] = {}  # workers -> the row before, for the marginal RSS
    for r in out:
        before = previous.get(r["workers"])
        added = r["conv_in_flight"] - before["conv_in_flight"] if before else 0
        marginal = f"{(r['above_kib'] - before['above_kib']) / added:.0f}" if before and added > 0 else "-"
        previous[r["workers"]] = r
        bound = r["waves"] * critical
        turns = r["k"] * TURNS
        table.append([
            r["label"], r["k"], f"{r['wall']:.1f}", f"{r['startup']:.1f}", f"{bound:.1f}",
            f"{r['wall'] / (bound + r['startup']):.2f}x",
            f"{seq_per_conv * r['k'] / max(1e-9, r['wall'] - r['startup']):.1f}x",
            r["in_flight"], f"{r['peak_mib']:.0f}", f"{r['rss_per_conv_kib']:.0f}", marginal,
            f"{r['judge'] / turns:.2f}", "yes" if r["sim"] == turns and r["judge"] == turns else "NO",
            f"{r['calls'] / max(1e-9, r['wall'] - r['startup']):.0f}", f"{r['cpu_per_call_ms']:.1f}",
            f"{r['cpu_per_call_ms'] * r['calls'] / max(1, r['k']):.1f}",
            f"{r['slowest_call']:.2f} ({r['slowest_call'] / args.latency:.2f}x)",
            f"{r['fake_cpu']:.2f} ({r['fake_cpu'] * 1000 / max(1, r['calls']):.2f})",
        ])
    print(f"Scale: a simulated {TURNS}-turn scenario, 1 soft criterion per turn, every LLM call answered after "
          f"{args.latency * 1000:.0f} ms by the {args.fake} fake ({FAKES[args.fake]}; a plain google-genai call: "
          f"{call_s * 1000:.0f} ms), instant agent; "
          f"critical path of one conversation {critical:.2f} s; {load()} at the end "
          f"({time.time() - started:.0f} s in all)")
    print(tabulate(table, headers=["run", "K", "wall s", "start-up s", "crit path s", "wall/(crit+start-up)",
                                   "speed-up", "max in flight", "peak RSS MiB", "RSS/conv KiB", "marginal KiB",
                                   "judge/turn",
                                   "calls ok", "calls/s", "CPU ms/call", "CPU ms/conv", "p100 call s",
                                   "fake CPU s (ms/call)"]))
    for note in notes:
        print(note)
    if target is not None:
        print_target(*target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
