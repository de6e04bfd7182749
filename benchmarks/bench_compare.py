"""Large experiments: ``fabtest-compare`` and the Recorder on 100,000 scenario results each.

    python benchmarks/bench_compare.py [--scenarios 100000]

Two synthetic experiments (A and B, ~10 % of the outcomes flipped in B) are built from
ScenarioResults with build_document and written with write_document. Then, each in its own
subprocess so that peak memory (``ru_maxrss`` of the children of a small wrapper process) is that command's alone:

* ``fabtest-compare A B`` (text output), and ``--format json``;
* the Recorder: ``add`` every result (journalled and fsynced one by one, as in a real run) then
  ``finalise`` (the results are built in the child first; that part is timed separately).

Targets: compare under 10 s and 1 GiB.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tabulate import tabulate

from fabtest.experiment.export import build_document, write_document
from fabtest.experiment.model import CheckRecord, ExperimentInfo, ScenarioResult, TopicRecord, TurnRecord, UsageRecord
from fabtest.experiment.stable_id import stable_id

CRITERIA = {"friendly": "The agent is warm and polite", "concise": "At most 3 sentences", "grounded": "No invented facts"}
TOPICS = [TopicRecord(name="greeting", characteristic="greets", successors=["gathering"]),
          TopicRecord(name="gathering", characteristic="asks", successors=["booking"]),
          TopicRecord(name="booking", characteristic="books", successors=[])]


def synthetic(count: int, variant: int) -> list[ScenarioResult]:
    """``count`` results of 3 turns each with 3 soft evaluations and 1 hard expectation."""
    results = []
    for i in range(count):
        passed = (i * 7 + variant * (i % 10 == 0)) % 13 != 0
        name = f"Scenario {i}"
        evals = [CheckRecord(type="satisfy", mode="should", criterion=c, status="passed" if (i + k + variant) % 5 else "failed",
                             passed=bool((i + k + variant) % 5), turn=k + 1, details="reason")
                 for k, c in enumerate(CRITERIA)]
        results.append(ScenarioResult(
            id=stable_id("Bench feature", None, name), name=name, nodeid=f"features/bench.feature::{name}",
            feature="Bench feature", feature_file="features/bench.feature", passed=passed, turns=3,
            topics_visited=["greeting", "gathering", "booking"], topic_path=["greeting", "gathering", "booking"],
            failure_type=None if passed else "assertion", failure_message=None if passed else "Turn 3: expectation failed",
            evaluations=evals,
            expectations=[CheckRecord(type="call_tool", mode="must", criterion="call_tool:book", status="passed" if passed else "failed",
                                      passed=passed, turn=3, details="called")],
            transcript=[TurnRecord(number=t + 1, user=f"user message {t}", agent=f"agent reply {t} for {name}",
                                   topic=["greeting", "gathering", "booking"][t], duration_s=0.01) for t in range(3)],
            usage={"judge": UsageRecord(calls=3, input_tokens=900, output_tokens=120),
                   "simulator": UsageRecord(calls=3, input_tokens=600, output_tokens=60)},
            duration_s=0.5, criteria=dict(CRITERIA), topics=list(TOPICS),
        ))
    return results


def info(experiment_id: str) -> ExperimentInfo:
    return ExperimentInfo(id=experiment_id, timestamp="2025-01-01T00:00:00Z", name=experiment_id,
                          judge_provider="gemini", judge_model="gemini-2.5-flash")


_WRAPPER = """
import json, resource, subprocess, sys, time
started = time.perf_counter()
proc = subprocess.run(sys.argv[1:], capture_output=True, text=True)
wall = time.perf_counter() - started
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"wall": wall, "rss_kib": rss, "code": proc.returncode, "out": proc.stdout[-4000:], "err": proc.stderr[-4000:]}))
"""


def timed_child(cmd: list[str], cwd: Path, timeout: float = 1800) -> tuple[float, float, int, str, str]:
    """(wall s, peak RSS MiB, exit code, stdout, stderr) of one subprocess.

    Linux keeps ru_maxrss across fork and exec, so a command started straight from this (large)
    process would report this process's peak. A small wrapper interpreter starts it instead and
    reports its children's peak.
    """
    proc = subprocess.run([sys.executable, "-c", _WRAPPER, *cmd], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise SystemExit(f"wrapper failed: {proc.stderr[-2000:]}")
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    return data["wall"], data["rss_kib"] / 1024, data["code"], data["out"], data["err"]


def child_recorder(results_dir: str, count: int) -> int:
    from fabtest.experiment.recorder import Recorder

    t0 = time.perf_counter()
    results = synthetic(count, 0)
    t1 = time.perf_counter()
    recorder = Recorder(results_dir=results_dir, experiment_id="exp_recorder")
    for result in results:
        recorder.add(result)
    t2 = time.perf_counter()
    recorder.finalise()
    t3 = time.perf_counter()
    print(json.dumps({"build": t1 - t0, "add": t2 - t1, "finalise": t3 - t2}))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=100_000)
    parser.add_argument("--child-recorder", nargs=2, metavar=("DIR", "COUNT"), help=argparse.SUPPRESS)
    parser.add_argument("--skip-recorder", action="store_true")
    args = parser.parse_args(argv)
    if args.child_recorder:
        return child_recorder(args.child_recorder[0], int(args.child_recorder[1]))

    rows = []
    compare = shutil.which("fabtest-compare") or "fabtest-compare"
    with tempfile.TemporaryDirectory(prefix="fabtest-bench-compare-") as tmp:
        root = Path(tmp)
        results_dir = root / "results"
        t0 = time.perf_counter()
        for exp_id, variant in (("exp_bench_a", 0), ("exp_bench_b", 1)):
            write_document(build_document(info(exp_id), synthetic(args.scenarios, variant)), results_dir)
        generate = time.perf_counter() - t0
        size = (results_dir / "exp_bench_a.json").stat().st_size / 2**20
        for label, extra in (("fabtest-compare A B", []), ("fabtest-compare A B --format json", ["--format", "json"])):
            wall, rss, code, out, err = timed_child([compare, "exp_bench_a", "exp_bench_b", "--results-dir", str(results_dir), *extra], root)
            if code != 0:
                raise SystemExit(f"{label} failed ({code}): {err[-2000:]}")
            ok = wall < 10 and rss < 1024
            rows.append([label, f"{wall:.2f}", f"{rss:.0f}", "yes" if ok else "NO", ""])
        if not args.skip_recorder:
            wall, rss, code, out, err = timed_child([sys.executable, __file__, "--child-recorder", str(root / "rec"), str(args.scenarios)], root)
            if code != 0:
                raise SystemExit(f"recorder failed ({code}): {err[-2000:]}")
            parts = json.loads(out.strip().splitlines()[-1])
            rows.append(["Recorder: add x N + finalise", f"{parts['add'] + parts['finalise']:.2f}", f"{rss:.0f}", "-",
                         f"build results {parts['build']:.1f} s (not counted), add {parts['add']:.1f} s, "
                         f"finalise {parts['finalise']:.1f} s; RSS includes the N results"])
    print(f"Compare: two experiments of {args.scenarios:,} scenario results each "
          f"({size:.0f} MiB per file; generated in {generate:.1f} s)")
    print(tabulate(rows, headers=["command", "wall s", "peak RSS MiB", "<10 s and <1 GiB", "notes"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
