"""The CI gate of ``fabtest-compare``: three outcomes, one family, one line per metric.

The gate answers one of three things (docs/gates.md):

* **worse** (exit 1): the family found a drop. Every drop hypothesis (pooled completion,
  stratified by scenario; the overall evaluation rate; each criterion; and per shared scenario its
  completion, evaluation, deterministic checks and ``must`` criteria), each floor and each cost or
  latency limit is one hypothesis of one family, controlled with Holm's step-down procedure
  sharpened by Tarone's rule for discrete tests (Hommel & Krummenauer 1998): hypotheses whose
  smallest attainable p-value cannot reach the level cost no alpha. The family-wise error rate is at
  most alpha (tests/experiment/test_gate_family.py, benchmarks/bench_gate.py).
* **not worse** (exit 0): every gated metric is shown non-inferior: no drop larger than the margin
  (``--gate-margin``, 10 points by default), each at alpha (compare/inference.py says which tests
  and why). Together an intersection-union test, so its error rate is at most alpha too.
* **undecided** (exit 3): neither. A metric with nothing rated on the current side (every check
  inconclusive, skipped or errored: a judge outage), no shared scenario, an empty or all-skipped
  run, a limit with nothing to measure, or an index that disagrees with its results can never be
  "not worse".

Why the scenario run is the unit: the evaluations of one conversation are not independent (an
agent that is rude in turn 2 is likely rude in turn 3), so every metric is reduced to one pass/fail
per scenario run before testing (completion: the run passed; a criterion: every rating of it in
the run passed; the overall evaluation: every soft check of the run passed).

Computing is kept apart from rendering: ``evaluate`` builds a ``Gate`` of plain data; ``gate_lines``
and ``gate_markdown`` print it and ``gate_dict`` is the JSON ``gate`` key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fabtest.compare.compute import DEFAULT_ALPHA, Comparison, CriterionDelta, drop_p_value
from fabtest.compare.gate_model import DEFAULT_MARGIN, Gate, GateEntry, Outcome
from fabtest.compare.gate_text import entry_line, gate_dict, gate_lines, gate_markdown, p_text
from fabtest.compare.inference import (
    adjust,
    newcombe_lower,
    runs_to_decide,
    runs_to_detect,
    stratified_drop,
    tarone_k,
    wilson,
)
from fabtest.compare.scenario_family import fisher, label_changes, reachable, tables
from fabtest.experiment.fmt import pct

__all__ = [
    "DEFAULT_MARGIN",
    "EXIT_FAILED",
    "EXIT_PASSED",
    "EXIT_UNDECIDED",
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
    "label_changes",
    "latency_per_run",
    "meets_min_completion",
    "modified_warnings",
    "paired",
    "regressed",
    "regression_gate",
    "relabel",
    "sign_test_p",
]

EXIT_PASSED, EXIT_FAILED, EXIT_UNDECIDED = 0, 1, 3
DETECT_DROP = 0.20  # "how many iterations would detect a 20-point drop"
_MAX_ITERATIONS = 100_000


_FISHER = "one-sided Fisher's exact test on scenario runs"
_STRATIFIED = "one-sided exact test stratified by scenario (Cochran-Mantel-Haenszel) on scenario runs"
_BINOMIAL = "one-sided exact binomial test on scenario runs"
_SIGN = "exact sign test over shared scenarios"
_OUTCOME: dict[str, Outcome] = {"fail": "worse", "pass": "not worse", "undecided": "undecided"}
_EXIT = {"worse": EXIT_FAILED, "not worse": EXIT_PASSED, "undecided": EXIT_UNDECIDED}


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
    margin: float = DEFAULT_MARGIN  # a fraction: "not worse" means no drop beyond it

    def requested(self) -> bool:
        return bool(self.fail_on_regression or self.min_completion is not None or self.min_evaluation is not None
                    or self.min_criteria or self.max_cost_increase is not None or self.max_latency_increase is not None)


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
        if value <= total * 1e-17:  # <=: terms that underflow to 0 from the first stop at once
            break
    return total


def sign_test_p(up: int, down: int) -> float:
    """One-sided exact sign test: P(at least ``up`` of ``up + down`` fair coin flips come up)."""
    n = up + down
    if n == 0:
        return 1.0
    if n <= 1000:  # exact in integers
        return float(sum(math.comb(n, k) for k in range(up, n + 1)) / 2 ** n)
    return min(1.0, 1.0 - binomial_cdf(up - 1, n, 0.5))


def _fisher_min(b: Sequence[float], c: Sequence[float]) -> float:
    """The smallest one-sided Fisher p-value the margins of this table allow (every pass in the baseline)."""
    bp, bn, cp, cn = int(b[0]), int(b[1]), int(c[0]), int(c[1])
    s = bp + cp
    most = min(bn, s)
    return _p_or_one(drop_p_value(most, bn, s - most, cn))


def _p_or_one(p: float | None) -> float:
    """A p-value, 1 when there is nothing to test. Not ``p or 1.0``: a p that underflows to 0.0 is
    the strongest evidence, and reading it as 1 sent the hint search of a 19,000-run comparison
    doubling the runs towards 10^9 (issue 30: ``--fail-on-regression`` never finished)."""
    return 1.0 if p is None else p


# ---------------------------------------------------------------------------------------------
# the entries


def _drop_entry(metric: str, label: str, b: tuple[int, int], c: tuple[int, int], per_iteration: float,
                what: str, modified: bool = False) -> GateEntry:
    p = drop_p_value(b[0], b[1], c[0], c[1])
    b_rate, c_rate = b[0] / b[1] if b[1] else None, c[0] / c[1] if c[1] else None
    observed = (f"{b[0]}/{b[1]} → {c[0]}/{c[1]} {what} ({pct(b_rate)} → {pct(c_rate)})")
    entry = GateEntry(metric, label, "drop", _FISHER, [b[0], b[1]], [c[0], c[1]], observed, p,
                      modified=modified, per_iteration=per_iteration, baseline_interval=_wilson(b),
                      current_interval=_wilson(c))
    if p is None:
        entry.reason = _untested(b, c)
    else:
        entry.p_min = _fisher_min(b, c)
    return entry


def _untested(b: Sequence[float], c: Sequence[float]) -> str:
    if b[1] and not c[1]:
        return ("nothing rated in the current experiment (every check of it skipped, inconclusive or errored, "
                "e.g. a judge outage; or no run reached it): untested is never a pass")
    if c[1] and not b[1]:
        return "nothing rated in the baseline: no reference to compare with"
    return "nothing rated on either side"


def _wilson(counts: Sequence[float]) -> tuple[float, float] | None:
    found = wilson(counts[0], counts[1])
    return None if found is None else (round(found[0], 4), round(found[1], 4))


def _completion_entry(c: Comparison, per_iteration: float) -> GateEntry:
    """Pooled completion, tested stratified by scenario: the exact conditional test of each
    scenario's table summed (Cochran-Mantel-Haenszel), so one collapsing scenario is not averaged
    away and a different mix of scenarios cannot fake a drop."""
    m = c.metric("completion_rate")
    b, cur = m.baseline_runs or (0, 0), m.current_runs or (0, 0)
    entry = _drop_entry("completion", "completion", b, cur, per_iteration, "runs passed")
    if c.tallies is None or entry.p_raw is None:
        return entry
    base, now = c.tallies
    found = stratified_drop([(x.passes, x.runs, now[sid].passes, now[sid].runs) for sid, x in base.items()])
    entry.test = _STRATIFIED
    if found is None:  # no scenario can tell the sides apart: nothing suggests a drop
        entry.p_raw, entry.p_min = 1.0, 1.0
    else:
        entry.p_raw, entry.p_min, how = found
        if how != "exact":
            entry.test += f" ({how})"
    return entry


def _floor_entry(metric: str, label: str, passed: int, runs: int, floor: float, what: str,
                 per_iteration: float) -> GateEntry:
    rate = passed / runs if runs else None
    observed = f"{passed}/{runs} {what} ({pct(rate)}), floor {pct(floor)}"
    entry = GateEntry(metric, label, "floor", _BINOMIAL, None, [passed, runs], observed, None,
                      threshold=floor, per_iteration=per_iteration, current_interval=_wilson((passed, runs)))
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
        entry.reason = (f"no shared scenario has a {metric} on both sides: nothing to measure the limit on, "
                        "so it is not met")
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
        out.append(_completion_entry(c, _per_iteration((comp.current_runs or (0, 0))[1], its)))
        b, cur = ev.baseline_runs or (0, 0), ev.current_runs or (0, 0)
        if b[1] or cur[1]:  # a suite without soft checks has no evaluation to gate; one that lost them does
            out.append(_drop_entry("evaluation", "overall evaluation (every soft check of a run)", b, cur,
                                   _per_iteration(cur[1], its), "runs with every soft check passed"))
        for row in c.criteria:
            if row.status == "compared" or (row.status == "modified" and options.gate_modified):
                out.append(_criterion_drop(row, its))
            elif row.status in ("not evaluated", "not reached") and row.baseline_runs[1]:
                out.append(_criterion_drop(row, its))  # rated in the baseline, never now: undecided, never a pass
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
            out[-1].observed += (f"; evaluation rate {pct(ev.current)} over "
                                 f"{ev.current_counts and ev.current_counts[1]} checks")
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
    whole document's transcripts (``duration_s`` of each turn; a voice turn's time to first audio,
    the wait a caller hears, docs/how-to/voice.md)."""
    sums: dict[str, list[float]] = {}
    for e in doc.get("scenario_results") or ():
        seconds = [s for s in (_turn_latency(t) for t in e.get("transcript") or ()) if s is not None]
        if seconds:
            slot = sums.setdefault(str(e.get("id")), [0.0, 0])
            slot[0] += sum(seconds)
            slot[1] += len(seconds)
    return {sid: total / n for sid, (total, n) in sums.items()}


