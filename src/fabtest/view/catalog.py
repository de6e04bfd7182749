"""The results directory as the browser sees it: one row per experiment from the compact index.

Listing and trends never parse transcripts: each file is read with ``compare.read_experiment``
(the header lines and the ``scenario_index`` row by row), which gives the row shown in the table
and the per-scenario totals the regression gate needs, in one read. Rows are kept per file and
re-read only when the file's size or modification time changes, so a server over hundreds of
experiments re-reads only what a new run wrote. A whole experiment is loaded only when its page
is opened.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabtest._internal.terminal import inert
from fabtest.compare.compute import Comparison, compare
from fabtest.compare.gate import regression_gate
from fabtest.compare.read import Experiment, read_experiment
from fabtest.experiment.reader import ExperimentFileError, list_experiment_files, read_document, read_entries
from fabtest.experiment.robustness import attach_robustness
from fabtest.view.layout import as_dict

__all__ = ["Catalog", "ExperimentRow"]


@dataclass(frozen=True, slots=True)
class ExperimentRow:
    """What the table and the trends show of one experiment (plain values from its header)."""

    id: str
    path: Path
    name: str
    tags: tuple[str, ...]
    branch: str
    commit: str
    dirty: bool
    timestamp: str
    scenarios: int
    iterations: int
    completion: float | None
    evaluation: float | None
    #: (min, max) of the per-iteration rates when the experiment ran several iterations
    completion_spread: tuple[float, float] | None
    evaluation_spread: tuple[float, float] | None
    criteria: dict[str, float | None]
    cost_usd: float | None
    #: mean wall time of a scenario run, in seconds (the agent's and the LLMs' time together)
    latency_s: float | None
    interrupted: bool
    shard: str | None
    #: ``"production"`` for ``fabtest score``'s experiments, "" for test runs
    source: str = ""


def _spread(variance: Any, key: str) -> tuple[float, float] | None:
    runs = variance.get("runs") if isinstance(variance, dict) else None
    values = [r[key] for r in runs or [] if isinstance(r, dict) and isinstance(r.get(key), (int, float))]
    return (min(values), max(values)) if len(values) >= 2 else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def row_of(path: Path, doc: dict[str, Any]) -> ExperimentRow:
    """The row of a (lean or whole) document."""
    exp, summary = doc["experiment"], doc["summary"]
    total = summary.get("total_scenarios") or 0
    counted = summary.get("counted_scenarios") or 0
    duration = _number(summary.get("duration_s"))
    cost = as_dict(summary.get("cost"))
    criteria = as_dict(doc.get("criteria_results"))
    return ExperimentRow(
        id=str(exp.get("id")), path=path, name=str(exp.get("name") or ""),
        tags=tuple(str(t) for t in exp.get("tags") or []), branch=str(exp.get("git_branch") or ""),
        commit=str(exp.get("git_commit") or ""), dirty=bool(exp.get("git_dirty")),
        timestamp=str(exp.get("timestamp") or ""), scenarios=int(total), iterations=int(exp.get("iterations") or 1),
        completion=_number(summary.get("completion_rate")), evaluation=_number(summary.get("evaluation_rate")),
        completion_spread=_spread(doc.get("variance"), "completion_rate"),
        evaluation_spread=_spread(doc.get("variance"), "evaluation_rate"),
        criteria={str(k): _number(v.get("rate")) for k, v in criteria.items() if isinstance(v, dict)},
        cost_usd=_number(cost.get("total_usd")),
        latency_s=duration / counted if duration is not None and counted else None,
        interrupted=bool(exp.get("interrupted")), shard=exp.get("shard"), source=str(exp.get("source") or ""),
    )


@dataclass(slots=True)
class _Cached:
    stamp: tuple[int, int]
    row: ExperimentRow
    exp: Experiment


@dataclass(slots=True)
class Catalog:
    """The experiments of one results directory, re-read as files change (thread-safe)."""

    results_dir: Path
    _files: dict[Path, _Cached] = field(default_factory=dict)
    _gates: dict[tuple[tuple[Path, int], tuple[Path, int]], tuple[frozenset[str], str]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    #: the files of the last listing that are not readable experiments: path -> why (the list page shows them)
    skipped: dict[Path, str] = field(default_factory=dict)

    def rows(self) -> list[ExperimentRow]:
        """Every readable experiment, oldest first (by timestamp, then id); a file that is not
        one is skipped, kept in ``skipped`` for the list page to name, and warned about on stderr
        once (as ``fabtest list`` does), not on every request."""
        with self._lock:
            seen: dict[Path, _Cached] = {}
            skipped: dict[Path, str] = {}
            for path in list_experiment_files(self.results_dir):
                try:
                    stat = path.stat()
                except OSError as exc:  # a dangling link, a file removed since the listing
                    skipped[path] = str(exc)
                    continue
                stamp = (stat.st_mtime_ns, stat.st_size)
                cached = self._files.get(path)
                if cached is None or cached.stamp != stamp:
                    try:
                        _, exp = read_experiment(path, self.results_dir)
                        cached = _Cached(stamp, row_of(path, exp.doc), exp)
                    except (ExperimentFileError, OSError, KeyError, TypeError, AttributeError, ValueError) as exc:
                        skipped[path] = str(exc)
                        continue
                seen[path] = cached
            for path, why in skipped.items():
                if self.skipped.get(path) != why:
                    print(inert(f"fabtest view: warning: skipping {path}: {why}"), file=sys.stderr)
            self._files, self.skipped = seen, skipped
            return sorted((c.row for c in seen.values()), key=lambda r: (r.timestamp, r.id))

    def row(self, experiment_id: str) -> ExperimentRow | None:
        return next((r for r in self.rows() if r.id == experiment_id), None)

    def _experiment(self, row: ExperimentRow) -> Experiment:
        with self._lock:
            return self._files[row.path].exp

    def comparison(self, baseline: ExperimentRow, current: ExperimentRow) -> Comparison:
        """``fabtest-compare``'s comparison of two experiments, from their index totals."""
        return compare(self._experiment(baseline), self._experiment(current))

    def regressions(self, baseline: ExperimentRow, current: ExperimentRow) -> frozenset[str]:
        """What tripped the gate ``fabtest-compare --fail-on-regression`` applies, current against
        baseline: ``"completion"`` and ``"criterion:<name>"``, and ``"scenario:<id>:..."`` for one scenario
        found worse (its completion rings the completion series too; cached per pair of file versions)."""
        return self._gate(baseline, current)[0]

    def outcome(self, baseline: ExperimentRow, current: ExperimentRow) -> str:
        """The gate's decision, current against baseline: ``"worse"``, ``"not worse"`` or
        ``"undecided"`` (docs/gates.md; cached with the regressions)."""
        return self._gate(baseline, current)[1]

    def _gate(self, baseline: ExperimentRow, current: ExperimentRow) -> tuple[frozenset[str], str]:
        with self._lock:
            key = ((baseline.path, self._files[baseline.path].stamp[0]),
                   (current.path, self._files[current.path].stamp[0]))
        done = self._gates.get(key)
        if done is None:
            gate = regression_gate(self.comparison(baseline, current), describe=False)
            found = {e.metric for e in gate.failures()}
            if any(m.startswith("scenario:") and m.endswith(":completion") for m in found):
                found.add("completion")
            done = self._gates[key] = (frozenset(found), gate.outcome)
        return done

    def previous(self, row: ExperimentRow, rows: list[ExperimentRow] | None = None) -> ExperimentRow | None:
        """The experiment before ``row`` on its branch and of its kind (test run or production score;
        whole runs only, by time): what the list compares it with."""
        if row.shard:
            return None
        line = [r for r in (rows if rows is not None else self.rows())
                if not r.shard and r.branch == row.branch and r.source == row.source]
        at = next((i for i, r in enumerate(line) if r.id == row.id), 0)
        return line[at - 1] if at > 0 else None

    def header(self, row: ExperimentRow) -> dict[str, Any]:
        """The experiment's header sections (no scenario entries), as read for the listing."""
        return self._experiment(row).doc

    def scenario_ids(self, row: ExperimentRow) -> list[str]:
        """The stable ids of the scenarios the experiment ran, from its index."""
        return list(self._experiment(row).scenarios)

    def runs(self, row: ExperimentRow, scenario_id: str) -> list[dict[str, Any]]:
        """The whole entries of one scenario (every iteration), reading only their lines of the
        file when it is in the written layout."""
        entries = read_entries(row.path, [scenario_id])
        if entries is None:
            entries = [x for x in self.document(row)["scenario_results"]
                       if isinstance(x, dict) and x.get("id") == scenario_id]
        return entries

    def document(self, row: ExperimentRow) -> dict[str, Any]:
        """The whole document of one experiment (transcripts included), read when its page opens,
        with its criterion robustness audit (``fabtest rejudge --perturb``) when there is one."""
        return attach_robustness(read_document(row.path, self.results_dir)[1], row.path.parent)
