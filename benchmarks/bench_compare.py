"""Large experiments: ``fabtest-compare`` and the Recorder on 100,000 scenario results each.

    python benchmarks/bench_compare.py [--scenarios 100000] [--baseline REF]

Two synthetic experiments (A and B, ~10 % of the outcomes flipped in B) are recorded from
ScenarioResults made one at a time (the file is byte for byte what write_document writes). Then, each in its own
subprocess so that peak memory (``ru_maxrss`` of the children of a small wrapper process) is that command's alone:

* ``fabtest-compare A B`` (text output), and ``--format json``;
* the Recorder: ``add`` every result (journalled one by one, as in a real run; each result is
  made just before it is added and dropped after, as a run delivers them; making it is timed
  apart) then ``finalise``.

With ``--baseline REF`` (a git ref, e.g. ``main``) the same commands also run against that
ref's ``src/`` (extracted with ``git archive`` into a temp dir, put first on PYTHONPATH), side by
side in the same run, and the table gives the ratio this tree / baseline.

Targets: compare under 2.5 s and 250 MiB; the Recorder under 300 MiB and no slower than before.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from tabulate import tabulate

from fabtest.experiment.model import CheckRecord, ExperimentInfo, ScenarioResult, TopicRecord, TurnRecord, UsageRecord
from fabtest.experiment.recorder import Recorder
from fabtest.experiment.stable_id import stable_id

CRITERIA = {"friendly": "The agent is warm and polite", "concise": "At most 3 sentences", "grounded": "No invented facts"}
TOPICS = [TopicRecord(name="greeting", characteristic="greets", successors=["gathering"]),
          TopicRecord(name="gathering", characteristic="asks", successors=["booking"]),
          TopicRecord(name="booking", characteristic="books", successors=[])]


def iter_synthetic(count: int, variant: int) -> Iterator[ScenarioResult]:
    """``count`` results of 3 turns each with 3 soft evaluations and 1 hard expectation, one at a
    time (as a run delivers them)."""
    for i in range(count):
        passed = (i * 7 + variant * (i % 10 == 0)) % 13 != 0
        name = f"Scenario {i}"
        evals = [CheckRecord(type="satisfy", mode="should", criterion=c, status="passed" if (i + k + variant) % 5 else "failed",
                             passed=bool((i + k + variant) % 5), turn=k + 1, details="reason")
                 for k, c in enumerate(CRITERIA)]
        yield ScenarioResult(
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
        )


def info(experiment_id: str) -> ExperimentInfo:
    return ExperimentInfo(id=experiment_id, timestamp="2025-01-01T00:00:00Z", name=experiment_id,
                          judge_provider="gemini", judge_model="gemini-2.5-flash")


_WRAPPER = """
import json, resource, subprocess, sys, time
started = time.perf_counter()
proc = subprocess.run(sys.argv[1:], capture_output=True, text=True)
wall = time.perf_counter() - started
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss_kib": usage.ru_maxrss, "code": proc.returncode,
                  "out": proc.stdout[-4000:], "err": proc.stderr[-4000:]}))
