"""The decision of ``fabtest ab``: both arms grow, and runs are compared in pairs.

``fabtest ab`` runs the same scenario and iteration on both arms, so each metric is a sequence of
**paired differences** ``D = current - baseline`` in {-1, 0, 1} (one pass or fail per scenario run
on each side, as in the fixed gate). Each hypothesis is a claim about the mean of ``D`` and is
tested by **betting** (Shafer 2021; Waudby-Smith & Ramdas, "Estimating means of bounded random
variables by betting", JRSS B 2023): the wealth ``K = prod(1 + lambda_t x_t)``, ``x`` the evidence
per pair and ``lambda_t`` a bet fixed before the batch it is used on, is a nonnegative
supermartingale whenever ``E[x] <= 0`` (the null), whatever the dependence between the arms, so by
Ville's inequality it ever reaches ``1 / a`` with probability at most ``a``: any number of looks,
any stopping rule (a budget, a futility stop, Ctrl-C).

* **worse** (``x = -D``): "the current rate is at least the baseline's". Pooled metrics
  (completion, the overall evaluation, each criterion) and each shared scenario's completion (the
  collapse detector) are one family by weighted Bonferroni, as in :mod:`fabtest.compare.sequential`:
  weight 2 for a pooled metric, 1 for a scenario, decided at ``W / (w alpha)``; the weighted mean of
  the wealths is an e-process too and decides at ``1 / alpha`` (several metrics dropping together).
* **not worse**: "the current rate is below the baseline's by at least the margin", for the pooled
  metrics only, each by a group-sequential score test whose information is the planned budget
  (:mod:`fabtest.compare.noninferiority`: Lan-DeMets O'Brien-Fleming-type spending, Tango's paired
  score test at each look): "not worse" needs every one of them (an intersection-union test, Berger
  1982: its error rate is at most alpha with no correction), and no metric found worse. A betting
  e-process for it was tried and measured: it must be ready to stop at any look, so at the budget
  of a pull request an unchanged agent was "not worse" in only two thirds of the A/Bs; the planned
  budget lets nearly all of alpha be spent at the last look. Per-scenario non-inferiority at 10
  points would need about 100 runs per scenario and arm; per scenario only "worse" is tested.

A pooled metric mixes scenarios of different rates. A batch is one iteration of every scenario that
feeds the metric, and one bet is used for the whole batch: the product over the batch has
expectation ``prod(1 + lambda mu_s) <= (1 + lambda mean(mu_s))^k`` (AM-GM), at most 1 when the
mean over the scenarios (the balanced, stratified rate difference) is on the null side. An
incomplete iteration is left out of a pooled metric.

The worse e-processes hold at any look; the not-worse test holds when its looks follow the plan
(one per round, ``Plan``) and the plan is fixed before the differences are seen.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from fabtest.compare.noninferiority import NonInferiority

__all__ = ["Bet", "PairedDecision", "PairedMetric", "Plan", "Run", "decide_paired"]

Outcome = Literal["worse", "not worse", "undecided"]

#: a pooled metric's weight in the worse family against 1 for one scenario's completion
POOLED_WEIGHT = 2.0
#: the largest bet on "worse" (a pair that improved leaves 1 - 0.9 of the wealth)
WORSE_CAP = 0.9
#: the pseudo-pairs the first batch bets on, by paired difference (current - baseline): a few pairs
#: apart, leaning towards the hypothesis' alternative (a drop for worse; equal for not worse)
PRIOR_WORSE = {-1.0: 0.6, 0.0: 3.0, 1.0: 0.4}
#: a scenario whose worse wealth stands this high now holds back "not worse" (a collapse the pooled
#: metrics' margin would hide) until its runs decide it or its evidence falls back below
SUSPECT = 20.0
#: futility: the plausible end of a metric's mean evidence per pair (95 %, two-sided)
PLAUSIBLE_Z = 1.959963984540054


@dataclass(frozen=True, slots=True)
class Plan:
    """When the not-worse test looks, fixed before any difference is seen: a look after the first
    pass (``first_pass`` iterations) and after each later iteration, up to ``iterations`` in all (the
    first pass and what the whole budget buys; full information). The default plan is one look at
    the last iteration given, a fixed-sample test."""

    first_pass: int
    iterations: int


@dataclass(frozen=True, slots=True)
class Run:
    """One scenario run as the decision reads it."""

    scenario: str
    iteration: int
    passed: bool
    evaluation: bool | None = None  # every soft check passed; None: no soft check rated
    criteria: Mapping[str, bool] = field(default_factory=dict)  # criterion -> every rating passed (rated ones)


@dataclass(slots=True)
class Bet:
    """One betting e-process for "E[x] <= 0": its log wealth, the best it reached, and what it has seen.

    ``prior`` is pseudo-counts of the evidence values the first batch bets on (the pairs seen are
    added to them), ``cap`` the largest bet (the wealth left by the worst pair stays positive)."""

    cap: float
    prior: dict[float, float]
    log_wealth: float = 0.0
    peak: float = 0.0
    pairs: int = 0
    seen: dict[float, int] = field(default_factory=dict)  # evidence value -> pairs

    def stake(self) -> float:
        """The bet for the next batch: the growth-optimal (Kelly) bet on the pairs seen so far and the
        prior, ``argmax_l sum n_x log(1 + l x)`` over ``[0, cap]`` (only past batches: predictable).
        The quadratic plug-in ``mean / second moment`` over-bets when a pair can lose most of the
        wealth, which an agent's rare failure does."""
        counts = dict(self.prior)
        for x, n in self.seen.items():
            counts[x] = counts.get(x, 0.0) + n
        return _kelly(counts, self.cap)

    def add(self, batch: Sequence[float]) -> None:
        stake = self.stake()
        for x in batch:
            self.log_wealth += math.log(max(1e-300, 1.0 + stake * x))
            self.seen[x] = self.seen.get(x, 0) + 1
        self.pairs += len(batch)
        self.peak = max(self.peak, self.log_wealth)

    def reachable(self, more: int, need: float) -> bool:
        """Whether ``more`` pairs could bring the wealth to ``need`` if they came at the plausible best
        mean (the upper 95 % end of the mean evidence per pair, the extra shifted onto the best
        value) at the growth of the Kelly bet for them (a futility guide only: any stop is valid)."""
        if self.peak >= math.log(need):
            return True
        if more <= 0 or not self.pairs:
            return more > 0  # nothing seen yet: only the runs can tell
        n = self.pairs
        mean = sum(x * k for x, k in self.seen.items()) / n
        square = sum(x * x * k for x, k in self.seen.items()) / n
        shift = PLAUSIBLE_Z * math.sqrt(max(0.0, square - mean * mean) / n)
        best, worst = max(self.seen), min(self.seen)
        if best <= worst or shift <= 0:
            counts = {x: float(k) for x, k in self.seen.items()}
        else:  # move probability from the worst value to the best until the mean rises by ``shift``
            moved = min(self.seen[worst] / n, shift / (best - worst))
            counts = {x: k / n for x, k in self.seen.items()}
            counts[worst] -= moved
            counts[best] += moved
        total = sum(counts.values())
        stake = _kelly(counts, self.cap)
        growth = sum(k * math.log(max(1e-300, 1.0 + stake * x)) for x, k in counts.items()) / total
        return self.log_wealth + more * growth >= math.log(need)


