"""The gate's sequential mode: a decision that stays valid when results are looked at as they come.

``--fabtest-until-decided`` (issue 28 point 4) runs more iterations of the scenarios whose metrics
are still undecided and looks again. A fixed-sample test looked at after every batch is wrong far
more often than its alpha (each look is another chance of a false alarm), so this module uses
**e-values** (Ramdas, Grünwald, Vovk & Shafer 2023, "Game-theoretic statistics and safe anytime-valid
inference"): a nonnegative process whose expectation stays at most 1 under the null whatever the
stopping rule, so by Ville's inequality it ever reaches 1/a with probability at most a.

The baseline is a fixed experiment; only the current side grows. Per metric (pass/fail per scenario
run, as in the fixed gate), one **two-sample e-process** carries the metric's whole share of alpha:

* **worse**: ``inf_q e_above(baseline, q) · e_below(current, q)``. For a null pair (baseline rate
  ``pb`` at most the current ``pc``) some common rate ``q`` lies between them; there the baseline
  factor is an e-value for "pb <= q" and the current factor a **mixture sequential probability
  ratio** (Robbins 1970) for "pc >= q", a test supermartingale, independent of it, so their product
  is an e-process and the infimum over ``q`` lies below it (the device of universal inference:
  Wasserman, Ramdas & Balakrishnan 2020). Until issue 28's second pass the baseline entered through a
  Clopper-Pearson bound at half the alpha and the e-value got the other half; the product uses the
  baseline's evidence continuously and spends nothing on a bound.
* **not worse**: the mirror, ``inf_q e_below(baseline, q + margin) · e_above(current, q)``: an agent
  whose rate truly dropped by more than the margin is called not worse with probability at most alpha.

With a budget, :func:`decide` also says when the budget cannot decide (futility): stopping then is
one more stopping rule, and an e-process is valid under any, so futility changes no error rate.

Why e-values and not a group-sequential design (Pocock, O'Brien-Fleming): a group-sequential plan
fixes the number and size of the looks in advance, and here the looks are wherever the budget and
the undecided scenarios fall; an e-process allows any number of looks at any times and stopping for
any reason (budget spent, every metric decided). Its price is power: at a fixed sample it needs more
runs than the fixed-sample Fisher test, which is why the fixed gate stays the default.

The mixtures depend on the runs only through their counts, so a look is computed from the
experiments' totals. Runs of several scenarios pooled into one metric keep the e-process property
when the batches are whole iterations (by the AM-GM inequality the product over one iteration's runs
has expectation at most 1 when their mean rate is on the null side of ``q``; the baseline's runs
likewise, its rate read as the mean over its runs). The metrics (pooled completion, overall
evaluation, each criterion, each shared scenario's completion) are one family by weighted Bonferroni
(:data:`POOLED_WEIGHT`): a metric of weight ``w`` decides when its e-value reaches ``W / (w alpha)``,
``W`` the sum of the weights.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from fabtest.compare.inference import wilson
from fabtest.compare.read import Experiment, ScenarioTally

__all__ = ["SequentialDecision", "SequentialMetric", "decide", "e_above", "e_below", "e_not_worse",
           "e_worse"]

Outcome = Literal["worse", "not worse", "undecided"]


def _cf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz; Press et al.,
    Numerical Recipes, 6.4): converges in O(sqrt(max(a, b))) steps for x < (a + 1) / (a + b + 2)."""
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 100_000):
        for aa in (m * (b - m) * x / ((a - 1.0 + 2 * m) * (a + 2 * m)),
                   -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 1.0 + 2 * m))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _log_e_below(passed: int, runs: int, q: float) -> float:
    """log of :func:`e_below`: ``(1-q)^-f ∫_0^1 u^s (1-qu)^f du``, increasing in ``q`` (the
    integrand's ratio (1-qu)/(1-q) grows with q), from 1/(s+1) at q = 0."""
    s, f = passed, runs - passed
    if q <= 0.0 or runs == 0:
        return -math.log(s + 1)
    if q >= 1.0:
        return math.inf if f else -math.log(s + 1)
    a, b = s + 1.0, f + 1.0
    if q < (a + 1.0) / (a + b + 2.0):  # the lower tail's fraction: E = (1-q) cf / (s+1)
        return math.log1p(-q) + math.log(_cf(a, b, q)) - math.log(a)
    # the upper tail: ∫_0^q = B(a, b) - ∫_q^1, the second by the mirrored fraction
    log_beta = math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    log_upper = a * math.log(q) + b * math.log1p(-q) + math.log(_cf(b, a, 1.0 - q)) - math.log(b)
    ratio = math.exp(min(log_upper - log_beta, 0.0))
    if ratio >= 1.0:
        return -math.log(s + 1)
    return log_beta + math.log1p(-ratio) - a * math.log(q) - f * math.log1p(-q)


