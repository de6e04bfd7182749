"""The fault matrix on a 20-scenario suite: how many runs, how long, sequential vs concurrent (issue 29).

    python benchmarks/bench_faults.py [--scenarios 20] [--jobs 1,2,4]

An instant Python agent whose three ``@fabtest.tool`` tools every scenario calls; ``fabtest
faults`` with the five fault kinds. Target: at most tools x faults runs (here 3 x 5 = 15, each over
the scenarios that called the tool), run concurrently. Columns: jobs, fault runs, scenario runs
(the cells of the matrix), wall time, speed-up over one job.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tabulate import tabulate

AGENT = '''
import fabtest


@fabtest.tool
def lookup(phone: str) -> dict:
    return {"plan": "basic"}


@fabtest.tool
def plans() -> list:
    return ["basic"]


@fabtest.tool
def change(plan: str) -> str:
    return "ok"


def chat(messages):
    try:
        lookup("0176"), plans(), change("basic")
    except fabtest.ToolFailed:
        return "sorry"
    return "done"


def build(context):
    return chat
'''


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenarios", type=int, default=20)
    parser.add_argument("--jobs", default="1,2,4")
    parser.add_argument("--faults", default=None, help="comma-separated fault kinds (default: all)")
    parser.add_argument("--quick", action="store_true", help="smoke test in seconds (tests/benchmarks runs it)")
    args = parser.parse_args()
    if args.quick:
        args.scenarios, args.jobs, args.faults = 1, "2", "error"
    rows = []
    base_wall = None
    for jobs in [int(j) for j in args.jobs.split(",")]:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            (root / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n\n'
                                                 '[tool.fabtest]\nagent = "bot:build"\n')
            (root / "bot.py").write_text(AGENT)
            (root / "features").mkdir()
            lines = ["Feature: Suite"] + [f'  Scenario: S{i}\n    When the user says "hi {i}"\n'
                                          f'    Then the response must match "done"' for i in range(args.scenarios)]
            (root / "features" / "suite.feature").write_text("\n".join(lines) + "\n")
            started = time.perf_counter()
            kinds = ["--faults", args.faults] if args.faults else []
            proc = subprocess.run([sys.executable, "-m", "fabtest.cli", "faults", "features", "--jobs", str(jobs), *kinds,
                                   "--pytest-arg=--fabtest-no-preflight", "--pytest-arg=-p", "--pytest-arg=no:randomly"],
                                  cwd=root, capture_output=True, text=True, env={**os.environ})
            wall = time.perf_counter() - started
            [report_file] = (root / "results" / "faults").glob("*.faults.json")
            report = json.loads(report_file.read_text())
            assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]  # every fault breaks "done"
            base_wall = base_wall or wall
            rows.append([jobs, report["runs"], len(report["rows"]), f"{wall:.1f} s", f"{base_wall / wall:.2f}x"])
    print(tabulate(rows, headers=["jobs", "fault runs", "scenario runs", "wall (baseline included)", "speed-up"]))
    print(f"\nload average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
