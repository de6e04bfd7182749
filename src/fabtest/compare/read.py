"""An experiment file as the comparison reads it: one row per scenario, added up, small in memory.

Works on the raw documents (plain dicts), never building result models, so reading an experiment of
100,000 scenario results stays fast and small (:mod:`fabtest.compare.compute` explains the rules).
"""

from __future__ import annotations

import gc
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabtest.experiment.export import entry_topics
from fabtest.experiment.reader import read_entries, read_index
from fabtest.experiment.stats import NOT_MEASURED as _NOT_MEASURED
from fabtest.experiment.stats import entry_check_counts, is_criterion

__all__ = ["NOT_MEASURED", "Experiment", "ScenarioTally", "criteria_definitions", "hard_criteria", "merge_counts",
           "no_gc", "read_experiment", "run_level", "summarise"]


# ---------------------------------------------------------------------------------------------
# per-scenario aggregation over raw dicts

#: failure types that say nothing about the agent (errors.py): the simulated user or the judge failed.
#: Such a run is "not measured": kept out of every metric of the agent, like a skipped one, and
#: counted apart so that a scenario left with no measured run makes the gate undecided.
NOT_MEASURED = _NOT_MEASURED


class ScenarioTally:
    """One scenario's runs added up (every run of an experiment is one row of its index)."""

    __slots__ = ("name", "runs", "passes", "skipped", "turns", "eval_passed", "eval_total", "topic_runs", "topics",
                 "failures", "criteria", "checks", "iterations", "cost_usd", "cost_complete", "eval_runs", "eval_clean",
                 "eval_rate_sum", "criteria_runs", "checks_runs", "unmeasured")

    def __init__(self, name: str) -> None:  # a plain class: 100,000 are made per experiment
        self.name = name
        self.runs = self.passes = self.skipped = self.turns = self.eval_passed = self.eval_total = 0
        self.unmeasured = 0  # runs ended by the simulator or the judge (NOT_MEASURED): not the agent's
        self.topic_runs = self.topics = 0
        self.failures: Counter[str] | None = None
        self.criteria: dict[str, list[int]] = _NO_COUNTS  # read-only until a run's counts replace it
        self.checks: dict[str, list[int]] = _NO_COUNTS
        #: iteration → [passed, ran, ev_p, ev_t]; None while every run was iteration 1 (then the totals say it)
        self.iterations: dict[int, list[int]] | None = None
        self.cost_usd: float | None = None  # every run's cost, skipped ones too (None: none recorded)
        self.cost_complete = True
        # the gate's unit is the run (experiment/gate.py): runs that rated a soft check, runs whose every
        # soft check passed, and the sum of the runs' own evaluation rates
        self.eval_runs = self.eval_clean = 0
        self.eval_rate_sum = 0.0
        #: criterion → [runs whose every rating of it passed, runs that rated it]; None while one run
        #: (then ``run_level(criteria)`` says it)
        self.criteria_runs: dict[str, list[int]] | None = None
        #: the same for the deterministic checks (the per-scenario hypotheses of the gate)
        self.checks_runs: dict[str, list[int]] | None = None

    def run_counts(self, kind: str) -> dict[str, list[int]]:
        """``{label: [runs whose every rating passed, runs that rated it]}`` of the criteria or checks."""
        kept = self.criteria_runs if kind == "criteria" else self.checks_runs
        if kept is not None:
            return kept
        return run_level(self.criteria if kind == "criteria" else self.checks) if self.runs else {}

    def by_iteration(self) -> dict[int, list[int]]:
        if self.iterations is not None:
            return self.iterations
        return {1: [self.passes, self.runs, self.eval_passed, self.eval_total]} if self.runs else {}


_NO_COUNTS: dict[str, list[int]] = {}  # shared by the scenarios that never ran; never written to


def merge_counts(into: dict[str, list[int]], counts: dict[str, Any]) -> None:
    for name, pair in counts.items():
        slot = into.setdefault(name, [0, 0])
        slot[0] += int(pair[0])
        slot[1] += int(pair[1])


def run_level(counts: dict[str, Any]) -> dict[str, list[int]]:
    """One run's ``{label: [passed, rated]}`` as ``{label: [1 if every rating passed, 1 if rated]}``."""
    return {name: [int(bool(pair[1]) and pair[0] >= pair[1]), int(bool(pair[1]))] for name, pair in counts.items()}


def _add_run(into: dict[str, list[int]], counts: dict[str, Any]) -> None:
    for name, pair in counts.items():
        slot = into.setdefault(name, [0, 0])
        if pair[1]:
            slot[1] += 1
            slot[0] += pair[0] >= pair[1]