def _kelly(counts: Mapping[float, float], cap: float) -> float:
    """``argmax_l sum n_x log(1 + l x)`` on ``[0, cap]``: the derivative falls with ``l``, so bisect it."""
    def slope(stake: float) -> float:
        return sum(n * x / (1.0 + stake * x) for x, n in counts.items() if n)

    if slope(0.0) <= 0:
        return 0.0
    if slope(cap) >= 0:
        return cap
    live = [(x, n) for x, n in counts.items() if n and x]
    if len(live) == 2:  # one gain and one loss (a pair's difference in {-1, 0, 1}): the root in closed form
        (a, na), (b, nb) = live
        return min(cap, max(0.0, -(na * a + nb * b) / (a * b * (na + nb))))
    lo, hi = 0.0, cap
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if slope(mid) > 0 else (lo, mid)
    return lo


@dataclass(slots=True)
class PairedMetric:
    """One metric of the A/B decision: its pairs, its wealths and its outcome."""

    metric: str
    label: str
    scenarios: list[str]  # the scenarios whose runs feed it
    pooled: bool
    worse: Bet
    not_worse: NonInferiority | None  # pooled metrics only
    need_worse: float
    baseline: list[int] = field(default_factory=lambda: [0, 0])  # [passed, runs] over the paired runs
    current: list[int] = field(default_factory=lambda: [0, 0])
    outcome: Outcome = "undecided"
    decided_at: int | None = None  # the batch (iteration) of the decision

    def worse_e(self) -> float:
        """The worse wealth now (not its peak): what holds "not worse" back (``SUSPECT``)."""
        return math.exp(min(self.worse.log_wealth, 700.0))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "metric": self.metric, "label": self.label, "pooled": self.pooled, "pairs": self.worse.pairs,
            "baseline": self.baseline, "current": self.current, "outcome": self.outcome,
            "e_worse": _shown(self.worse.peak), "threshold_worse": round(self.need_worse, 4)}
        if self.not_worse is not None:
            out["not_worse"] = self.not_worse.to_dict()
        if self.decided_at is not None:
            out["decided_at_iteration"] = self.decided_at
        return out