#: a pooled metric's (completion, evaluation, a criterion) weight in the family, against 1 for a scenario's
#: completion: the per-scenario hypotheses are there for concentrated collapses, large drops that
#: need little alpha, while a pooled metric's drop of a few tens of points needs all it can get
#: (weighted Bonferroni: a metric of weight w needs an e-value of W / (w alpha), W the sum of weights)
POOLED_WEIGHT = 2.0

#: the current side's mixture puts half its weight on a rate within this distance below ``q``
#: (the drops a gate is for sit close to the common rate where the infimum falls)
WINDOW = 0.15


def _log_current_below(passed: int, runs: int, q: float) -> float:
    """log of the current side's e-value against "rate >= q": half the mixture uniform on ``[0, q]``,
    half uniform on ``[q - WINDOW, q]``. Both halves are increasing in ``q`` (substitute p = q - w u:
    ``(1 - wu/q)^s (1 + wu/(1-q))^f``), so the mixture is too, as the bracket bound needs. The narrow
    half costs little evidence for a drop near ``q`` (the broad one's Occam factor is about
    sqrt(n) times larger); the broad half keeps large drops cheap."""
    broad = _log_e_below(passed, runs, q)
    if q <= WINDOW or q >= 1.0 or runs == 0:
        return broad
    s, f, low = passed, runs - passed, q - WINDOW
    top = math.log(q) + broad
    bottom = (math.log(low) + _log_e_below(passed, runs, low) + s * math.log(low / q)
              + f * math.log((1.0 - low) / (1.0 - q)))
    gap = bottom - top
    narrow = (top + math.log1p(-math.exp(gap)) if gap < 0 else -math.inf) - math.log(WINDOW)
    high = max(broad, narrow)
    return high + math.log(0.5 * math.exp(broad - high) + 0.5 * math.exp(narrow - high))


def e_below(passed: int, runs: int, q: float) -> float:
    """The mixture e-value against "rate >= q" (evidence the rate is below ``q``): the likelihood ratio
    of ``p1`` against ``q`` averaged over ``p1`` uniform on ``[0, q]`` (Robbins 1970). Under any rate
    at least ``q`` each run's ratio has expectation at most 1 (it is linear in the rate and 1 at
    ``q``), so the product over the runs, and the mixture, is a test supermartingale."""
    return math.exp(min(_log_e_below(passed, runs, q), 700.0))


def e_above(passed: int, runs: int, q: float) -> float:
    """The mixture e-value against "rate <= q" (evidence the rate is above ``q``), the alternative
    uniform on ``[q, 1]``; the mirror of :func:`e_below`, decreasing in ``q``."""
    return e_below(runs - passed, runs, 1.0 - q)