def _owned(counts: dict[str, Any], runs: int) -> dict[str, list[int]]:
    """The counts of the first run (read-only, maybe shared) copied before a second run adds to them."""
    return {name: [int(pair[0]), int(pair[1])] for name, pair in counts.items()} if runs == 2 else counts


@dataclass(slots=True)
class Experiment:
    """What a comparison reads of one experiment: every section but the entries, and per-scenario
    totals (``scenarios``, by stable id) added up as the index rows or entries were read."""

    doc: dict[str, Any]  # a whole document keeps its entries; a lean one (``"lean": true``) has none
    scenarios: dict[str, ScenarioTally] = field(default_factory=dict)
    definitions: dict[str, set[str]] = field(default_factory=dict)
    path: Path | None = None  # the file a lean read came from (its few added/removed entries are read again)

    def entries_of(self, ids: AbstractSet[str]) -> Iterable[dict[str, Any]]:
        """The whole entries of ``ids``: from the document, or read from the file of a lean read."""
        if not ids:
            return ()
        if self.doc.get("lean") and self.path is not None:
            return read_entries(self.path, ids) or ()
        return self.doc.get("scenario_results") or ()

    def add_rows(self, rows: Iterable[Sequence[Any]]) -> None:
        """Adds runs given as ``scenario_index`` rows (``export.index_row``'s fields, normalised)."""
        aggs = self.scenarios
        for (sid, name, iteration, passed, skipped, turns, failure_type, ev_p, ev_t, topics, criteria, checks,
             spent, complete) in rows:
            agg = aggs.get(sid)
            if agg is None:
                agg = aggs[sid] = ScenarioTally(name or sid)
            if spent is not None:
                agg.cost_usd = (0.0 if agg.cost_usd is None else agg.cost_usd) + spent
                agg.cost_complete = agg.cost_complete and complete
            if skipped:
                agg.skipped += 1
                continue
            if not passed and failure_type in NOT_MEASURED:
                agg.unmeasured += 1
                continue
            if iteration != 1 and agg.iterations is None:
                agg.iterations = agg.by_iteration()
            agg.runs += 1
            if passed:
                agg.passes += 1
            else:
                if agg.failures is None:
                    agg.failures = Counter()
                agg.failures[failure_type or "assertion"] += 1
            agg.turns += turns
            if topics is not None:
                agg.topic_runs += 1
                agg.topics += topics
            agg.eval_passed += ev_p
            agg.eval_total += ev_t
            if ev_t:
                agg.eval_runs += 1
                agg.eval_clean += ev_p >= ev_t
                agg.eval_rate_sum += ev_p / ev_t
            if agg.runs == 2:
                agg.criteria_runs, agg.checks_runs = run_level(agg.criteria), run_level(agg.checks)
            if agg.criteria_runs is not None:
                _add_run(agg.criteria_runs, criteria)
            if agg.checks_runs is not None:
                _add_run(agg.checks_runs, checks)
            if agg.runs == 1:  # most scenarios run once: their counts are used as read (often one shared map)
                agg.criteria, agg.checks = criteria, checks
            else:
                agg.criteria, agg.checks = _owned(agg.criteria, agg.runs), _owned(agg.checks, agg.runs)
                merge_counts(agg.criteria, criteria)
                merge_counts(agg.checks, checks)
            if agg.iterations is not None:
                it = agg.iterations.setdefault(iteration, [0, 0, 0, 0])
                it[0] += passed
                it[1] += 1
                it[2] += ev_p
                it[3] += ev_t

    def index_problem(self) -> str | None:
        """A sentence when the runs added up (from the scenario index, or the entries) disagree with the
        document's summary, which was computed from the results when the file was written: an edited
        or damaged index must not decide a gate."""
        summary = self.doc.get("summary")
        wanted = {k: summary.get(k) for k in ("passed", "failed", "skipped")} if isinstance(summary, dict) else {}
        if not wanted or not all(isinstance(v, int) and not isinstance(v, bool) for v in wanted.values()):
            return None  # an older or hand-made file without the counts: nothing to check against
        ended = summary.get("unmeasured") if isinstance(summary, dict) else None
        if isinstance(ended, int) and not isinstance(ended, bool):  # counted apart since issue 44
            wanted["failed"] = int(wanted["failed"] or 0) + ended
        aggs = self.scenarios.values()
        passes = sum(a.passes for a in aggs)
        found = {"passed": passes, "failed": sum(a.runs + a.unmeasured for a in aggs) - passes,
                 "skipped": sum(a.skipped for a in aggs)}
        if found == wanted:
            return None
        name = self.doc.get("experiment", {}).get("id") if isinstance(self.doc.get("experiment"), dict) else None
        return (f"experiment {name}: its scenario runs add up to {found['passed']} passed, {found['failed']} failed, "
                f"{found['skipped']} skipped, but its summary says {wanted['passed']}, {wanted['failed']}, "
                f"{wanted['skipped']} (an edited or damaged scenario index?)")

    def cost_per_run(self) -> dict[str, float]:
        """Scenario id → its recorded cost per run (skipped runs included, as the cost is), where recorded."""
        return {sid: a.cost_usd / max(1, a.runs + a.skipped)
                for sid, a in self.scenarios.items() if a.cost_usd is not None}

    def shared_costs(self, shared: AbstractSet[str]) -> dict[str, tuple[float, bool]] | None:
        """The shared scenarios' costs for ``cost_delta_by_id`` (None: none recorded)."""
        aggs = self.scenarios
        out = {sid: (a.cost_usd, a.cost_complete) for sid in shared if (a := aggs[sid]).cost_usd is not None}
        return out or None