def _turn_latency(turn: Any) -> float | None:
    if not isinstance(turn, dict):
        return None
    voice = turn.get("voice")
    if isinstance(voice, dict) and isinstance(voice.get("time_to_first_audio_ms"), (int, float)):
        return float(voice["time_to_first_audio_ms"]) / 1000
    return float(turn["duration_s"]) if isinstance(turn.get("duration_s"), (int, float)) else None


def evaluate(c: Comparison, options: GateOptions, *, cost: Mapping[str, tuple[float, float]] | None = None,
             latency: Mapping[str, tuple[float, float]] | None = None, describe: bool = True) -> Gate:
    """The gate of ``c``: every requested metric tested, the family adjusted, each decided, and the
    outcome (worse, not worse or undecided) with its verdict line.

    ``cost`` and ``latency`` are ``paired`` per-run figures of the shared scenarios. ``describe``
    adds what undecided metrics could have detected (the simulation tests skip it).
    Raises ValueError for a ``min_criteria`` name that is no criterion of either experiment."""
    alpha = options.alpha
    entries = _entries(c, options, cost, latency)
    scenario = _scenario_entries(c, alpha / 2) if options.fail_on_regression else []
    # alpha is split between the pooled metrics and the per-scenario hypotheses (Bonferroni), each half
    # Holm-Tarone, so the many scenarios never dilute the pooled metrics' power; with no per-scenario
    # hypothesis able to reach its level (single runs, steady scenarios) the pooled metrics get it all
    split = 2.0 if scenario else 1.0
    levels = []
    for family in (entries, scenario):
        tested = [e for e in family if e.p_raw is not None]
        adjusted = adjust([e.p_raw or 0.0 for e in tested], [e.p_min for e in tested], alpha / split)
        for e, p in zip(tested, adjusted, strict=True):
            e.p_adjusted = min(1.0, p * split)  # compared with alpha, as before
            if e.p_adjusted < alpha and not e.within_limit:
                e.decision = "fail"
        levels.append((alpha / split) / tarone_k([e.p_min for e in tested], alpha / split) if tested else alpha / split)
    level = levels[0]
    for e in entries:
        e.margin = options.margin
        if e.decision != "fail" and _shown_not_worse(e, options):
            e.decision = "pass"
        e.outcome = _OUTCOME[e.decision]
        e.reason = e.reason if e.decision == "undecided" and e.reason else _reason(e, alpha)
        _hints(e, options, level)
        if describe and e.decision == "undecided":
            _describe(e, level)
    worse = [e for e in scenario if e.decision == "fail"]
    for e in worse:
        e.outcome, e.margin, e.reason = "worse", options.margin, _reason(e, alpha)
    shown = entries + sorted(worse, key=lambda e: (e.p_adjusted or 0.0, e.label))
    problems = _problems(c) if options.requested() else []
    outcome: Outcome = ("worse" if any(e.decision == "fail" for e in shown)
                        else "not worse" if entries and not problems and all(e.decision == "pass" for e in entries)
                        else "undecided")
    comp = c.metric("completion_rate")
    method = "Holm step-down with Tarone's rule for discrete tests" + (
        ", alpha split in halves between the pooled metrics and the per-scenario hypotheses" if split > 1 else "")
    gate = Gate(alpha, method, shown,
                modified_warnings(c, options.gate_modified), outcome == "worse", _EXIT[outcome],
                sum(1 for e in (*entries, *scenario) if e.p_raw is not None and e.p_min < alpha / split), outcome,
                options.margin, problems=problems,
                scenario_hypotheses=len(scenario),
                runs={"baseline": (comp.baseline_runs or (0, 0))[1], "current": (comp.current_runs or (0, 0))[1]})
    gate.verdict = _verdict(gate, c)
    if options.fail_on_regression:
        label_changes(c, alpha)
    c.verdict = gate.verdict
    return gate


