"""The CI gate of ``fabtest-compare``: one family of tests, one decision, one line per metric.

Why a family: a gate that tests completion, the overall evaluation rate and every criterion each at
alpha fails an unchanged agent far more often than alpha (with 6 metrics, about 1 run in 4 at 0.05
before this module). Every metric the gate tests (drops of completion, of the overall evaluation
rate and of each criterion; each floor; the cost and latency limits) is one hypothesis of one family,
and the family is controlled with Holm's step-down procedure sharpened by Tarone's rule for discrete
tests (Hommel & Krummenauer 1998): at each step only the hypotheses whose smallest attainable p-value
could still reach the level are counted. A criterion rated on three runs can never reach p < 0.05,
so it does not dilute the others. The family-wise error rate stays at most alpha (tested by a
seeded simulation in tests/experiment/test_gate_family.py).

Why the scenario run is the unit: the evaluations of one conversation are not independent (an
agent that is rude in turn 2 is likely rude in turn 3), so pooling them as if they were makes small
wobbles look significant. Every metric is reduced to one pass/fail per scenario run before testing:

* completion: the run passed;
* a criterion: every rating of it in the run passed;
* the overall evaluation rate: every soft check of the run passed.

A drop is a one-sided Fisher's exact test on those run counts (exact p-values); a floor is a
one-sided exact binomial test of "the rate is at least the floor" (for the evaluation rate the
sum of the runs' own rates, rounded up, stands for the passes: a rate in [0, 1] is less spread
than a pass/fail, so this is conservative); a cost or latency limit is an exact sign test over the
shared scenarios (does the per-run figure of more scenarios rise beyond the limit than not?).

Computing is kept apart from rendering: ``evaluate`` builds a ``Gate`` of plain data; ``gate_lines``
and ``gate_markdown`` print it and ``gate_dict`` is the JSON ``gate`` key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from fabtest.compare.compute import DEFAULT_ALPHA, Comparison, CriterionDelta, drop_p_value
from fabtest.experiment.fmt import pct

__all__ = [
    "EXIT_FAILED",
    "EXIT_PASSED",
    "Gate",
    "GateEntry",
    "GateOptions",
    "adjust",
    "binomial_cdf",
    "evaluate",
    "gate_failures",
    "gate_dict",
    "gate_lines",
    "gate_markdown",
    "latency_per_run",
    "meets_min_completion",
    "modified_warnings",
    "paired",
    "regressed",
    "regression_gate",
    "sign_test_p",
]

EXIT_PASSED, EXIT_FAILED = 0, 1
DETECT_DROP = 0.20  # "how many iterations would detect a 20-point drop"
_MAX_ITERATIONS = 100_000

Kind = Literal["drop", "floor", "increase"]
Decision = Literal["fail", "pass", "not tested"]

_FISHER = "one-sided Fisher's exact test on scenario runs"
_BINOMIAL = "one-sided exact binomial test on scenario runs"
_SIGN = "exact sign test over shared scenarios"


@dataclass(slots=True)
class GateOptions:
    """What was asked of the gate (the ``fabtest-compare`` options)."""

    alpha: float = DEFAULT_ALPHA
    fail_on_regression: bool = False
    gate_modified: bool = False
    min_completion: float | None = None
    min_evaluation: float | None = None
    min_criteria: dict[str, float] = field(default_factory=dict)
    max_cost_increase: float | None = None  # a fraction: 0.2 for 20 %
    max_latency_increase: float | None = None

    def requested(self) -> bool:
        return bool(self.fail_on_regression or self.min_completion is not None or self.min_evaluation is not None
                    or self.min_criteria or self.max_cost_increase is not None or self.max_latency_increase is not None)


@dataclass(slots=True)
class GateEntry:
    """One tested metric: its counts, the test, raw and family-adjusted p, and the decision."""

    metric: str  # "completion", "evaluation", "criterion:NAME", "floor:completion", "cost" ...
    label: str
    kind: Kind
    test: str
    baseline: list[float] | None  # [passed, runs] (drops), None (floors), [units up, units down] (increases)
    current: list[float] | None
    observed: str  # the counts and rates in words
    p_raw: float | None
    p_min: float = 0.0  # the smallest p-value these margins could give (Tarone's rule)
    p_adjusted: float | None = None
    decision: Decision = "pass"
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


@dataclass(slots=True)
class Gate:
    alpha: float
    method: str
    entries: list[GateEntry]
    warnings: list[str]
    failed: bool
    exit_code: int
    family_size: int  # hypotheses tested together

    def failures(self) -> list[GateEntry]:
        return [e for e in self.entries if e.decision == "fail"]


# ---------------------------------------------------------------------------------------------
# exact tests


def binomial_cdf(x: int, n: int, p: float) -> float:
    """P(X <= x) for X ~ Binomial(n, p), exact: the terms are summed from ``x`` away from the mode
    (they shrink, and the loop stops once they no longer change the sum), so 100,000 runs cost
    a few hundred terms, not 100,000."""
    if x < 0:
        return 0.0
    if x >= n or p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    lp, lq, top = math.log(p), math.log1p(-p), math.lgamma(n + 1)

    def term(k: int) -> float:
        return math.exp(top - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * lp + (n - k) * lq)

    if x < n * p:  # the lower tail falls from x down
        return min(1.0, _falling_sum(term, range(x, -1, -1)))
    return max(0.0, 1.0 - _falling_sum(term, range(x + 1, n + 1)))  # 1 - the upper tail, falling from x + 1 up


def _falling_sum(term: Any, ks: range) -> float:
    total = 0.0
    for k in ks:
        value = term(k)
        total += value
        if value < total * 1e-17:
            break
    return total


def sign_test_p(up: int, down: int) -> float:
    """One-sided exact sign test: P(at least ``up`` of ``up + down`` fair coin flips come up)."""
    n = up + down
    if n == 0:
        return 1.0
    if n <= 1000:  # exact in integers
        return sum(math.comb(n, k) for k in range(up, n + 1)) / 2 ** n
    return min(1.0, 1.0 - binomial_cdf(up - 1, n, 0.5))


def _fisher_min(b: Sequence[float], c: Sequence[float]) -> float:
    """The smallest one-sided Fisher p-value the margins of this table allow (every pass in the baseline)."""
    bp, bn, cp, cn = int(b[0]), int(b[1]), int(c[0]), int(c[1])
    s = bp + cp
    most = min(bn, s)
    return drop_p_value(most, bn, s - most, cn) or 1.0


# ---------------------------------------------------------------------------------------------
# the family


def _tarone(p_mins: Sequence[float], alpha: float) -> int:
    """Tarone's K: the smallest k with at most k hypotheses able to reach p < alpha / k (at least 1)."""
    for k in range(1, len(p_mins) + 1):
        if sum(1 for p in p_mins if p < alpha / k) <= k:
            return k
    return max(1, len(p_mins))