def _log_inf(dec: Callable[[float], float], inc: Callable[[float], float], lo: float, hi: float,
             need: float) -> tuple[float, float]:
    """A lower bound of ``inf_q dec(q) + inc(q)`` over ``[lo, hi]`` (log e-values), ``dec``
    decreasing and ``inc`` increasing in ``q``, and the ``q`` of the smallest value seen.

    On a bracket ``[a, b]`` the sum is at least ``dec(b) + inc(a)``, so the smallest bracket bound
    is a bound of the infimum over every ``q`` (not only the grid: a grid minimum alone would be
    too high, and a test too bold). The bracket holding the smallest bound is halved until that
    bound reaches ``need`` (decided), is within 0.05 of the smallest value seen (0.7 once a value
    below ``need`` is seen: undecided for sure, the bound is left looser, still valid), or the
    bracket is narrow."""
    grid = [lo + (hi - lo) * i / 16 for i in range(17)]
    d = [dec(q) for q in grid]
    n = [inc(q) for q in grid]
    best_q, best = min(((q, x + y) for q, x, y in zip(grid, d, n, strict=True)), key=lambda t: t[1])
    heap = [(d[i + 1] + n[i], grid[i], grid[i + 1], n[i], d[i + 1]) for i in range(len(grid) - 1)]
    heapq.heapify(heap)
    for _ in range(80):
        bound, a, b, n_a, d_b = heap[0]
        if bound >= need or best - bound <= (0.05 if best >= need or math.isinf(need) else 0.7) or b - a < 1e-9:
            break  # decided, or tight (looser once a value below need is seen: undecided for sure)
        heapq.heappop(heap)
        mid = (a + b) / 2
        d_m, n_m = dec(mid), inc(mid)
        if d_m + n_m < best:
            best_q, best = mid, d_m + n_m
        heapq.heappush(heap, (d_m + n_a, a, mid, n_a, d_m))
        heapq.heappush(heap, (d_b + n_m, mid, b, n_m, d_b))
    return heap[0][0], best_q


def e_worse(baseline: tuple[int, int], current: tuple[int, int], need: float = math.inf) -> tuple[float, float]:
    """The two-sample e-value against "the current rate is at least the baseline's" and the common
    rate ``q`` where it is smallest: ``inf_q e_above(baseline, q) · e_below(current, q)``.

    For a null pair (baseline rate ``pb`` <= current rate ``pc``) some ``q`` lies between them, where
    the baseline factor is an e-value for "pb <= q" and the current factor a test supermartingale
    for "pc >= q"; the baseline is independent of the current runs, so the product at that ``q``
    is an e-process (a fixed e-value times a test supermartingale: Ville's inequality bounds it
    reaching 1/a by a) and the infimum over ``q`` is below it (universal inference's device of
    minimising over the null: Wasserman, Ramdas & Balakrishnan 2020). No alpha is spent on a
    separate bound of the baseline: its evidence enters continuously."""
    (sb, nb), (sc, nc) = baseline, current
    if not nb or not nc:
        return 1.0, 0.0
    bound, q = _log_inf(lambda t: _log_e_below(nb - sb, nb, 1.0 - t), lambda t: _log_current_below(sc, nc, t),
                        0.0, 1.0, math.log(need))
    return math.exp(min(bound, 700.0)), q


def e_not_worse(baseline: tuple[int, int], current: tuple[int, int], margin: float,
                need: float = math.inf) -> tuple[float, float]:
    """The two-sample e-value against "the current rate is below the baseline's by at least
    ``margin``": ``inf_q e_below(baseline, q + margin) · e_above(current, q)`` over ``q`` in
    ``[0, 1 - margin]`` (the mirror of :func:`e_worse`: a null pair has ``pc <= q <= pb - margin``)."""
    (sb, nb), (sc, nc) = baseline, current
    if not nb or not nc:
        return 1.0, 0.0
    bound, q = _log_inf(lambda t: _log_current_below(nc - sc, nc, 1.0 - t), lambda t: _log_e_below(sb, nb, t + margin),
                        0.0, 1.0 - margin, math.log(need))
    return math.exp(min(bound, 700.0)), q


#: the most current runs a futility projection considers (a budget beyond it is as good as endless)
MOST_RUNS = 1_000_000

