"""The gate's sequential mode: a decision that stays valid when results are looked at as they come.

``--fabtest-until-decided`` (issue 28 point 4) runs more iterations of the scenarios whose metrics
are still undecided and looks again. A fixed-sample test looked at after every batch is wrong far
more often than its alpha (each look is another chance of a false alarm), so this module uses
**e-values** (Ramdas, Grünwald, Vovk & Shafer 2023, "Game-theoretic statistics and safe anytime-valid
inference"): a nonnegative process whose expectation stays at most 1 under the null whatever the
stopping rule, so by Ville's inequality it ever reaches 1/a with probability at most a.

The baseline is a fixed experiment; only the current side grows. Per metric (pass/fail per scenario
run, as in the fixed gate), with the alpha of a metric split in halves:

* **worse**: the baseline rate is at least ``L``, the one-sided Clopper-Pearson lower bound of the
  baseline at alpha/2, unless a rare event; the current runs are tested against "rate >= L" with a
  **mixture sequential probability ratio** (Robbins 1970): the likelihood ratio of the runs under a
  rate ``p1 < L`` against ``L``, averaged over ``p1`` uniform on ``[0, L]``. For every true rate at
  least ``L`` each ratio has expectation at most 1 (it is linear in the rate and equal to 1 at
  ``L``), so the mixture is an e-process. An unchanged agent is called worse with probability at
  most alpha/2 (the baseline bound) + alpha/2 (Ville).
* **not worse**: the same with the upper bound ``U`` of the baseline and the target ``U - margin``,
  the alternative uniform on ``[U - margin, 1]``: an agent whose rate truly dropped by more than the
  margin is called not worse with probability at most alpha.

Why e-values and not a group-sequential design (Pocock, O'Brien-Fleming): a group-sequential plan
fixes the number and size of the looks in advance, and here the looks are wherever the budget and
the undecided scenarios fall; an e-process allows any number of looks at any times and stopping for
any reason (budget spent, every metric decided). Its price is power: at a fixed sample it needs more
runs than the fixed-sample Fisher test, which is why the fixed gate stays the default.

The mixture depends on the runs only through their counts, so a look is computed from the current
experiment's totals. Runs of several scenarios pooled into one metric keep the e-process property
when the batches are whole iterations (by the AM-GM inequality the product over one iteration's runs
has expectation at most 1 when their mean rate is at least ``L``). The metrics (pooled completion,
overall evaluation, each criterion, each shared scenario's completion) are one family by Bonferroni:
each decision needs its e-value at least ``2K / alpha``, K metrics.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from fabtest.compare.read import Experiment, ScenarioTally

__all__ = ["SequentialDecision", "SequentialMetric", "clopper_pearson", "decide", "e_above", "e_below"]

Outcome = Literal["worse", "not worse", "undecided"]


def _log_binom_tail(n: int, q: float, k: int, upper: bool) -> float:
    """log P(Binomial(n, q) >= k) (``upper``) or log P(Binomial(n, q) <= k), summed in log space."""
    ks = range(k, n + 1) if upper else range(0, k + 1)
    if not ks:
        return -math.inf
    lq, l1q = math.log(q), math.log1p(-q)
    terms = [math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n - j + 1) + j * lq + (n - j) * l1q for j in ks]
    top = max(terms)
    return top + math.log(sum(math.exp(t - top) for t in terms))


def _log_beta(s: int, f: int) -> float:
    """log B(s + 1, f + 1) = log s! f! / (s + f + 1)!"""
    return math.lgamma(s + 1) + math.lgamma(f + 1) - math.lgamma(s + f + 2)


def e_below(passed: int, runs: int, q: float) -> float:
    """The mixture e-value against "rate >= q" (evidence the rate is below ``q``): the likelihood ratio
    of ``p1`` against ``q`` averaged over ``p1`` uniform on ``[0, q]``. Closed form, since
    ``∫_0^q p^s (1-p)^f dp = B(s+1, f+1) · P(Binomial(s+f+1, q) >= s+1)``."""
    if runs == 0:
        return 1.0
    if q >= 1.0:  # a rate of at least 1: one failed run disproves it
        return math.inf if passed < runs else 1.0
    if q <= 0.0:  # every rate is at least 0
        return 0.0
    s, f = passed, runs - passed
    log_e = (_log_beta(s, f) + _log_binom_tail(s + f + 1, q, s + 1, upper=True) - math.log(q)
             - s * math.log(q) - f * math.log1p(-q))
    return math.exp(min(log_e, 700.0))


def e_above(passed: int, runs: int, q: float) -> float:
    """The mixture e-value against "rate <= q" (evidence the rate is above ``q``), the alternative
    uniform on ``[q, 1]``; the mirror of :func:`e_below`."""
    return e_below(runs - passed, runs, 1.0 - q)


def clopper_pearson(passed: int, runs: int, alpha: float, *, upper: bool) -> float:
    """The one-sided (1 - alpha) Clopper-Pearson bound of a rate (exact; found by bisection)."""
    if runs == 0:
        return 1.0 if upper else 0.0
    if (upper and passed == runs) or (not upper and passed == 0):
        return 1.0 if upper else 0.0
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if upper:  # the largest p with P(X <= passed | p) >= alpha
            ok = math.exp(_log_binom_tail(runs, mid, passed, upper=False)) >= alpha
            lo, hi = (mid, hi) if ok else (lo, mid)
        else:  # the smallest p with P(X >= passed | p) >= alpha
            ok = math.exp(_log_binom_tail(runs, mid, passed, upper=True)) >= alpha
            lo, hi = (lo, mid) if ok else (mid, hi)
    return lo if upper else hi


@dataclass(slots=True)
class SequentialMetric:
    """One metric's sequential test: the counts, the two e-values and what they decide."""

    metric: str
    label: str
    baseline: tuple[int, int]  # [passed, runs]
    current: tuple[int, int]
    scenarios: list[str]  # the scenario ids whose runs feed it (what to run again while undecided)
    lower: float  # the baseline's lower bound the worse test is against
    target: float  # the baseline's upper bound minus the margin the not-worse test is against
    e_worse: float
    e_not_worse: float
    outcome: Outcome

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "label": self.label, "baseline": list(self.baseline),
                "current": list(self.current), "scenarios": self.scenarios, "baseline_lower": round(self.lower, 6),
                "not_worse_target": round(self.target, 6), "e_worse": _shown(self.e_worse),
                "e_not_worse": _shown(self.e_not_worse), "outcome": self.outcome}


