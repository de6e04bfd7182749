"""Parallel benchmark: does ``-n N`` divide a suite's critical path by N?

    python benchmarks/bench_parallel.py [--iterations 64] [--latency 0.2] [--workers 0,1,2,4,8] [--trace]

A throwaway project holds one simulated scenario of exactly 3 turns (the agent is instant and
calls ``finish`` on its 3rd reply, the stop condition) with one soft criterion on every response
and one on the whole conversation (4 judge calls per scenario: one per turn and one for the
conversation), run ``--iterations`` times. Judge and simulator talk through the real
google-genai client to a FakeGemini that answers every call after ``latency`` seconds.

* **critical path**: the 3 simulator calls of a scenario must happen one after another; each is
  counted at the cost of a plain google-genai call to the same server, measured in this run;
  summed over iterations. Divided by the workers, that is what ``-n N`` could at best take.
* **start-up**: the same command with every scenario deselected (``-k``): interpreter, plugins,
  workers, collection and exit; the part of a run that no number of workers shortens.
* **head** / **tail**: from the start of pytest to the first LLM request, and from the last LLM
  answer to the end of pytest (the experiment is written in between); measured from the fake's
  request log and the process's own clock.
* **uneven end**: how long the first worker to run out of scenarios idled before the last one
  finished (xdist hands out scenarios in chunks; one scenario is about 1 s here).
* **max in flight**: the most requests the fake served at once (the suite-wide cap is
  ``max_concurrency``, 8 by default). Judge calls include the pre-flight probe.
* Worker count 0 is a plain sequential run (xdist off); 1 is ``-n 1``.

Every run writes an event trace (``--trace``: print it) through a small conftest plugin: worker
start, collection, first/last test, worker end, controller session end.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).parent))
from _common import SIM_PYPROJECT, all_criteria_pass, clean_env, finishing_agent, kind_of, run_pytest, write  # noqa: E402

from fabtest.demo.offline_llm import answer as offline_answer  # noqa: E402
from fabtest.testing import FakeGemini  # noqa: E402
from fabtest.testing.fake_gemini import FakeRequest  # noqa: E402

TURNS = 3


FEATURE = '''
Feature: Parallel benchmark
  Background:
    Given the criterion "polite" means "The agent is polite"
    And the simulation takes at most 5 turns
    And the simulation stops when the agent calls "finish"

  Scenario: Three turns
    Given a simulated user with the goal "Get the task done"
    When the simulated user talks to the agent
    Then every response should satisfy "polite"
    And the conversation should satisfy "The agent never asks the same question twice"
'''


# Appends "<epoch seconds> <process> <event>" lines to $BENCH_TRACE (O_APPEND: one write per line).
TRACE_CONFTEST = '''
import os
import time

import pytest

_PATH = os.environ.get("BENCH_TRACE")
_seen = {"first": False}


def _who(config):
    return getattr(config, "workerinput", {}).get("workerid", "controller")


def _note(config, event):
    if _PATH:
        with open(_PATH, "a", encoding="utf-8") as fh:
            fh.write(f"{time.time():.4f} {_who(config)} {event}\\n")


class _Early:
    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session):
        _note(session.config, "sessionfinish")
        if os.environ.get("BENCH_STACKS"):
            import faulthandler
            fh = open(os.environ["BENCH_STACKS"] + "." + _who(session.config), "w")
            _KEEP.append(fh)
            faulthandler.dump_traceback_later(float(os.environ.get("BENCH_STACKS_AFTER", "0.5")), repeat=True, file=fh)


_KEEP = []


def pytest_configure(config):
    _note(config, "configure")
    config.pluginmanager.register(_Early(), "bench-trace-early")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_setupnodes(config, specs):
    _note(config, "spawning workers")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_newgateway(gateway):
    _note(_CONFIG[0], f"gateway {gateway.id} up")


@pytest.hookimpl(optionalhook=True)
def pytest_testnodeready(node):
    _note(_CONFIG[0], f"{node.gateway.id} ready")


@pytest.hookimpl(trylast=True, optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    _note(_CONFIG[0], f"{node.gateway.id} collection received (after pre-flight)")


def pytest_collection_finish(session):
    _note(session.config, "collected")


def pytest_runtest_logstart(nodeid, location):
    if not _seen["first"]:
        _seen["first"] = True
        _note(_CONFIG[0], "first-test")


def pytest_runtest_logfinish(nodeid, location):
    _note(_CONFIG[0], "test-end")


_CONFIG = []


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    _CONFIG.append(session.config)
    _note(session.config, "sessionstart")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    _note(session.config, "sessionfinish done")


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    import atexit
    import threading

    alive = [t.name + ("(d)" if t.daemon else "") for t in threading.enumerate() if t is not threading.main_thread()]
    _note(config, "unconfigure; threads: " + ", ".join(alive))
    atexit.register(_note, config, "atexit")
'''


LATENCY = {"s": 0.2}
_LOG: list[tuple[float, float, str]] = []  # (arrived, answered, kind)
_LOG_LOCK = threading.Lock()


def handler(request: FakeRequest) -> Any:
    """Plays a user for exactly TURNS turns; passes every criterion; logs when each call came and went."""
    arrived = time.time()
    kind = kind_of(request)
    time.sleep(LATENCY["s"])
    if kind == "simulator":
        said = request.prompt.count("You: ")
        answer: Any = {"message": f"Message {said + 1} of my request.", "goal_complete": False}
    elif kind == "criteria":
        answer = all_criteria_pass(request)
    else:
        answer = offline_answer(request)
    with _LOG_LOCK:
        _LOG.append((arrived, time.time(), kind))
    return answer


def plain_call_cost(fake: FakeGemini, samples: int = 12) -> float:
    """Median seconds of one plain google-genai call to the fake (what a simulator call costs at least)."""
    from google import genai

    client = genai.Client(api_key="bench", http_options={"base_url": fake.base_url})
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        client.models.generate_content(model="gemini-2.5-flash", contents="say hi")
        times.append(time.perf_counter() - started)
    return statistics.median(times[2:])


def make_project(root: Path) -> None:
    write(root, "pyproject.toml", SIM_PYPROJECT)
    write(root, "benchagent.py", finishing_agent(TURNS))
    write(root, "features/bench.feature", FEATURE)
    write(root, "conftest.py", TRACE_CONFTEST)


def _n_args(workers: int) -> list[str]:
    """0 is a plain sequential run (xdist off); N >= 1 is ``-n N`` (one controller, N workers)."""
    return ["-n", str(workers)] if workers >= 1 else ["-p", "no:xdist"]


def _env(fake: FakeGemini, src: str | None, **extra: str) -> dict[str, str]:
    """The run's environment; ``src`` (a checkout's ``src/``) goes first on PYTHONPATH."""
    return clean_env({**fake.env(), **extra, **({"PYTHONPATH": src} if src else {})})


def startup(root: Path, fake: FakeGemini, workers: int, src: str | None = None) -> float:
    """Seconds of the same command with every scenario deselected: the floor no parallelism removes."""
    wall, proc = run_pytest(root, ["features", "-k", "not Three", "--fabtest-no-results", *_n_args(workers)],
                            _env(fake, src))
    if proc.returncode != 5:  # pytest: no tests ran
        raise SystemExit(f"collect-only failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    return wall


def run_once(root: Path, fake: FakeGemini, workers: int, iterations: int, call_s: float,
             src: str | None = None) -> dict[str, Any]:
    fake.reset()
    with _LOG_LOCK:
        _LOG.clear()
    exp_id = f"bench_n{workers}"
    trace = root / f"trace_n{workers}.txt"
    trace.unlink(missing_ok=True)
    args = ["features", "--fabtest-iterations", str(iterations), "--fabtest-experiment-id", exp_id, *_n_args(workers)]
    env = _env(fake, src, BENCH_TRACE=str(trace))
    started = time.time()
    wall, proc = run_pytest(root, args, env)
    ended = started + wall
    if proc.returncode != 0:
        raise SystemExit(f"pytest failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}")
    results = json.loads((root / "results" / f"{exp_id}.json").read_text())["scenario_results"]
    assert len(results) == iterations and all(r["passed"] for r in results), "every scenario should pass"
    assert all(r["turns"] == TURNS for r in results), [r["turns"] for r in results]
    kinds: dict[str, int] = {}
    for r in fake.requests:
        kinds[kind_of(r)] = kinds.get(kind_of(r), 0) + 1
    with _LOG_LOCK:
        log = list(_LOG)
    critical = iterations * TURNS * call_s
    ends = _last_test_ends(trace)
    return {"workers": workers, "wall": wall, "critical": critical, "per_worker": critical / max(1, workers),
            "uneven": max(ends) - min(ends) if len(ends) > 1 else 0.0,
            "head": min(a for a, _, _ in log) - started, "tail": ended - max(b for _, b, _ in log),
            "sim": kinds.get("simulator", 0), "judge": kinds.get("criteria", 0) + kinds.get("other", 0),
            "in_flight": fake.max_in_flight, "trace": _read_trace(trace, started, log)}


def _last_test_ends(path: Path) -> list[float]:
    """Each process's last test end (xdist workers only, or the one sequential process)."""
    last: dict[str, float] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        t, who, what = line.split(" ", 2)
        if what.strip() == "test-end":
            last[who] = float(t)
    workers = {who: t for who, t in last.items() if who != "controller"}
    return list((workers or last).values())


