"""The pytest runs of one arm of ``fabtest ab``: a part per round, merged into one experiment.

Each round is an ordinary pytest run of the arm's suite in the arm's checkout, writing its part
(same experiment id, own results directory) under the scratch directory; after each round the
parts are merged (``fabtest merge``'s code) into ``<results>/<id>.json``, a normal experiment file
that records its arm as ``experiment.ab``. Rounds after the first keep only the scenarios and
iterations bought (:mod:`fabtest.pytest_plugin.ab_select`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fabtest._internal.subprocesses import Child, Finished
from fabtest.ab.arms import Arm
from fabtest.compare.paired import Run
from fabtest.compare.read import read_experiment
from fabtest.errors import ExperimentFileError, MergeError, UsageError
from fabtest.experiment.merge import merge_parts
from fabtest.experiment.reader import load_document, read_document
from fabtest.experiment.spool import write_experiment
from fabtest.pytest_plugin.ab_select import ENV, base_nodeid

__all__ = ["ArmSession"]

#: pytest exit codes that still mean "the suite ran" (1: some scenarios failed; 6: fabtest's "could
#: not run for want of an LLM", which the gate reads from the experiment)
RAN = (0, 1, 6)


class ArmSession:
    """One arm's rounds: start a round's pytest, keep its part, merge the parts, read the runs."""

    def __init__(self, arm: Arm, experiment_id: str, scratch: Path, results_dir: Path, pytest_args: Sequence[str],
                 base_env: Mapping[str, str]) -> None:
        self.arm, self.id, self.results_dir = arm, experiment_id, results_dir
        self.work = scratch / f"{arm.name}-runs"
        self.work.mkdir(parents=True, exist_ok=True)
        self.pytest_args, self.base_env = list(pytest_args), base_env
        self.parts: list[Path] = []
        self.path: Path | None = None  # the merged experiment
        self.runs_done = 0

    def start(self, round_no: int, iterations: range, select: Sequence[str] | None) -> Child:
        """Start the round's pytest: ``iterations`` of the scenarios whose node ids ``select`` names
        (None: the whole suite)."""
        out = self.work / f"r{round_no}"
        out.mkdir(exist_ok=True)
        env = self.arm.environment(self.base_env)
        args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                f"--fabtest-iterations={iterations.stop - 1}", f"--fabtest-experiment-id={self.id}",
                f"--fabtest-results-dir={out}", *self.arm.pytest_args(), *self.pytest_args]
        if select is not None:
            wanted = out / "select.json"
            wanted.write_text(json.dumps({"nodeids": sorted(select), "iterations": list(iterations)}), encoding="utf-8")
            args[3:3] = ["-p", "fabtest.pytest_plugin.ab_select"]
            env[ENV] = str(wanted)
        return Child(args, cwd=self.arm.root, env=env, output=self.work / f"r{round_no}.log")

    def finish(self, round_no: int, done: Finished) -> None:
        """Keep the round's part and merge; UsageError when the round did not run the suite."""
        part = self.work / f"r{round_no}" / f"{self.id}.json"
        if part.is_file():
            self.parts.append(part)
            self.merge()
        if done.returncode not in RAN or not part.is_file():
            why = _last_line(done.tail) or "no output"
            code = "timed out" if done.timed_out else f"pytest exit code {done.returncode}"
            raise UsageError(f"{self.arm.name} arm ({self.arm.spec.ref}): {code}"
                             + ("" if part.is_file() else ", no experiment written") + f": {why}")

    def merge(self, outcome: dict[str, Any] | None = None) -> Path | None:
        """Merge the parts so far into ``<results>/<id>.json`` with ``experiment.ab`` (None: no part);
        ``outcome`` (the decision, once made) is recorded there too."""
        if not self.parts:
            return None
        staged = self.work / "merged"
        staged.mkdir(exist_ok=True)
        try:
            merged = merge_parts([str(p) for p in self.parts], staged, self.id)
            info, results, _ = load_document(merged, staged)
        except (MergeError, ExperimentFileError) as exc:
            raise UsageError(f"{self.arm.name} arm: its rounds could not be merged: {exc}") from None
        self.results_dir.mkdir(parents=True, exist_ok=True)
        record = {**self.arm.record(), **(outcome or {})}
        self.path = write_experiment(info.model_copy(update={"ab": record}), results, self.results_dir)
        self.runs_done = len(results)
        return self.path

    def runs(self) -> tuple[list[Run], dict[str, str], dict[str, str]]:
        """The merged experiment's runs, scenario names and base node ids by scenario id. Skipped runs
        and runs whose simulated user never held its role (``simulation.valid`` false) are left out:
        neither says anything about the agent, and a pair missing a side decides nothing."""
        if self.path is None:
            return [], {}, {}
        _, doc = read_document(self.path, self.results_dir)
        return _runs_of_entries(doc.get("scenario_results") or [])

    def nodeids(self) -> dict[str, str]:
        """Scenario id → node id without the iteration, from the merged experiment's entries."""
        if self.path is None:
            return {}
        _, results, _ = load_document(self.path, self.results_dir)
        return {r.id: base_nodeid(r.nodeid) for r in results if r.nodeid}

    def cost_per_run(self) -> dict[str, float]:
        """Scenario id → its mean recorded cost per run (scenarios without a recorded cost left out)."""
        if self.path is None:
            return {}
        return read_experiment(self.path, self.results_dir)[1].cost_per_run()

    def spent_usd(self) -> float | None:
        """The recorded cost of every run so far (None: some run's cost is unknown)."""
        if self.path is None:
            return 0.0
        exp = read_experiment(self.path, self.results_dir)[1]
        if any(a.cost_usd is None or not a.cost_complete for a in exp.scenarios.values()):
            return None
        return sum(a.cost_usd or 0.0 for a in exp.scenarios.values())


def _runs_of_entries(entries: Sequence[dict[str, Any]]) -> tuple[list[Run], dict[str, str], dict[str, str]]:
    from fabtest.experiment.stats import entry_check_counts

    out, names, nodeids = [], {}, {}
    for e in entries:
        sid = str(e.get("id"))
        names[sid] = str(e.get("name") or sid)
        if e.get("nodeid"):
            nodeids[sid] = base_nodeid(str(e["nodeid"]))
        simulation = e.get("simulation")
        if e.get("skipped") or (isinstance(simulation, dict) and simulation.get("valid") is False):
            continue
        ev = e.get("evaluations") or {}
        criteria, _ = entry_check_counts(e)
        out.append(Run(sid, int(e.get("iteration") or 1), bool(e.get("passed")),
                       (ev.get("passed", 0) >= ev["total"]) if ev.get("total") else None,
                       {n: p[0] >= p[1] for n, p in criteria.items() if p[1]}))
    return out, names, nodeids


def _last_line(text: str) -> str:
    """The child's last line that says something (an error, pytest's summary)."""
    lines = [line.strip() for line in text.splitlines() if line.strip() and not set(line.strip()) <= set("=-_ ")]
    for line in reversed(lines):
        if "error" in line.lower():
            return line[:300]
    return lines[-1][:300] if lines else ""