def _scenario_entries(c: Comparison, alpha: float) -> list[GateEntry]:
    """The per-scenario hypotheses that could reach the level (scenario_family.py says why). With
    one shared scenario its completion, evaluation and criteria are the pooled ones: only its
    checks are added."""
    if c.tallies is None:
        return []
    hard = {r.name for r in c.criteria if r.hard}
    alone = len(c.tallies[0]) == 1
    out = []
    for metric, label, sid, b, k in tables(*c.tallies, hard):
        found = fisher(b[0], b[1], k[0], k[1])
        if not reachable(found, alpha) or (alone and not metric.startswith("check:")):
            continue
        assert found is not None
        b_rate, c_rate = b[0] / b[1], k[0] / k[1]
        observed = (f"{b[0]}/{b[1]} → {k[0]}/{k[1]} runs "
                    f"({pct(b_rate)} → {pct(c_rate)}, {(c_rate - b_rate) * 100:+.0f} pp)")
        out.append(GateEntry(f"scenario:{sid}:{metric}", label, "drop", _FISHER, [b[0], b[1]], [k[0], k[1]], observed,
                             found[0], p_min=found[1], decision="undecided", baseline_interval=_wilson(b),
                             current_interval=_wilson(k), scenario=sid))
    return out


def _shown_not_worse(e: GateEntry, options: GateOptions) -> bool:
    """Evidence at alpha that the metric did not get worse by more than the margin: the
    non-inferiority bound (drops), an exact binomial test against floor - margin (floors), or a
    sign test that more scenarios stayed within the limit than rose beyond it (limits)."""
    alpha, margin = options.alpha, options.margin
    if e.p_raw is None:
        return False
    if e.kind == "drop" and e.baseline and e.current:
        e.difference_lower = newcombe_lower(e.baseline, e.current, alpha)
        if e.difference_lower is not None:
            e.difference_lower = round(e.difference_lower, 4)
        return e.difference_lower is not None and e.difference_lower > -margin
    if e.kind == "floor" and e.current and e.current[1]:
        low = (e.threshold or 0.0) - margin
        passed, runs = int(e.current[0]), int(e.current[1])
        return low <= 0 or 1.0 - binomial_cdf(passed - 1, runs, low) < alpha
    if e.kind == "increase" and e.baseline:
        up, down = int(e.baseline[0]), int(e.baseline[1])
        return e.within_limit and sign_test_p(down, up) < alpha
    return False