#: stop for futility when no undecided metric could be decided even if every run the budget leaves
#: went at the most favourable plausible rate: the end of the current rate's 95 % Wilson interval
#: (low for worse, high for not worse). A real drop keeps its runs (its interval reaches far below
#: the baseline); an unchanged agent, whose interval does not, stops at the first look.
PLAUSIBLE_Z = 1.959963984540054


@dataclass(slots=True)
class SequentialMetric:
    """One metric's sequential test: the counts, the two e-values and what they decide."""

    metric: str
    label: str
    baseline: tuple[int, int]  # [passed, runs]
    current: tuple[int, int]
    scenarios: list[str]  # the scenario ids whose runs feed it (what to run again while undecided)
    worse_at: float  # the common rate where the worse e-value is smallest
    not_worse_at: float  # the current rate where the not-worse e-value is smallest
    e_worse: float
    e_not_worse: float
    outcome: Outcome
    #: with a budget, for an undecided metric: the current runs at its current rate that would decide
    #: it (None: none within 100 times the budget; the baseline's runs are too few)
    runs_needed: int | None = None
    projected: bool = False  # runs_needed was computed (a futility stop)
    need: float = math.inf  # the e-value a decision needs: W / (weight x alpha)

    def to_dict(self) -> dict[str, Any]:
        out = {"metric": self.metric, "label": self.label, "baseline": list(self.baseline),
               "current": list(self.current), "scenarios": self.scenarios, "worse_at": round(self.worse_at, 6),
               "not_worse_at": round(self.not_worse_at, 6), "e_worse": _shown(self.e_worse),
               "e_not_worse": _shown(self.e_not_worse), "threshold": round(self.need, 6),
               "outcome": self.outcome}
        if self.projected:
            out["runs_needed"] = self.runs_needed
        return out


def _shown(e: float) -> float | str:
    return "inf" if math.isinf(e) else float(f"{e:.6g}")


@dataclass(slots=True)
class SequentialDecision:
    """The sequential gate over two experiments: the outcome, each metric, and what to run next."""

    outcome: Outcome
    alpha: float
    margin: float
    threshold: float  # the e-value a decision needs (K / alpha)
    metrics: list[SequentialMetric] = field(default_factory=list)
    #: the scenarios with a metric still undecided: the ones worth another iteration
    rerun: list[str] = field(default_factory=list)
    runs_spent: int = 0  # current scenario runs behind the decision
    #: undecided, and no undecided metric can be decided within the budget left (see :func:`decide`)
    futile: bool = False
    #: the weighted mean of the metrics' worse e-values: worse when it reaches 1 / alpha
    combined: float = 0.0
    #: why it cannot be "not worse" whatever the metrics say (the fixed gate's problems)
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"method": "two-sample mixture e-values (the infimum over the common rate of a baseline e-value "
                          "times a current test supermartingale), weighted Bonferroni over the metrics and their "
                          "weighted mean (anytime-valid: "
                          "any number of looks)",
                "outcome": self.outcome, "alpha": self.alpha, "margin": self.margin,
                "threshold": round(self.threshold, 6), "runs_spent": self.runs_spent, "rerun": self.rerun,
                "futile": self.futile, "combined_e_worse": _shown(self.combined),
                "metrics": [m.to_dict() for m in self.metrics]}

    def needed(self) -> str:
        """Which undecided metrics the budget cannot decide, and the runs each would need."""
        parts = []
        for m in self.metrics:
            if m.projected:
                parts.append(f"{m.label} (about {m.runs_needed:,} current runs at its rate)" if m.runs_needed
                             else f"{m.label} (no number of current runs: the baseline's {m.baseline[1]} are too few)")
        return "; ".join(parts)

    def verdict(self) -> str:
        """The verdict line of a ``--sequential`` comparison (the exit code follows it, so it opens the
        output in place of the fixed gate's): the outcome, then why."""
        if self.outcome == "undecided" and self.problems:
            return f"undecided (sequential gate): {self.problems[0]}"
        return f"{self.outcome} (sequential gate): {self.line().split(': ', 1)[1]}"

    def line(self) -> str:
        """One line: the outcome and, while undecided, which scenarios another iteration would feed."""
        counts = {o: sum(m.outcome == o for m in self.metrics) for o in ("worse", "not worse", "undecided")}
        head = (f"sequential {self.outcome}: {counts['worse']} worse, {counts['not worse']} not worse, "
                f"{counts['undecided']} undecided of {len(self.metrics)} metric(s) after {self.runs_spent} run(s)")
        if self.outcome == "worse" and not counts["worse"]:
            head += (f"; together they show a drop (the weighted mean of their e-values, {self.combined:.3g}, "
                     f"reached 1/alpha)")
        if self.futile:
            head += "; the budget cannot decide the undecided ones"
        elif self.outcome == "undecided" and self.rerun:
            head += f"; another iteration of {len(self.rerun)} scenario(s) would feed the undecided ones"
        return head


