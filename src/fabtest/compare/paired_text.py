"""The A/B decision (:mod:`fabtest.compare.paired`) as text: the verdict line, one line per metric,
and the Markdown section, kept apart from the computing as the fixed gate's are (gate_text.py)."""

from __future__ import annotations

import math
from collections.abc import Callable

from fabtest.compare.paired import PairedDecision, PairedMetric

__all__ = ["combined_line", "metric_line", "not_worse_text", "paired_markdown", "paired_verdict"]


def _counts(m: PairedMetric) -> str:
    (bp, bn), (cp, cn) = m.baseline, m.current
    return f"{bp}/{bn} → {cp}/{cn} paired runs"


def metric_line(m: PairedMetric) -> str:
    """``worse|not worse|undecided <label>: counts; e-values against their thresholds``."""
    text = f"{m.outcome.upper() if m.outcome != 'undecided' else 'undecided'} {m.label}: {_counts(m)}"
    e_worse = m.to_dict()["e_worse"]
    text += f"; worse e-value {e_worse} (needs {m.need_worse:.4g})"
    if m.not_worse is not None:
        text += f", {not_worse_text(m)}"
    if m.decided_at is not None:
        text += f"; decided at iteration {m.decided_at}"
    return text


def not_worse_text(m: PairedMetric) -> str:
    """``not-worse z 2.31 (needs 2.12 at 60 % of the planned runs)``: the last look of the metric's
    group-sequential test, its boundary there, and how much of the plan it has seen."""
    test = m.not_worse
    if test is None:
        return "-"
    if test.z is None or test.bound is None:
        return f"not-worse z not computed yet ({test.fraction():.0%} of the planned runs)"
    z = "inf" if math.isinf(test.z) else f"{test.z:.3g}"
    bound = "no alpha left" if math.isinf(test.bound) else f"needs {test.bound:.3g}"
    return f"not-worse z {z} ({bound} at {test.fraction():.0%} of the planned runs)"


def combined_line(d: PairedDecision) -> str:
    """The metrics' worse evidence together: the weighted mean of their wealths against 1 / alpha."""
    together = d.combined_worse >= 1.0 / d.alpha
    return (f"{'WORSE' if together else 'no drop shown by'} every metric together: weighted mean of the worse e-values "
            f"{d.combined_worse:.4g} (needs {1.0 / d.alpha:.4g})"
            + ("; together they show a drop" if together else ""))


def paired_verdict(d: PairedDecision, stopped: str, moved: str | None = None) -> str:
    """The one line every output of ``fabtest ab`` opens with; undecided, it says first what moved
    most for the worse (``moved``, compare/moved.py's line), as the fixed gate's does."""
    if d.outcome == "worse":
        found = [m for m in d.metrics if m.outcome == "worse"]
        if not found:  # the weighted mean decided: name the metrics with the most evidence of a drop
            lead = sorted(d.metrics, key=lambda m: -m.worse.peak)[:2]
            return (f"worse: the metrics together (weighted mean of their e-values {d.combined_worse:.3g} reached "
                    f"1/alpha), most of all " + "; ".join(f"{m.label} {_counts(m)}" for m in lead))
        parts = [f"{m.label} {_counts(m)}" for m in found[:3]]
        more = f"; and {len(found) - 3} more" if len(found) > 3 else ""
        return f"worse: {'; '.join(parts)}{more}"
    pooled = [m for m in d.metrics if m.pooled]
    if d.outcome == "not worse":
        return (f"not worse: every pooled metric shown within {d.margin * 100:g} points and no scenario worse "
                f"({len(pooled)} pooled metric(s), {d.pairs} paired runs, alpha {d.alpha:g})")
    first = f"{moved}; " if moved else ""
    if d.problems:
        return f"undecided: {first}{d.problems[0]}"
    if d.held:
        waiting = [m for m in d.metrics if m.metric in d.held]
        falling = "; ".join(f"{m.label} {_counts(m)} falls (worse e-value {m.worse_e():.3g}, needs {m.need_worse:.4g} "
                          "to decide)" for m in waiting[:3])
        return (f"undecided: {first}{falling}; every pooled metric is within {d.margin * 100:g} points, but not worse "
                f"waits for this ({stopped})")
    open_ = d.undecided()
    names = ", ".join(m.label for m in open_[:3]) + (f" and {len(open_) - 3} more" if len(open_) > 3 else "")
    return (f"undecided: {first}{names or 'nothing was compared'} not shown within {d.margin * 100:g} points "
            f"({stopped})")


def paired_markdown(d: PairedDecision, stopped: str, exit_code: int, escape: Callable[[str], str]) -> list[str]:
    icon = {"worse": "❌ worse", "not worse": "✅ not worse", "undecided": "⚠️ undecided"}[d.outcome]
    lines = ["", f"### A/B decision: {icon} (exit {exit_code})", "", f"Stopped: {escape(stopped)}", ""]
    lines += [f"> ⚠️ {escape(p)}" for p in d.problems]
    lines += ["| Metric | Paired runs | Worse e-value (needs) | Not worse: score at the last look | Decision |",
              "|---|---|---:|---:|---|"]
    for m in d.metrics:
        if not m.pooled and m.outcome != "worse":
            continue
        data = m.to_dict()
        nw = escape(not_worse_text(m).removeprefix("not-worse ")) if m.not_worse is not None else "-"
        lines.append(f"| {escape(m.label)} | {_counts(m)} | {data['e_worse']} ({m.need_worse:.4g}) | {nw} | "
                     f"{m.outcome} |")
    together = d.combined_worse >= 1.0 / d.alpha
    lines.append(f"| every metric together (weighted mean) | | {d.combined_worse:.4g} ({1.0 / d.alpha:.4g}) | - | "
                 f"{'worse' if together else 'no drop shown'} |")
    return lines
