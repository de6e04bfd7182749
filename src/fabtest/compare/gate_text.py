"""The gate of ``fabtest-compare`` in words: one line per metric, the Markdown section, the JSON key.

Computing is in :mod:`fabtest.compare.gate`; this module only words and lays it out. The gate's plain
data (:class:`Gate`, :class:`GateEntry`) lives here, below the computing that fills it, so the
words need nothing from :mod:`fabtest.compare.gate` (``gate`` re-exports both).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from fabtest.experiment.fmt import pct

__all__ = ["DEFAULT_MARGIN", "Decision", "Gate", "GateEntry", "Kind", "Outcome", "entry_line", "gate_dict",
           "gate_lines", "gate_markdown", "p_text"]

DEFAULT_MARGIN = 0.10  # "not worse": no gated metric dropped by more than 10 points

Kind = Literal["drop", "floor", "increase"]
Decision = Literal["fail", "pass", "undecided"]
Outcome = Literal["worse", "not worse", "undecided"]


@dataclass(slots=True)
class GateEntry:
    """One tested metric: its counts, the test, raw and family-adjusted p, and the decision."""

    #: "completion", "evaluation", "criterion:NAME", "floor:completion", "cost", "scenario:ID:completion" ...
    metric: str
    label: str
    kind: Kind
    test: str
    baseline: list[float] | None  # [passed, runs] (drops), None (floors), [units up, units down] (increases)
    current: list[float] | None
    observed: str  # the counts and rates in words
    p_raw: float | None
    p_min: float = 0.0  # the smallest p-value these margins could give (Tarone's rule)
    p_adjusted: float | None = None
    decision: Decision = "undecided"  # fail: worse; pass: not worse (shown non-inferior); undecided
    reason: str = ""
    #: when it passes: the smallest drop (drops), the highest rate below the floor (floors) these
    #: counts would have flagged, and the iterations at which a 20-point drop would be flagged
    detectable: float | None = None
    iterations_for_20pt: int | None = None
    modified: bool = False  # a criterion whose definition changed (gated with --gate-modified)
    within_limit: bool = False  # an increase whose mean over the shared scenarios stays within the limit
    #: the floor or the limit (a fraction) the metric is held to
    threshold: float | None = None
    #: runs per iteration behind the counts (for iterations_for_20pt)
    per_iteration: float = 1.0
    outcome: Outcome = "undecided"
    margin: float | None = None  # the non-inferiority margin (a fraction)
    #: 95 % Wilson intervals of the baseline and current rates (drops, floors)
    baseline_interval: tuple[float, float] | None = None
    current_interval: tuple[float, float] | None = None
    #: the one-sided (1 - alpha) lower bound of current - baseline (drops; Newcombe's hybrid score)
    difference_lower: float | None = None
    #: runs per side for 80 % power: to show "not worse" at the margin when nothing changed, and to
    #: flag a drop as large as the margin
    runs_to_decide: int | None = None
    runs_to_detect: int | None = None
    scenario: str | None = None  # the scenario id of a per-scenario hypothesis


@dataclass(slots=True)
class Gate:
    alpha: float
    method: str
    entries: list[GateEntry]
    warnings: list[str]
    failed: bool
    exit_code: int
    family_size: int  # hypotheses tested together (every one that could reach the level counts)
    outcome: Outcome = "undecided"
    margin: float = DEFAULT_MARGIN
    verdict: str = ""
    #: why the gate cannot be "not worse" whatever the metrics say (no shared scenario, ...)
    problems: list[str] = field(default_factory=list)
    #: per-scenario hypotheses built (those that could reach the level); the rejected ones are in ``entries``
    scenario_hypotheses: int = 0
    #: scenario runs compared, per side
    runs: dict[str, int] = field(default_factory=dict)

    def failures(self) -> list[GateEntry]:
        return [e for e in self.entries if e.decision == "fail"]


def p_text(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


_WORD = {"fail": "FAIL", "pass": "PASS", "undecided": "UNDECIDED"}


def _interval_text(e: GateEntry) -> str:
    def one(ci: tuple[float, float] | None) -> str:
        return "n/a" if ci is None else f"{ci[0] * 100:.1f}-{ci[1] * 100:.1f}%"

    if e.kind == "floor":
        return f"; 95% interval {one(e.current_interval)}" if e.current_interval else ""
    if e.baseline_interval is None and e.current_interval is None:
        return ""
    return f"; 95% intervals {one(e.baseline_interval)} → {one(e.current_interval)}"


def entry_line(e: GateEntry) -> str:
    head = f"{_WORD[e.decision]} {e.label}: {e.observed}{_interval_text(e)}"
    if e.p_raw is None:
        return f"{head}; {e.reason}"
    line = f"{head}; {e.test}: p = {p_text(e.p_raw)}, adjusted p = {p_text(e.p_adjusted)}; {e.reason}"
    if e.decision == "undecided" and e.kind != "increase":
        line += "; " + _power_text(e)
    return line


def _power_text(e: GateEntry) -> str:
    if e.kind == "drop":
        could = ("no drop could have been detected with these counts" if e.detectable is None
                 else f"the smallest detectable drop was {e.detectable * 100:.0f} points")
    else:
        could = ("no rate could have been flagged with these counts" if e.detectable is None
                 else f"a rate of {pct(e.detectable)} or less would have been flagged")
    its = ("a 20-point drop cannot be detected" if e.iterations_for_20pt is None
           else f"about {e.iterations_for_20pt} iteration{'s' if e.iterations_for_20pt != 1 else ''} "
                "would detect a 20-point "
                + ("drop" if e.kind == "drop" else "shortfall"))
    margin = f"{(e.margin or 0.0) * 100:g}-point"
    power = []
    if e.runs_to_decide:
        power.append(f"about {e.runs_to_decide} runs per side would show 'not worse' with 80% power if nothing changed")
    if e.runs_to_detect:
        power.append(f"about {e.runs_to_detect} would flag a {margin} drop with 80% power")
    return "; ".join([could, its, *power])


def gate_lines(gate: Gate) -> list[str]:
    """The gate in text: warnings, one line per metric (and per scenario found worse), what keeps it
    undecided, then the outcome with the verdict."""
    lines = list(gate.warnings)
    lines += [entry_line(e) for e in gate.entries]
    lines += [f"UNDECIDED: {problem}" for problem in gate.problems]
    word = {"worse": "FAILED", "not worse": "PASSED", "undecided": "UNDECIDED"}[gate.outcome]
    undecided = sum(1 for e in gate.entries if e.decision == "undecided")
    lines.append(f"gate {word} (exit {gate.exit_code}): {gate.verdict}. {len(gate.failures())} of {len(gate.entries)} "
                 f"metric(s) worse, {undecided} undecided; "
                 f"{gate.family_size} hypothes{'i' if gate.family_size == 1 else 'e'}s able "
                 "to reach the level in one "
                 f"family at alpha {gate.alpha:g} ({gate.method}; {gate.scenario_hypotheses} per scenario); "
                 f"margin {gate.margin * 100:g} points")
    return lines


def gate_dict(gate: Gate | None, warnings: Sequence[str] = ()) -> dict[str, Any]:
    """The JSON ``gate`` key: the outcome, the margin, one entry per metric (with its intervals and
    decision), the exit code (``warnings``: the modified criteria's, when no gate was asked for)."""
    if gate is None:
        return {"requested": False, "decision": "pass", "exit_code": 0, "metrics": [],
                "warnings": list(warnings)}
    data = asdict(gate)
    metrics = data.pop("entries")
    for m in metrics:
        m.pop("per_iteration", None)
    decision = {"worse": "fail", "not worse": "pass", "undecided": "undecided"}[gate.outcome]
    return {"requested": True, "outcome": gate.outcome, "verdict": gate.verdict, "decision": decision,
            "exit_code": gate.exit_code, "margin": gate.margin, "alpha": gate.alpha, "method": gate.method,
            "family_size": gate.family_size, "scenario_hypotheses": gate.scenario_hypotheses, "unit": "scenario run",
            "runs": gate.runs, "problems": gate.problems, "metrics": metrics, "warnings": gate.warnings}


def gate_markdown(gate: Gate | None, warnings: Sequence[str], escape: Any) -> list[str]:
    """The gate as a Markdown section (``escape`` makes results-file text table-safe); without a
    gate, just the modified criteria's warnings."""
    if gate is None:
        return ["", *(f"> ⚠️ {escape(w)}" for w in warnings)] if warnings else []
    icon = {"worse": "❌ worse", "not worse": "✅ not worse", "undecided": "⚠️ undecided"}[gate.outcome]
    lines = ["", f"### Gate: {icon} (exit {gate.exit_code})", ""]
    lines += [f"> ⚠️ {escape(w)}" for w in (*gate.warnings, *gate.problems)]
    if gate.warnings or gate.problems:
        lines.append("")
    lines += ["| Metric | Counts | 95% intervals | Test | p | adjusted p | Decision |",
              "|---|---|---|---|---:|---:|---|"]
    for e in gate.entries:
        lines.append(f"| {escape(e.label)} | {escape(e.observed)} | "
                     f"{escape(_interval_text(e).split('; ')[-1])} | {e.test} | "
                     f"{p_text(e.p_raw)} | {p_text(e.p_adjusted)} | {e.outcome}: {escape(e.reason)} |")
    lines += ["", f"{gate.family_size} hypotheses able to reach the level, tested as one family "
                  f"at alpha {gate.alpha:g} "
                  f"({gate.method}); margin {gate.margin * 100:g} points; the unit is the scenario run."]
    return lines