def _metric(name: str, label: str, b: tuple[int, int], c: tuple[int, int], scenarios: list[str],
            need: float, margin: float) -> SequentialMetric:
    """One metric: worse or not worse when its two-sample e-value reaches ``need``."""
    e_bad, at_bad = e_worse(b, c, need)
    e_ok, at_ok = e_not_worse(b, c, margin, need)
    outcome: Outcome = "worse" if e_bad >= need else "not worse" if e_ok >= need else "undecided"
    return SequentialMetric(name, label, b, c, scenarios, at_bad, at_ok, e_bad, e_ok, outcome, need=need)


def _projected(m: SequentialMetric, extra: int, margin: float, side: str, z: float) -> float:
    """``m``'s e-value on ``side`` if ``extra`` more rated runs went at the end of the current rate's
    Wilson interval at ``z`` (the low end for worse, the high end for not worse; ``z`` 0: at the
    current rate)."""
    sc, nc = m.current
    low, high = wilson(sc, nc, z) or (0.0, 1.0)
    if side == "worse":
        return e_worse(m.baseline, (sc + math.floor(extra * low), nc + extra))[0]  # tight: it is summed
    return e_not_worse(m.baseline, (sc + math.ceil(extra * high), nc + extra), margin, m.need)[0]


def _reaches(m: SequentialMetric, extra: int, margin: float, side: str, z: float) -> bool:
    """Whether ``extra`` more rated runs could decide ``m`` on ``side`` (see :func:`_projected`)."""
    return _projected(m, extra, margin, side, z) >= m.need


def _extra(m: SequentialMetric, current: Mapping[str, ScenarioTally], iterations: int) -> int:
    """The rated runs ``iterations`` more iterations of ``m``'s scenarios add (at the share of runs
    that rated it so far)."""
    runs = sum(current[s].runs for s in m.scenarios if s in current)
    return iterations * len(m.scenarios) * m.current[1] // max(1, runs)


def _runs_needed(m: SequentialMetric, current: Mapping[str, ScenarioTally], cap: int, margin: float) -> int | None:
    """The fewest current runs (doubling the iterations, up to ``cap`` runs) that decide ``m`` either
    way at its current rate."""
    iterations = 1
    while iterations * len(m.scenarios) <= cap:
        extra = _extra(m, current, iterations)
        if any(_reaches(m, extra, margin, side, 0.0) for side in ("worse", "not worse")):
            return m.current[1] + extra
        iterations *= 2
    return None