"""


def timed_child(cmd: list[str], cwd: Path, timeout: float = 1800,
                src: Path | None = None) -> tuple[float, float, float, int, str, str]:
    """(wall s, CPU s, peak RSS MiB, exit code, stdout, stderr) of one subprocess. CPU time (user +
    system) is what a loaded machine inflates least; wall time waits for the other jobs too.

    Linux keeps ru_maxrss across fork and exec, so a command started straight from this (large)
    process would report this process's peak. A small wrapper interpreter starts it instead and
    reports its children's peak.
    """
    env = dict(os.environ)
    if src is not None:  # a baseline's fabtest shadows the installed one
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(src), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run([sys.executable, "-c", _WRAPPER, *cmd], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"wrapper failed: {proc.stderr[-2000:]}")
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    return data["wall"], data["cpu"], data["rss_kib"] / 1024, data["code"], data["out"], data["err"]


class _Timed:
    """Wraps an iterator and adds up the time spent producing its items (the results' own cost)."""

    spent = 0.0

    def __call__(self, items: Iterator[ScenarioResult]) -> Iterator[ScenarioResult]:
        while True:
            t0 = time.perf_counter()
            item = next(items, None)
            self.spent += time.perf_counter() - t0
            if item is None:
                return
            yield item


_timed = _Timed()


def child_recorder(results_dir: str, count: int) -> int:
    from fabtest.experiment.recorder import Recorder

    build = add = 0.0
    recorder = Recorder(results_dir=results_dir, experiment_id="exp_recorder")
    for result in _timed(iter_synthetic(count, 0)):  # one at a time: a run never holds them all
        t0 = time.perf_counter()
        recorder.add(result)
        add += time.perf_counter() - t0
    build = _timed.spent
    t2 = time.perf_counter()
    recorder.finalise()
    t3 = time.perf_counter()
    print(json.dumps({"build": build, "add": add, "finalise": t3 - t2}))
    return 0


_COMPARE = "import sys; from fabtest.cli import compare_main; sys.exit(compare_main())"


def _baseline_src(ref: str, into: Path) -> Path:
    """``src/`` of a git ref, extracted beside the benchmark's temp files."""
    repo = Path(__file__).resolve().parent.parent
    archive = subprocess.run(["git", "-C", str(repo), "archive", ref, "src"], capture_output=True, check=True).stdout
    into.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "src"


def _measure(label: str, cmd: list[str], root: Path, src: Path | None) -> tuple[float, float, float, str]:
    wall, cpu, rss, code, out, err = timed_child(cmd, root, src=src)
    if code != 0:
        raise SystemExit(f"{label} failed ({code}): {err[-2000:]}")
    return wall, cpu, rss, out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=100_000)
    parser.add_argument("--child-recorder", nargs=2, metavar=("DIR", "COUNT"), help=argparse.SUPPRESS)
    parser.add_argument("--skip-recorder", action="store_true")
    parser.add_argument("--baseline", metavar="REF", help="also run against this git ref's src/ (e.g. main)")
    parser.add_argument("--quick", action="store_true", help="smoke test in seconds: 200 results (tests/benchmarks)")
    args = parser.parse_args(argv)
    if args.quick:
        args.scenarios = min(args.scenarios, 200)
    if args.child_recorder:
        return child_recorder(args.child_recorder[0], int(args.child_recorder[1]))

    rows = []
    with tempfile.TemporaryDirectory(prefix="fabtest-bench-compare-") as tmp:
        root = Path(tmp)
        trees: list[tuple[str, Path | None]] = [("this tree", None)]
        if args.baseline:
            trees.append((args.baseline, _baseline_src(args.baseline, root / "baseline")))
        results_dir = root / "results"
        t0 = time.perf_counter()
        for exp_id, variant in (("exp_bench_a", 0), ("exp_bench_b", 1)):  # streamed: same bytes as write_document
            recorder = Recorder(results_dir=results_dir, experiment_id=exp_id, name=exp_id, judge_provider="gemini",
                                judge_model="gemini-2.5-flash", cwd=root)
            for result in iter_synthetic(args.scenarios, variant):
                recorder.add(result)
            recorder.finalise()
        generate = time.perf_counter() - t0
        size = (results_dir / "exp_bench_a.json").stat().st_size / 2**20
        measured: dict[tuple[str, str], tuple[float, float]] = {}
        for label, extra in (("fabtest-compare A B", []), ("fabtest-compare A B --format json", ["--format", "json"])):
            for tree, src in trees:
                cmd = [sys.executable, "-c", _COMPARE, "exp_bench_a", "exp_bench_b", "--results-dir", str(results_dir), *extra]
                wall, cpu, rss, _ = _measure(label, cmd, root, src)
                measured[(label, tree)] = (cpu, rss)
                ok = wall <= 2.5 and rss <= 250
                rows.append([label, tree, f"{wall:.2f}", f"{cpu:.2f}", f"{rss:.0f}", "yes" if ok else "NO",
                             "" if ok or rss > 250 or cpu > 2.5 else "time: CPU within, wall not (load)"])
        if not args.skip_recorder:
            label = "Recorder: add x N + finalise"
            for n, (tree, src) in enumerate(trees):
                cmd = [sys.executable, __file__, "--child-recorder", str(root / f"rec{n}"), str(args.scenarios)]
                wall, cpu, rss, out = _measure(label, cmd, root, src)
                parts = json.loads(out.strip().splitlines()[-1])
                spent = parts["add"] + parts["finalise"]
                measured[(label, tree)] = (spent, rss)
                rows.append([label, tree, f"{spent:.2f}", f"{cpu:.2f}", f"{rss:.0f}", "yes" if rss <= 300 else "NO",
                             f"add {parts['add']:.1f} s, finalise {parts['finalise']:.1f} s; build results "
                             f"{parts['build']:.1f} s not counted; results made one at a time"])
    print(f"Compare: two experiments of {args.scenarios:,} scenario results each "
          f"({size:.0f} MiB per file; generated in {generate:.1f} s)")
    print(tabulate(rows, headers=["command", "tree", "wall s", "CPU s", "peak RSS MiB", "target met", "notes"]))
    if args.baseline:
        print(f"\nthis tree / {args.baseline} (measured side by side in this run; time: CPU s for compare, "
              "add + finalise for the Recorder):")
        ratios = []
        for label in dict.fromkeys(k[0] for k in measured):
            (w1, r1), (w0, r0) = measured[(label, "this tree")], measured[(label, args.baseline)]
            ratios.append([label, f"{w1 / w0:.2f}", f"{r1 / r0:.2f}"])
        print(tabulate(ratios, headers=["command", "time ratio", "peak RSS ratio"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