def _hints(e: GateEntry, options: GateOptions, level: float) -> None:
    """Runs per side for 80 % power: to decide "not worse" (when nothing changed; each metric at
    alpha) and to flag a drop of the margin at ``level``, the pooled family's first-step level
    (drops only)."""
    if e.kind != "drop" or not e.baseline or not e.current:
        return
    b, c = e.baseline, e.current
    runs = b[1] + c[1]
    rate = (b[0] + c[0]) / runs if runs else (b[0] / b[1] if b[1] else None)
    if rate is None:
        return
    e.runs_to_decide = runs_to_decide(rate, options.margin, options.alpha)
    e.runs_to_detect = runs_to_detect(b[0] / b[1] if b[1] else rate, options.margin, level)


def _problems(c: Comparison) -> list[str]:
    """Why no comparison of these experiments may pass, whatever the metrics say."""
    out = list(c.problems)
    comp = c.metric("completion_rate")
    if not c.comparability.scenarios_shared:
        out.append("no scenario both experiments ran (the current run may have failed every scenario before it "
                   "was recorded, or be empty)")
    elif not (comp.current_runs or (0, 0))[1]:
        now = list(c.tallies[1].values()) if c.tallies is not None else []
        ended, skipped = sum(a.unmeasured for a in now), sum(a.skipped for a in now)
        out.append(f"no shared scenario has a measured run in the current experiment ({ended} run(s) ended by the "
                   f"simulated user or the judge, {skipped} skipped): nothing was measured" if ended else
                   "every shared scenario was skipped in the current experiment: nothing ran")
    elif not (comp.baseline_runs or (0, 0))[1]:
        out.append("every shared scenario was skipped in the baseline: nothing to compare with")
    return out


