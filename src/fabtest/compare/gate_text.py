"""The gate of ``fabtest-compare`` in words: one line per metric, the Markdown section, the JSON key.

Computing is in :mod:`fabtest.compare.gate`; this module only words and lays it out. Both read the
gate's plain data (:class:`Gate`, :class:`GateEntry`) from :mod:`fabtest.compare.gate_model`, so the
words need nothing from the computing (``gate`` re-exports both).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from fabtest.compare.gate_model import Gate, GateEntry
from fabtest.experiment.fmt import pct

__all__ = ["entry_line", "gate_dict", "gate_lines", "gate_markdown", "p_text"]

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