def adjust(p_values: Sequence[float], p_mins: Sequence[float], alpha: float) -> list[float]:
    """Family-adjusted p-values (Holm's step-down with Tarone's K at each step): a hypothesis is
    rejected when its adjusted p is below alpha, and the family-wise error rate is at most alpha."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    remaining = set(order)
    out = [1.0] * len(p_values)
    running = 0.0
    for i in order:
        k = _tarone([p_mins[j] for j in remaining], alpha)
        running = max(running, min(1.0, k * p_values[i]))
        out[i] = running
        remaining.discard(i)
    return out


# ---------------------------------------------------------------------------------------------
# the entries


def _drop_entry(metric: str, label: str, b: tuple[int, int], c: tuple[int, int], per_iteration: float,
                what: str, modified: bool = False) -> GateEntry:
    p = drop_p_value(b[0], b[1], c[0], c[1])
    b_rate, c_rate = b[0] / b[1] if b[1] else None, c[0] / c[1] if c[1] else None
    observed = (f"{b[0]}/{b[1]} → {c[0]}/{c[1]} {what} ({pct(b_rate)} → {pct(c_rate)})")
    entry = GateEntry(metric, label, "drop", _FISHER, [b[0], b[1]], [c[0], c[1]], observed, p,
                      modified=modified, per_iteration=per_iteration)
    if p is None:
        entry.decision, entry.reason = "not tested", "nothing rated on one side"
    else:
        entry.p_min = _fisher_min(b, c)
    return entry


def _floor_entry(metric: str, label: str, passed: int, runs: int, floor: float, what: str, per_iteration: float) -> GateEntry:
    rate = passed / runs if runs else None
    observed = f"{passed}/{runs} {what} ({pct(rate)}), floor {pct(floor)}"
    entry = GateEntry(metric, label, "floor", _BINOMIAL, None, [passed, runs], observed, None,
                      threshold=floor, per_iteration=per_iteration)
    if not runs:
        entry.p_raw, entry.p_min = 0.0, 0.0  # nothing rated is below any floor
        entry.observed = f"nothing rated on the shared scenarios, floor {pct(floor)}"
        return entry
    entry.p_raw = binomial_cdf(passed, runs, floor)
    entry.p_min = binomial_cdf(0, runs, floor)
    return entry


def _increase_entry(metric: str, label: str, per_scenario: Mapping[str, tuple[float, float]], limit: float,
                    unit: str) -> GateEntry:
    """``per_scenario``: shared scenario → (baseline, current) figure per run."""
    up = sum(1 for b, c in per_scenario.values() if c > b * (1 + limit) + 1e-12)
    down = sum(1 for b, c in per_scenario.values() if c < b * (1 + limit) - 1e-12)
    n = len(per_scenario)
    b_mean = sum(b for b, _ in per_scenario.values()) / n if n else None
    c_mean = sum(c for _, c in per_scenario.values()) / n if n else None
    change = (c_mean / b_mean - 1) if b_mean and c_mean is not None else None
    observed = (f"{_figure(b_mean, unit)} → {_figure(c_mean, unit)} per scenario run"
                + (f" ({change * 100:+.1f}%, limit +{limit * 100:g}%)" if change is not None else "")
                + f"; {up} of {n} shared scenarios rose beyond the limit, {down} did not")
    entry = GateEntry(metric, label, "increase", _SIGN, [up, down], [b_mean or 0.0, c_mean or 0.0], observed,
                      sign_test_p(up, down) if up + down else None, threshold=limit)
    if entry.p_raw is None:
        entry.decision, entry.reason = "not tested", f"no shared scenario has a {metric} on both sides"
    else:
        entry.p_min = 0.5 ** (up + down)
        # most scenarios rising while the mean stays within the limit is no failure: the decision
        # needs both (rejecting a subset of what the family rejects keeps the error rate)
        entry.within_limit = change is None or change <= limit + 1e-12
    return entry


def _figure(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    return f"${value:.4f}" if unit == "usd" else f"{value:.2f}s"


def _per_iteration(runs: int, iterations: int) -> float:
    return runs / max(1, iterations)


def _entries(c: Comparison, options: GateOptions, cost: Mapping[str, tuple[float, float]] | None,
             latency: Mapping[str, tuple[float, float]] | None) -> list[GateEntry]:
    out: list[GateEntry] = []
    its = max(1, c.current.iterations)
    comp, ev = c.metric("completion_rate"), c.metric("evaluation_rate")
    if options.fail_on_regression:
        b, cur = comp.baseline_runs or (0, 0), comp.current_runs or (0, 0)
        out.append(_drop_entry("completion", "completion", b, cur, _per_iteration(cur[1], its), "runs passed"))
        b, cur = ev.baseline_runs or (0, 0), ev.current_runs or (0, 0)
        out.append(_drop_entry("evaluation", "overall evaluation (every soft check of a run)", b, cur,
                               _per_iteration(cur[1], its), "runs with every soft check passed"))
        for row in c.criteria:
            if row.status == "compared" or (row.status == "modified" and options.gate_modified):
                out.append(_criterion_drop(row, its))
    if options.min_completion is not None:
        runs = comp.current_runs or (0, 0)
        out.append(_floor_entry("floor:completion", "completion floor", runs[0], runs[1], options.min_completion,
                                "runs passed", _per_iteration(runs[1], its)))
    if options.min_evaluation is not None:
        runs = ev.current_runs or (0, 0)
        total = math.ceil((ev.current_run_rate_sum or 0.0) - 1e-9)
        out.append(_floor_entry("floor:evaluation", "evaluation floor", total, runs[1], options.min_evaluation,
                                "runs' evaluation rates summed", _per_iteration(runs[1], its)))
        if runs[1]:
            out[-1].observed += f"; evaluation rate {pct(ev.current)} over {ev.current_counts and ev.current_counts[1]} checks"
    rows = {r.name: r for r in c.criteria}
    for name, minimum in options.min_criteria.items():
        floor_row = rows.get(name)
        if floor_row is None:
            known = ", ".join(sorted(rows)) or "none"
            raise ValueError(f"--min-criterion {name}: no criterion {name!r} on the shared scenarios "
                             f"(criteria: {known})")
        out.append(_floor_entry(f"floor:criterion:{name}", f"criterion {name!r} floor", floor_row.current_runs[0],
                                floor_row.current_runs[1], minimum, "runs with every rating passed",
                                _per_iteration(floor_row.current_runs[1], its)))
    if options.max_cost_increase is not None:
        out.append(_increase_entry("cost", "cost per scenario run", cost or {}, options.max_cost_increase, "usd"))
    if options.max_latency_increase is not None:
        out.append(_increase_entry("latency", "response latency per scenario run", latency or {},
                                   options.max_latency_increase, "s"))
    return out


def _criterion_drop(row: CriterionDelta, iterations: int) -> GateEntry:
    label = f"criterion {row.name!r}" + (" (definition changed)" if row.status == "modified" else "")
    return _drop_entry(f"criterion:{row.name}", label, row.baseline_runs, row.current_runs,
                       _per_iteration(row.current_runs[1], iterations), "runs with every rating passed",
                       modified=row.status == "modified")


def modified_warnings(c: Comparison, gated: bool) -> list[str]:
    """One loud line per criterion whose definition changed, with its before/after rate."""
    out = []
    for row in c.criteria:
        if row.status != "modified":
            continue
        what = ("gated (--gate-modified)" if gated
                else "NOT gated: the drop test skips it; add --gate-modified to gate it, or rename the criterion")
        out.append(f"WARNING: criterion {row.name!r} changed its definition between the experiments: "
                   f"{pct(row.baseline)} → {pct(row.current)} ({row.baseline_passed}/{row.baseline_evaluated} → "
                   f"{row.current_passed}/{row.current_evaluated} ratings passed); {what}")
    return out


def paired(baseline: Mapping[str, float], current: Mapping[str, float]) -> dict[str, tuple[float, float]]:
    """Per-scenario figures of both sides, for the scenarios both have (the cost and latency limits)."""
    return {sid: (b, current[sid]) for sid, b in baseline.items() if sid in current}


def latency_per_run(doc: Mapping[str, Any]) -> dict[str, float]:
    """Scenario id → its mean response latency (seconds per agent turn, over all its runs), from a
    whole document's transcripts (``duration_s`` of each turn)."""
    sums: dict[str, list[float]] = {}
    for e in doc.get("scenario_results") or ():
        turns = [t for t in e.get("transcript") or () if isinstance(t, dict) and isinstance(t.get("duration_s"), (int, float))]
        if turns:
            slot = sums.setdefault(str(e.get("id")), [0.0, 0])
            slot[0] += sum(float(t["duration_s"]) for t in turns)
            slot[1] += len(turns)
    return {sid: total / n for sid, (total, n) in sums.items()}