def _entry_row(e: dict[str, Any]) -> tuple[Any, ...]:
    """A whole (or lean) ``scenario_results`` entry as a normalised index row."""
    sid = str(e.get("id"))
    ev = e.get("evaluations")
    ev_p, ev_t = (ev.get("passed") or 0, ev.get("total") or 0) if isinstance(ev, dict) else (0, 0)
    if "criteria_counts" in e:  # a lean entry from the scenario index
        criteria, checks = e.get("criteria_counts") or {}, e.get("checks_counts") or {}
        usd, complete = e.get("cost_usd"), e.get("cost_complete", True)
    else:
        criteria, checks = entry_check_counts(e)
        spent = e.get("cost")
        usd, complete = (spent.get("usd"), spent.get("complete", True)) if isinstance(spent, dict) else (None, True)
    usd = float(usd) if isinstance(usd, (int, float)) else None
    return (sid, e.get("name"), int(e.get("iteration") or 1), bool(e.get("passed")), e.get("skipped"),
            e.get("turns") or 0, e.get("failure_type"), ev_p, ev_t, entry_topics(e), criteria, checks, usd,
            bool(complete))


def criteria_definitions(doc: dict[str, Any]) -> dict[str, set[str]]:
    """Criterion name → its description(s), from the configuration section or the scenarios."""
    config = doc.get("configuration")
    if isinstance(config, dict) and isinstance(config.get("criteria"), dict):
        return {k: {str(v)} for k, v in config["criteria"].items()}
    out: dict[str, set[str]] = {}
    for e in doc["scenario_results"]:
        for name, desc in (e.get("criteria") or {}).items():
            out.setdefault(name, set()).add(str(desc))
    return out


def hard_criteria(doc: dict[str, Any]) -> set[str]:
    """Criteria rated as ``must`` in the experiment (``criteria_results``' must counts; older files
    without them: from the entries' expectations when the document has them)."""
    results = doc.get("criteria_results")
    out = {name for name, entry in (results or {}).items() if isinstance(entry, dict) and entry.get("must")}
    for e in doc.get("scenario_results") or () if not out else ():
        block = e.get("expectations") if isinstance(e, dict) else None
        details = block.get("details") if isinstance(block, dict) else None
        out.update(str(d.get("criterion")) for d in details or () if isinstance(d, dict) and d.get("mode") == "must"
                   and is_criterion(d.get("type")))
    return out


def summarise(doc: dict[str, Any]) -> Experiment:
    """An experiment from a whole or lean document (its entries added up)."""
    exp = Experiment(doc, definitions=criteria_definitions(doc))
    exp.add_rows(map(_entry_row, doc["scenario_results"]))
    return exp


def read_experiment(ref: str | os.PathLike[str], results_dir: str | os.PathLike[str]) -> tuple[Path, Experiment]:
    """An experiment file read for a comparison: the index rows added up as they are parsed (no
    entry is built or kept), or, for a file in another layout, the whole document's entries."""
    exp = Experiment({})
    with no_gc():
        path, doc = read_index(ref, results_dir, exp.add_rows)
        if not doc.get("lean"):
            return path, summarise(doc)
    exp.doc, exp.definitions, exp.path = doc, criteria_definitions(doc), path
    return path, exp


@contextmanager
def no_gc() -> Iterator[None]:
    """The cycle collector paused: reading and adding up 100,000 rows makes only acyclic objects,
    and collections triggered by them, each walking every object kept so far, took a third of
    the time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