def _read_trace(path: Path, started: float, log: list[tuple[float, float, str]]) -> list[str]:
    events = [line.split(" ", 2) for line in path.read_text().splitlines()] if path.exists() else []
    rows = [(float(t), who, what.strip()) for t, who, what in events]
    rows.append((min(a for a, _, _ in log), "fake", "first LLM request"))
    rows.append((max(b for _, b, _ in log), "fake", "last LLM answer"))
    first_end: dict[str, float] = {}
    keep = []
    for t, who, what in sorted(rows):
        if what == "test-end":  # only each process's last test end is interesting
            first_end[who] = t
            continue
        keep.append((t, who, what))
    keep += [(t, who, "last test-end") for who, t in first_end.items()]
    for written in path.parent.glob("results/*.json"):
        keep.append((written.stat().st_mtime, "file", f"{written.name} written"))
    return [f"{t - started:7.2f}s  {who:<10} {what}" for t, who, what in sorted(keep)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--workers", default="0,1,2,4,8", help="comma-separated worker counts (0 = no xdist)")
    parser.add_argument("--trace", action="store_true", help="print each run's event trace")
    parser.add_argument("--baseline", metavar="CHECKOUT",
                        help="also run another checkout of fabtest (its src/ first on PYTHONPATH), interleaved")
    parser.add_argument("--quick", action="store_true", help="smoke test in seconds (tests/benchmarks runs it)")
    args = parser.parse_args(argv)
    if args.quick:
        args.iterations, args.latency, args.workers = 2, 0.0, "0"
    variants: list[tuple[str, str | None]] = [("", None)]
    if args.baseline:
        variants = [("baseline ", str(Path(args.baseline).resolve() / "src")), ("this ", None)]
    LATENCY["s"] = args.latency
    rows = []
    with tempfile.TemporaryDirectory(prefix="fabtest-bench-") as tmp, FakeGemini(handler=handler) as fake:
        root = Path(tmp)
        make_project(root)
        call_s = plain_call_cost(fake)
        for workers in (int(w) for w in args.workers.split(",")):
            for label, src in variants:
                row = run_once(root, fake, workers, args.iterations, call_s, src)
                row["startup"] = startup(root, fake, workers, src)
                row["label"] = label
                rows.append(row)
                if args.trace:
                    print(f"-- trace {label}-n {workers}")
                    print("\n".join(row["trace"]))
    seq = {r["label"]: r["wall"] for r in rows if r["workers"] == 0}
    table = [[r["label"] + ("sequential" if r["workers"] == 0 else f"-n {r['workers']}"), f"{r['wall']:.2f}",
              f"{r['per_worker']:.2f}", f"{r['startup']:.2f}", f"{r['wall'] / r['per_worker']:.2f}x",
              f"{r['wall'] / (r['per_worker'] + r['startup']):.2f}x",
              f"{seq[r['label']] / r['wall']:.2f}x" if r["label"] in seq else "", f"{r['head']:.2f}", f"{r['tail']:.2f}",
              f"{r['uneven']:.2f}",
              r["sim"], r["judge"], r["in_flight"]] for r in rows]
    print(f"Parallel: {args.iterations} iterations of a simulated {TURNS}-turn scenario (4 judge calls each), "
          f"{args.latency * 1000:.0f} ms per LLM call; a plain google-genai call costs {call_s * 1000:.0f} ms, "
          f"critical path {args.iterations * TURNS * call_s:.2f} s")
    print(tabulate(table, headers=["run", "wall s", "critical/N s", "start-up s", "wall/(crit/N)",
                                   "wall/(crit/N+start-up)", "speed-up", "head s", "tail s", "uneven end s", "simulator calls",
                                   "judge calls", "max in flight"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