def evaluate(c: Comparison, options: GateOptions, *, cost: Mapping[str, tuple[float, float]] | None = None,
             latency: Mapping[str, tuple[float, float]] | None = None, describe: bool = True) -> Gate:
    """The gate of ``c``: every requested metric tested, the family adjusted, each decided.

    ``cost`` and ``latency`` are ``paired`` per-run figures of the shared scenarios. ``describe``
    adds what passing metrics could have detected (the simulation tests skip it).
    Raises ValueError for a ``min_criteria`` name that is no criterion of either experiment."""
    entries = _entries(c, options, cost, latency)
    tested = [e for e in entries if e.p_raw is not None]
    adjusted = adjust([e.p_raw or 0.0 for e in tested], [e.p_min for e in tested], options.alpha)
    for e, p in zip(tested, adjusted, strict=True):
        e.p_adjusted = p
        e.decision = "fail" if p < options.alpha and not e.within_limit else "pass"
    level = options.alpha / _tarone([e.p_min for e in tested], options.alpha) if tested else options.alpha
    for e in entries:
        e.reason = e.reason or _reason(e, options.alpha)
        if describe and e.decision == "pass":
            _describe(e, level)
    failed = any(e.decision == "fail" for e in entries)
    return Gate(options.alpha, "Holm step-down with Tarone's rule for discrete tests", entries,
                modified_warnings(c, options.gate_modified), failed, EXIT_FAILED if failed else EXIT_PASSED, len(tested))


