"""``fabtest view`` over many experiments: is the list, the trends and one experiment fast?

    python benchmarks/bench_view.py [--experiments 300] [--scenarios 100]

Writes ``--experiments`` synthetic experiments of ``--scenarios`` 3-turn scenarios each (the
criterion "friendly" slips in the last third, so the regression gate trips once), then times
what a browser asks the server for: the experiments table and the trends (cold: the first
request reads every file's header and index; warm: a reload, nothing changed), one experiment
page, one conversation, and one comparison.

Targets: the cold table under 5 s for 300 × 100, warm pages under 0.5 s, one experiment under 1 s.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tabulate import tabulate

from fabtest.experiment.export import build_document, write_document
from fabtest.experiment.model import CheckRecord, ExperimentInfo, ScenarioResult, TurnRecord
from fabtest.experiment.stable_id import stable_id
from fabtest.view.catalog import Catalog
from fabtest.view.layout import compare_path, conversation_path, experiment_path
from fabtest.view.site import Site


def _result(i: int, slipped: bool) -> ScenarioResult:
    friendly = "failed" if slipped and i % 3 else "passed"
    checks = [CheckRecord(type="satisfy", mode="should", criterion=c, status=s, passed=s == "passed", turn=1,
                          details="reasoning") for c, s in (("friendly", friendly), ("concise", "passed"))]
    return ScenarioResult(id=stable_id("Bench", None, f"s{i}"), name=f"s{i}", feature="Bench", passed=True, turns=3,
                          evaluations=checks, duration_s=1.0,
                          transcript=[TurnRecord(number=n, user="hello " * 20, agent="reply " * 40) for n in (1, 2, 3)])


def _write(root: Path, experiments: int, scenarios: int) -> None:
    for n in range(experiments):
        info = ExperimentInfo(id=f"exp_{n:04d}", timestamp=f"2026-{1 + n // 28 % 12:02d}-{1 + n % 28:02d}T10:{n % 60:02d}:00Z",
                              name=f"prompt v{n}", tags=["nightly"], git_branch="main", git_commit=f"{n:08x}")
        write_document(build_document(info, [_result(i, n >= experiments * 2 // 3) for i in range(scenarios)]), root)


def _timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--experiments", type=int, default=300)
    parser.add_argument("--scenarios", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="smoke test in seconds (tests/benchmarks runs it)")
    args = parser.parse_args()
    if args.quick:
        args.experiments, args.scenarios = 2, 2
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        made = _timed(lambda: _write(root, args.experiments, args.scenarios))
        site = Site(Catalog(root))
        rows: list[list[object]] = [["write the experiments (setup)", f"{made:.2f}"]]
        rows.append(["experiments table, cold", f"{_timed(lambda: site.render('index.html')):.2f}"])
        rows.append(["experiments table, warm", f"{_timed(lambda: site.render('index.html')):.3f}"])
        rows.append(["trends, cold (gate over every pair)", f"{_timed(lambda: site.render('trends.html')):.2f}"])
        rows.append(["trends, warm", f"{_timed(lambda: site.render('trends.html')):.3f}"])
        last = site.catalog.rows()[-1]
        first_id = site.catalog.scenario_ids(last)[0]
        rows.append(["one experiment", f"{_timed(lambda: site.render(experiment_path(last.id))):.3f}"])
        rows.append(["one conversation", f"{_timed(lambda: site.render(conversation_path(last.id, first_id, 1))):.3f}"])
        rows.append(["one comparison", f"{_timed(lambda: site.render(compare_path('exp_0000', last.id))):.3f}"])
        print(f"{args.experiments} experiments × {args.scenarios} scenarios")
        print(tabulate(rows, headers=["what", "seconds"]))


if __name__ == "__main__":
    main()