def _shown(e: float) -> float | str:
    return "inf" if math.isinf(e) else float(f"{e:.6g}")


@dataclass(slots=True)
class SequentialDecision:
    """The sequential gate over two experiments: the outcome, each metric, and what to run next."""

    outcome: Outcome
    alpha: float
    margin: float
    threshold: float  # the e-value a decision needs (2K / alpha)
    metrics: list[SequentialMetric] = field(default_factory=list)
    #: the scenarios with a metric still undecided: the ones worth another iteration
    rerun: list[str] = field(default_factory=list)
    runs_spent: int = 0  # current scenario runs behind the decision

    def to_dict(self) -> dict[str, Any]:
        return {"method": "mixture SPRT e-values against Clopper-Pearson bounds of the baseline, Bonferroni "
                          "over the metrics (anytime-valid: any number of looks)",
                "outcome": self.outcome, "alpha": self.alpha, "margin": self.margin,
                "threshold": round(self.threshold, 6), "runs_spent": self.runs_spent, "rerun": self.rerun,
                "metrics": [m.to_dict() for m in self.metrics]}

    def line(self) -> str:
        """One line: the outcome and, while undecided, which scenarios another iteration would feed."""
        counts = {o: sum(m.outcome == o for m in self.metrics) for o in ("worse", "not worse", "undecided")}
        head = (f"sequential {self.outcome}: {counts['worse']} worse, {counts['not worse']} not worse, "
                f"{counts['undecided']} undecided of {len(self.metrics)} metric(s) after {self.runs_spent} run(s)")
        if self.outcome == "undecided" and self.rerun:
            head += f"; another iteration of {len(self.rerun)} scenario(s) would feed the undecided ones"
        return head