def _shown(log_e: float) -> float | str:
    return "inf" if log_e > 700 else float(f"{math.exp(log_e):.6g}")


@dataclass(slots=True)
class PairedDecision:
    """The A/B decision at one look: the outcome, each metric, and what to run next."""

    outcome: Outcome
    alpha: float
    margin: float
    metrics: list[PairedMetric]
    rerun: list[str]  # scenarios feeding an undecided pooled metric: one more iteration of each on both arms
    combined_worse: float  # the weighted mean of the worse wealths (worse at 1 / alpha)
    pairs: int  # paired scenario runs behind it
    problems: list[str] = field(default_factory=list)
    #: scenarios' completion metrics whose worse evidence stands at ``SUSPECT`` or more now: "not worse"
    #: waits for them (their runs are bought) to be worse or to fall back
    held: list[str] = field(default_factory=list)
    #: the undecided pooled metrics the budget left cannot show within the margin (set by ``futile``)
    blocked: list[str] = field(default_factory=list)

    def undecided(self) -> list[PairedMetric]:
        return [m for m in self.metrics if m.pooled and m.outcome == "undecided"]

    def futile(self, rounds_left: int) -> bool:
        """True when ``rounds_left`` more iterations of ``rerun`` could change nothing: no metric could
        reach "worse" and not every undecided pooled metric could reach "not worse", each at the
        plausible best mean (see :meth:`Bet.reachable`)."""
        if self.outcome != "undecided" or self.problems:
            return self.outcome == "undecided"
        per_round = {m.metric: _pairs_per_iteration(m) for m in self.metrics}
        if any(m.worse.reachable(rounds_left * per_round[m.metric] if set(m.scenarios) & set(self.rerun) else 0,
                                 m.need_worse) for m in self.metrics if m.outcome == "undecided"):
            return False
        self.blocked = [m.metric for m in self.undecided()
                        if m.not_worse is None or not m.not_worse.reachable(rounds_left * per_round[m.metric],
                                                                            per_round[m.metric])]
        return bool(self.blocked)

    def why_futile(self) -> str:
        """Which pooled metrics the budget cannot show within the margin, and what would."""
        stuck = [m for m in self.undecided() if m.metric in self.blocked] or self.undecided()
        names = ", ".join(m.label for m in stuck[:3]) + (f" and {len(stuck) - 3} more" if len(stuck) > 3 else "")
        most = max((m.not_worse.planned for m in stuck if m.not_worse is not None), default=0)
        return (f"the budget cannot decide: {names or 'the metrics left'} cannot be shown within "
                f"{self.margin * 100:g} points by the {most} paired runs the plan allows"
                f"{' each' if len(stuck) > 1 else ''}, even at the best plausible rate and with no metric "
                "dropping; a larger --budget, or more scenarios rating them, would")

    def to_dict(self) -> dict[str, Any]:
        return {"method": "paired scenario runs (same scenario and iteration on both arms): worse by betting "
                          "e-processes, weighted Bonferroni over pooled metrics and each scenario's completion and "
                          "their weighted mean (anytime-valid); not worse when every pooled metric is shown within "
                          "the margin (intersection-union) by a group-sequential score test spending alpha over the "
                          "planned runs (Lan-DeMets, O'Brien-Fleming type)",
                "outcome": self.outcome, "alpha": self.alpha, "margin": self.margin, "pairs": self.pairs,
                "rerun": self.rerun, "combined_e_worse": float(f"{self.combined_worse:.6g}"),
                "problems": self.problems, "held": self.held, "metrics": [m.to_dict() for m in self.metrics]}


def _pairs_per_iteration(m: PairedMetric) -> int:
    return len(m.scenarios)