def _reason(e: GateEntry, alpha: float) -> str:
    if e.decision == "fail":
        return {"drop": "the drop is larger than chance", "floor": "significantly below the floor",
                "increase": "significantly beyond the limit"}[e.kind]
    margin = f"{(e.margin or 0.0) * 100:g} points"
    if e.decision == "pass":
        return {"drop": f"not worse: the drop is at most {margin} (one-sided {1 - alpha:.0%} bound "
                        f"{(e.difference_lower or 0.0) * 100:+.1f} pp)",
                "floor": f"not worse: the rate is above the floor minus {margin}",
                "increase": "not worse: the mean stays within the limit and most scenarios do"}[e.kind]
    if e.kind == "increase" and e.within_limit:
        return "undecided: the mean stays within the limit, but too few scenarios to show it"
    if e.p_min >= alpha:
        return (f"undecided: no evidence possible with these totals (the smallest p they allow is {e.p_min:.3g}), "
                f"and too few runs to show a drop of at most {margin}")
    return {"drop": f"undecided: no significant drop, but too few runs to show it is at most {margin}",
            "floor": "undecided: not significantly below the floor, but too few runs to show it is above it",
            "increase": "undecided: no significant rise beyond the limit, but too few scenarios to show it stays within"
            }[e.kind]


def _verdict(gate: Gate, c: Comparison) -> str:
    """The one line every output opens with."""
    if gate.outcome == "worse":
        found = sorted(gate.failures(), key=lambda e: (e.p_adjusted or 0.0, e.label))
        parts = [f"{e.label} {_short(e)}" for e in found[:3]]
        more = f"; and {len(found) - 3} more" if len(found) > 3 else ""
        return f"worse: {'; '.join(parts)}{more}"
    if gate.outcome == "not worse":
        return (f"not worse: no gated metric dropped by more than {gate.margin * 100:g} points "
                f"({len(gate.entries)} metric(s), each shown at alpha {gate.alpha:g})")
    return "undecided: " + "; ".join(filter(None, (_worst_move(c), _undecided_because(gate, c))))