def _metric(name: str, label: str, b: tuple[int, int], c: tuple[int, int], scenarios: list[str],
            share: float, margin: float) -> SequentialMetric:
    """One metric at its share of alpha (half for the baseline bound, half for the e-value)."""
    lower = clopper_pearson(*b, share / 2, upper=False)
    target = clopper_pearson(*b, share / 2, upper=True) - margin
    need = 2.0 / share
    e_worse = e_below(c[0], c[1], lower) if b[1] else 1.0
    e_ok = (math.inf if target <= 0 else e_above(c[0], c[1], target)) if b[1] and c[1] else 1.0
    outcome: Outcome = "worse" if e_worse >= need else "not worse" if e_ok >= need else "undecided"
    return SequentialMetric(name, label, b, c, scenarios, lower, target, e_worse, e_ok, outcome)


def _sum(pairs: list[tuple[int, int]]) -> tuple[int, int]:
    return sum(p for p, _ in pairs), sum(n for _, n in pairs)


def _pooled(base: Mapping[str, ScenarioTally], cur: Mapping[str, ScenarioTally],
            shared: list[str]) -> list[tuple[str, str, tuple[int, int], tuple[int, int], list[str]]]:
    out = [("completion", "completion", _sum([(base[s].passes, base[s].runs) for s in shared]),
            _sum([(cur[s].passes, cur[s].runs) for s in shared]), list(shared))]
    rated = [s for s in shared if base[s].eval_runs]  # a judge outage leaves the current side at 0: undecided
    if rated:
        out.append(("evaluation", "overall evaluation", _sum([(base[s].eval_clean, base[s].eval_runs) for s in rated]),
                    _sum([(cur[s].eval_clean, cur[s].eval_runs) for s in rated]), rated))
    names = sorted({n for s in shared for n in base[s].run_counts("criteria")})
    for name in names:
        feeds = [s for s in shared if name in base[s].run_counts("criteria")]
        b = _sum([tuple(base[s].run_counts("criteria")[name]) for s in feeds])  # type: ignore[misc]
        c = _sum([tuple(cur[s].run_counts("criteria").get(name, [0, 0])) for s in feeds])  # type: ignore[misc]
        if b[1]:
            out.append((f"criterion:{name}", f"criterion '{name}'", b, c, feeds))
    return out


def decide(baseline: Experiment, current: Experiment, *, alpha: float = 0.05, margin: float = 0.10,
           problems: Sequence[str] = ()) -> SequentialDecision:
    """The sequential gate of ``current`` against the fixed ``baseline`` at this look (see the module
    docstring): worse if a metric is worse, not worse if every metric is, else undecided, with the
    scenarios whose metrics are undecided as the ones to run again. ``problems`` (the fixed gate's:
    a damaged index, nothing shared) keep it from "not worse", as they keep the fixed gate."""
    base, cur = baseline.scenarios, current.scenarios
    shared = sorted(s for s in base.keys() & cur.keys() if base[s].runs)
    rows = _pooled(base, cur, shared) if shared else []
    rows += [(f"scenario:{s}:completion", f"completion of scenario '{base[s].name}'", (base[s].passes, base[s].runs),
              (cur[s].passes, cur[s].runs), [s]) for s in shared]
    k = max(1, len(rows))
    metrics = [_metric(name, label, b, c, feeds, alpha / k, margin) for name, label, b, c, feeds in rows]
    if not metrics:
        outcome: Outcome = "undecided"
    elif any(m.outcome == "worse" for m in metrics):
        outcome = "worse"
    elif all(m.outcome == "not worse" for m in metrics) and not problems:
        outcome = "not worse"
    else:
        outcome = "undecided"
    rerun = sorted({s for m in metrics if m.outcome == "undecided" for s in m.scenarios})
    if outcome == "worse":
        rerun = []
    return SequentialDecision(outcome, alpha, margin, 2.0 * k / alpha, metrics, rerun,
                              sum(cur[s].runs for s in shared))