def _reason(e: GateEntry, alpha: float) -> str:
    assert e.p_adjusted is not None
    if e.decision == "fail":
        return {"drop": "the drop is larger than chance", "floor": "significantly below the floor",
                "increase": "significantly beyond the limit"}[e.kind]
    if e.kind == "drop" and e.baseline and e.current and e.current[1] and e.baseline[1] \
            and e.current[0] / e.current[1] >= e.baseline[0] / e.baseline[1] - 1e-12:
        return "no drop"
    if e.kind == "floor" and e.current and e.current[1] and e.current[0] >= (e.threshold or 0.0) * e.current[1] - 1e-9:
        return "at or above the floor"
    if e.kind == "increase" and e.within_limit:
        return "the mean stays within the limit"
    if e.p_min >= alpha:
        return f"no evidence possible with these totals (the smallest p they allow is {e.p_min:.3g})"
    return "not significant: no evidence of a " + {"drop": "drop", "floor": "rate below the floor",
                                                  "increase": "rise beyond the limit"}[e.kind]


def _describe(e: GateEntry, level: float) -> None:
    """What these counts could have flagged at the family's first-step level, and the iterations
    a 20-point drop (or a rate 20 points under the floor) would need, at its expected counts."""
    if e.kind == "drop" and e.baseline and e.current and e.baseline[1] and e.current[1]:
        bp, bn, cn = int(e.baseline[0]), int(e.baseline[1]), int(e.current[1])
        worst = _largest(lambda x: (drop_p_value(bp, bn, x, cn) or 1.0) < level, cn)
        e.detectable = None if worst is None else round(bp / bn - worst / cn, 4)
        rate = bp / bn
        if rate >= DETECT_DROP - 1e-12:
            e.iterations_for_20pt = _iterations(lambda n: (drop_p_value(round(rate * n), n, round((rate - DETECT_DROP) * n), n)
                                                           or 1.0) < level, e.per_iteration)
    elif e.kind == "floor" and e.current and e.current[1]:
        floor = e.threshold or 0.0
        n = int(e.current[1])
        worst = _largest(lambda x: binomial_cdf(x, n, floor) < level, n)
        e.detectable = None if worst is None else round(worst / n, 4)
        if floor >= DETECT_DROP - 1e-12:
            e.iterations_for_20pt = _iterations(lambda m: binomial_cdf(round((floor - DETECT_DROP) * m), m, floor) < level,
                                                e.per_iteration)