def _worst_move(c: Comparison) -> str | None:
    """What moved most for the worse (compare/moved.py): an undecided verdict says it first."""
    return next((m.line for m in c.moved if m.change > 0), None)


def _undecided_because(gate: Gate, c: Comparison) -> str:
    """Why the gate is undecided, and what would decide it."""
    if gate.problems:
        return gate.problems[0]
    open_ = [e for e in gate.entries if e.decision == "undecided"]
    need = [e for e in open_ if e.runs_to_decide and e.baseline and e.current]
    if need:
        extra = max(max(0, (e.runs_to_decide or 0) - int(min(e.baseline[1], e.current[1])))
                    for e in need if e.baseline and e.current)
        its = max(1, math.ceil(extra / max(1.0, max(e.per_iteration for e in need))))
        names = ", ".join(e.label for e in open_[:3]) + (f" and {len(open_) - 3} more" if len(open_) > 3 else "")
        return (f"about {extra} more runs per side (about {its} more iteration(s) of the "
                f"{c.comparability.scenarios_shared} shared scenario(s)) would decide {names}")
    if not open_:
        return "nothing was gated"
    names = ", ".join(e.label for e in open_[:3]) + (f" and {len(open_) - 3} more" if len(open_) > 3 else "")
    return f"{names}: {open_[0].reason.removeprefix('undecided: ')}"


def _short(e: GateEntry) -> str:
    if e.kind == "drop" and e.baseline and e.current and e.baseline[1] and e.current[1]:
        delta = (e.current[0] / e.current[1] - e.baseline[0] / e.baseline[1]) * 100
        return (f"{int(e.baseline[0])}/{int(e.baseline[1])} → {int(e.current[0])}/{int(e.current[1])} "
                f"({delta:+.0f} pp, p = {p_text(e.p_raw)}, adjusted p = {p_text(e.p_adjusted)})")
    return f"({e.observed}; adjusted p = {p_text(e.p_adjusted)})"


def _describe(e: GateEntry, level: float) -> None:
    """What these counts could have flagged at the family's first-step level, and the iterations
    a 20-point drop (or a rate 20 points under the floor) would need, at its expected counts."""
    if e.kind == "drop" and e.baseline and e.current and e.baseline[1] and e.current[1]:
        bp, bn, cn = int(e.baseline[0]), int(e.baseline[1]), int(e.current[1])
        worst = _largest(lambda x: _p_or_one(drop_p_value(bp, bn, x, cn)) < level, cn)
        e.detectable = None if worst is None else round(bp / bn - worst / cn, 4)
        rate = bp / bn
        if rate >= DETECT_DROP - 1e-12:
            e.iterations_for_20pt = _iterations(
                lambda n: _p_or_one(drop_p_value(round(rate * n), n, round((rate - DETECT_DROP) * n), n)) < level,
                e.per_iteration)
    elif e.kind == "floor" and e.current and e.current[1]:
        floor = e.threshold or 0.0
        n = int(e.current[1])
        worst = _largest(lambda x: binomial_cdf(x, n, floor) < level, n)
        e.detectable = None if worst is None else round(worst / n, 4)
        if floor >= DETECT_DROP - 1e-12:
            e.iterations_for_20pt = _iterations(
                lambda m: binomial_cdf(round((floor - DETECT_DROP) * m), m, floor) < level, e.per_iteration)


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


def relabel(c: Comparison, alpha: float = DEFAULT_ALPHA) -> None:
    """Labels the per-scenario quality changes by what their family finds, without a gate being
    asked for (no verdict is set; only the scenarios' evaluation tables are tested)."""
    label_changes(c, alpha)


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
    return [entry_line(e) for e in evaluate(c, options, describe=False).failures()]