def _metrics(base: Mapping[tuple[str, int], Run], cur: Mapping[tuple[str, int], Run], shared: list[str],
             names: Mapping[str, str], alpha: float, margin: float, planned: int) -> list[PairedMetric]:
    rated = sorted({s for (s, _), r in base.items() if s in shared and r.evaluation is not None})
    criteria: dict[str, set[str]] = {}
    for (s, _), r in base.items():
        if s in shared:
            for name in r.criteria:
                criteria.setdefault(name, set()).add(s)
    rows: list[tuple[str, str, list[str], bool]] = [("completion", "completion", list(shared), True)]
    if rated:
        rows.append(("evaluation", "overall evaluation", rated, True))
    rows += [(f"criterion:{n}", f"criterion '{n}'", sorted(feeds), True) for n, feeds in sorted(criteria.items())]
    rows += [(f"scenario:{s}:completion", f"completion of scenario '{names.get(s, s)}'", [s], False) for s in shared]
    total = sum(POOLED_WEIGHT if pooled else 1.0 for *_, pooled in rows)
    worse = {-d: n for d, n in PRIOR_WORSE.items()}
    return [PairedMetric(name, label, feeds, pooled, Bet(WORSE_CAP, worse),
                         NonInferiority(margin, alpha, planned * len(feeds)) if pooled else None,
                         total / ((POOLED_WEIGHT if pooled else 1.0) * alpha))
            for name, label, feeds, pooled in rows]


def _value(metric: str, run: Run) -> bool | None:
    if metric == "completion" or metric.startswith("scenario:"):
        return run.passed
    if metric == "evaluation":
        return run.evaluation
    return run.criteria.get(metric.removeprefix("criterion:"))


def decide_paired(baseline: Iterable[Run], current: Iterable[Run], *, alpha: float = 0.05, margin: float = 0.10,
                  names: Mapping[str, str] | None = None, problems: Sequence[str] = (),
                  plan: Plan | None = None) -> PairedDecision:
    """The A/B decision over every run so far, replayed batch by batch (iteration by iteration) in
    iteration order, so a decision is the first look at which a wealth crossed its threshold or a
    not-worse test its boundary (looks as ``plan`` says).

    Only pairs count: a scenario and iteration both arms ran (not skipped). ``problems`` keep the
    outcome from "not worse", as the fixed gate's do."""
    base = {(r.scenario, r.iteration): r for r in baseline}
    cur = {(r.scenario, r.iteration): r for r in current}
    shared = sorted({s for s, _ in base} & {s for s, _ in cur})
    iterations = sorted({i for s, i in base if (s, i) in cur})
    plan = plan or Plan(iterations[-1] if iterations else 1, iterations[-1] if iterations else 1)
    metrics = _metrics(base, cur, shared, names or {}, alpha, margin, plan.iterations)
    weights = [POOLED_WEIGHT if m.pooled else 1.0 for m in metrics]
    total = sum(weights) or 1.0
    combined = 0.0
    outcome: Outcome = "undecided"
    for it in iterations:
        for m in metrics:
            if m.pooled and any((s, it) not in base or (s, it) not in cur for s in m.scenarios):
                continue  # an incomplete iteration breaks the pooled batch's balance
            diffs = []
            for s in m.scenarios:
                b, c = base.get((s, it)), cur.get((s, it))
                vb, vc = (_value(m.metric, b) if b else None), (_value(m.metric, c) if c else None)
                if vb is None or vc is None:
                    continue
                m.baseline[0] += vb
                m.baseline[1] += 1
                m.current[0] += vc
                m.current[1] += 1
                diffs.append(float(vc) - float(vb))
            if not diffs:
                continue
            m.worse.add([-d for d in diffs])
            if m.not_worse is not None:
                m.not_worse.add(diffs)
            if m.outcome != "worse" and m.worse.peak >= math.log(m.need_worse):
                m.outcome, m.decided_at = "worse", it  # a drop overrides an earlier "not worse" (each holds alone)
            elif (m.outcome == "undecided" and m.not_worse is not None and it >= plan.first_pass
                  and m.not_worse.look()):
                m.outcome, m.decided_at = "not worse", it
        mean = sum(math.exp(min(m.worse.log_wealth, 700.0)) * w / total for m, w in zip(metrics, weights, strict=True))
        combined = max(combined, mean)
        if outcome == "undecided" and (combined >= 1.0 / alpha or any(m.outcome == "worse" for m in metrics)):
            outcome = "worse"
    pooled = [m for m in metrics if m.pooled]
    held: list[PairedMetric] = []
    if outcome != "worse" and pooled and not problems and all(m.outcome == "not worse" for m in pooled) and shared:
        held = [m for m in metrics if not m.pooled and m.worse.log_wealth >= math.log(SUSPECT)]
        outcome = "undecided" if held else "not worse"
    rerun = sorted({s for m in pooled if m.outcome == "undecided" for s in m.scenarios}
                   | {s for m in held for s in m.scenarios}) if outcome == "undecided" and not problems else []
    return PairedDecision(outcome, alpha, margin, metrics, rerun, combined, sum(1 for k in base if k in cur),
                          list(problems), [m.metric for m in held])