def _first_true(pred: Any, lo: int, hi: int) -> int:
    """The smallest x in (lo, hi] with ``pred(x)``, for a ``pred`` false up to some point, then true
    (``pred(hi)`` holds; ``lo`` is never asked)."""
    while lo + 1 < hi:
        mid = (lo + hi) // 2
        if pred(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _largest(flagged: Any, top: int) -> int | None:
    """The largest x in 0..top with ``flagged(x)`` (flagged holds from 0 up to some x: p grows with x)."""
    if not flagged(0):
        return None
    return _first_true(lambda x: x > top or not flagged(x), 0, top + 1) - 1


def _iterations(detects: Any, per_iteration: float) -> int | None:
    """The fewest iterations whose runs (``per_iteration`` each) make ``detects(runs)`` true."""
    unit = max(1.0, per_iteration)

    def ok(k: int) -> bool:
        return bool(detects(max(1, round(unit * k))))

    hi = 1
    while not ok(hi):
        hi *= 2
        if hi > _MAX_ITERATIONS:
            return None
    return hi if hi == 1 else _first_true(ok, hi // 2, hi)


def regression_gate(c: Comparison, alpha: float = DEFAULT_ALPHA, *, describe: bool = True) -> Gate:
    """The gate of ``fabtest-compare --fail-on-regression`` alone (no floors, no cost or latency limits)."""
    return evaluate(c, GateOptions(alpha=alpha, fail_on_regression=True), describe=describe)


def regressed(c: Comparison, alpha: float = DEFAULT_ALPHA) -> bool:
    """True when completion, the overall evaluation or a criterion dropped significantly (as one family)."""
    return regression_gate(c, alpha, describe=False).failed


def meets_min_completion(c: Comparison, minimum: float) -> bool:
    """True when the completion rate over the shared scenarios is at least ``minimum`` (observed, untested)."""
    rate = c.metric("completion_rate").current
    return rate is not None and rate >= minimum - 1e-12


def gate_failures(
    c: Comparison, fail_on_regression: bool = False, min_completion: float | None = None, *,
    alpha: float = DEFAULT_ALPHA, min_evaluation: float | None = None, min_criteria: dict[str, float] | None = None,
) -> list[str]:
    """One line per failed metric of the gate (empty when it passes); ``evaluate`` has the whole gate."""
    options = GateOptions(alpha=alpha, fail_on_regression=fail_on_regression, min_completion=min_completion,
                          min_evaluation=min_evaluation, min_criteria=dict(min_criteria or {}))
    return [_entry_line(e) for e in evaluate(c, options, describe=False).failures()]


# ---------------------------------------------------------------------------------------------
# renderers


def _p(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def _entry_line(e: GateEntry) -> str:
    head = f"{e.decision.upper()} {e.label}: {e.observed}"
    if e.p_raw is None:
        return f"{head}; {e.reason}"
    line = f"{head}; {e.test}: p = {_p(e.p_raw)}, adjusted p = {_p(e.p_adjusted)}; {e.reason}"
    if e.decision == "pass" and e.kind != "increase" and e.reason not in ("no drop", "at or above the floor"):
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
           else f"about {e.iterations_for_20pt} iteration{'s' if e.iterations_for_20pt != 1 else ''} would detect a 20-point "
                + ("drop" if e.kind == "drop" else "shortfall"))
    return f"{could}; {its}"


def gate_lines(gate: Gate) -> list[str]:
    """The gate in text: warnings, one line per metric, then the decision."""
    lines = list(gate.warnings)
    lines += [_entry_line(e) for e in gate.entries]
    verdict = "FAILED" if gate.failed else "PASSED"
    lines.append(f"gate {verdict} (exit {gate.exit_code}): {len(gate.failures())} of {len(gate.entries)} metric(s) failed; "
                 f"{gate.family_size} tested as one family at alpha {gate.alpha:g} ({gate.method})")
    return lines


def gate_dict(gate: Gate | None, warnings: Sequence[str] = ()) -> dict[str, Any]:
    """The JSON ``gate`` key: one entry per metric, the decision and the exit code (``warnings``:
    the modified criteria's, when no gate was asked for)."""
    if gate is None:
        return {"requested": False, "decision": "pass", "exit_code": EXIT_PASSED, "metrics": [],
                "warnings": list(warnings)}
    data = asdict(gate)
    metrics = data.pop("entries")
    for m in metrics:
        m.pop("per_iteration", None)
    return {"requested": True, "decision": "fail" if gate.failed else "pass", "exit_code": gate.exit_code,
            "alpha": gate.alpha, "method": gate.method, "family_size": gate.family_size,
            "unit": "scenario run", "metrics": metrics, "warnings": gate.warnings}


def gate_markdown(gate: Gate | None, warnings: Sequence[str], escape: Any) -> list[str]:
    """The gate as a Markdown section (``escape`` makes results-file text table-safe); without a
    gate, just the modified criteria's warnings."""
    if gate is None:
        return ["", *(f"> ⚠️ {escape(w)}" for w in warnings)] if warnings else []
    icon = "❌ FAILED" if gate.failed else "✅ PASSED"
    lines = ["", f"### Gate: {icon} (exit {gate.exit_code})", ""]
    lines += [f"> ⚠️ {escape(w)}" for w in gate.warnings]
    if gate.warnings:
        lines.append("")
    lines += ["| Metric | Counts | Test | p | adjusted p | Decision |", "|---|---|---|---:|---:|---|"]
    for e in gate.entries:
        lines.append(f"| {escape(e.label)} | {escape(e.observed)} | {e.test} | {_p(e.p_raw)} | {_p(e.p_adjusted)} | "
                     f"{e.decision}: {escape(e.reason)} |")
    lines += ["", f"{gate.family_size} metric(s) tested as one family at alpha {gate.alpha:g} ({gate.method}); "
                  "the unit is the scenario run."]
    return lines