def _futile(metrics: list[SequentialMetric], current: Mapping[str, ScenarioTally], rerun: list[str],
            budget_left: int, margin: float, alpha: float) -> bool:
    """True when the budget left cannot change the outcome from undecided, even with every run left at
    the most favourable plausible rate (:data:`PLAUSIBLE_Z`): no undecided metric can reach "worse"
    alone or in the weighted mean of the metrics' worse e-values (every run left spent on each metric's
    own scenarios, the most it could get), and not every undecided metric can reach "not worse" (the
    outcome needs them all; the runs left spent on whole iterations of ``rerun``). A metric with no
    current rated run cannot be projected and keeps the loop going while the budget allows an
    iteration of its scenarios."""
    budget_left = min(budget_left, MOST_RUNS)  # free runs (a dollar budget at $0 a run) are not endless
    undecided = [m for m in metrics if m.outcome == "undecided"]
    combined = 0.0  # the weighted mean of the worse e-values, the undecided ones projected (share: 1 / need alpha)
    for m in metrics:
        if m.outcome == "undecided" and not m.current[1]:
            if budget_left >= len(m.scenarios):
                return False
            continue
        own = _extra(m, current, budget_left // len(m.scenarios)) if m.outcome == "undecided" else 0
        combined += (_projected(m, own, margin, "worse", PLAUSIBLE_Z) if own else m.e_worse) / (m.need * alpha)
    if combined >= 1.0 / alpha:  # covers one metric alone at its threshold
        return False
    shared = budget_left // max(1, len(rerun))
    if shared and all(m.current[1] and _reaches(m, _extra(m, current, shared), margin, "not worse", PLAUSIBLE_Z)
                      for m in undecided):
        return False
    for m in undecided:
        m.projected = True
        cap = min(100 * max(1, budget_left), MOST_RUNS)
        m.runs_needed = _runs_needed(m, current, cap, margin) if m.current[1] else None
    return True


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
           problems: Sequence[str] = (), budget_left: int | None = None) -> SequentialDecision:
    """The sequential gate of ``current`` against the fixed ``baseline`` at this look (see the module
    docstring): worse if a metric is worse, not worse if every metric is, else undecided, with the
    scenarios whose metrics are undecided as the ones to run again. ``problems`` (the fixed gate's:
    a damaged index, nothing shared) keep it from "not worse", as they keep the fixed gate.

    With ``budget_left`` (the scenario runs that may still be added), an undecided gate that the
    budget cannot decide is ``futile`` and names nothing to run again: stopping for futility is one
    more stopping rule, and the e-values hold under any, so it changes no error rate."""
    base, cur = baseline.scenarios, current.scenarios
    shared = sorted(s for s in base.keys() & cur.keys() if base[s].runs)
    rows = _pooled(base, cur, shared) if shared else []
    rows += [(f"scenario:{s}:completion", f"completion of scenario '{base[s].name}'", (base[s].passes, base[s].runs),
              (cur[s].passes, cur[s].runs), [s]) for s in shared]
    weights = [1.0 if name.startswith("scenario:") else POOLED_WEIGHT for name, *_ in rows]
    total = sum(weights) or 1.0
    metrics = [_metric(name, label, b, c, feeds, total / (w * alpha), margin)
               for (name, label, b, c, feeds), w in zip(rows, weights, strict=True)]
    # the weighted mean of the worse e-values is an e-process for "no metric dropped" too, and at least
    # as strong as weighted Bonferroni (a metric alone at W / (w alpha) puts the mean at 1 / alpha); it
    # adds the case of several metrics dropping together (a criterion and the overall evaluation)
    combined = sum(m.e_worse * (w / total) for m, w in zip(metrics, weights, strict=True)) if metrics else 0.0
    if not metrics:
        outcome: Outcome = "undecided"
    elif any(m.outcome == "worse" for m in metrics) or combined >= 1.0 / alpha:
        outcome = "worse"
    elif all(m.outcome == "not worse" for m in metrics) and not problems:
        outcome = "not worse"
    else:
        outcome = "undecided"
    rerun = sorted({s for m in metrics if m.outcome == "undecided" for s in m.scenarios})
    futile = (outcome == "undecided" and budget_left is not None
              and _futile(metrics, cur, rerun, budget_left, margin, alpha))
    if outcome == "worse" or futile:
        rerun = []
    return SequentialDecision(outcome, alpha, margin, max((m.need for m in metrics), default=1.0 / alpha), metrics,
                              rerun, sum(cur[s].runs for s in shared), futile, combined, list(problems))
