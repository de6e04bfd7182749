"""The statistics behind the gate's three outcomes: intervals, the non-inferiority bound, the stratified
drop test, the family adjustment and the runs a decision needs.

Why these (docs/gates.md says it for users):

* **Wilson score intervals** for every rate: unlike the textbook Wald interval they stay inside
  [0, 1] and keep close to their stated coverage at 5-20 runs and at 0 % or 100 % (Brown, Cai &
  DasGupta 2001), which is where agent suites live.
* **"Not worse" is a non-inferiority test**: the lower bound of Newcombe's hybrid score interval
  for the difference current - baseline (Newcombe 1998, method 10: built from the two Wilson
  intervals, closed form, near-nominal coverage for small samples) must lie above ``-margin``.
  Each metric is tested at alpha and the gate says "not worse" only when *every* metric is
  non-inferior: an intersection-union test (Berger 1982), whose error rate is at most alpha with no
  multiplicity correction.
* **Pooled completion is stratified by scenario**: the exact conditional test of a common odds
  ratio (the exact form of the Cochran-Mantel-Haenszel test: each scenario's table conditioned on its
  margins, the baseline passes summed), so a collapsing scenario is not averaged away by steady
  ones, and a scenario mix that differs between the sides cannot fake a drop. Past a few thousand
  support points the sum is approximated by the CMH normal statistic with continuity correction.
* **Holm with Tarone's rule** (``adjust``), computed with a Fenwick tree: at every step the count
  of hypotheses whose smallest attainable p could still reach the level is a prefix count, so
  19,000 per-scenario hypotheses take milliseconds, not minutes.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import Counter
from collections.abc import Sequence
from statistics import NormalDist

__all__ = [
    "adjust",
    "tarone_k",
    "newcombe_lower",
    "runs_to_decide",
    "runs_to_detect",
    "stratified_drop",
    "wilson",
    "z_of",
]

_NORMAL = NormalDist()
POWER = 0.80  # the power the "runs needed" hints are computed for
_EXACT_WORK = 2_000_000  # convolution steps before the stratified test switches to the normal approximation


def z_of(alpha: float) -> float:
    """The one-sided normal quantile z with P(Z > z) = alpha."""
    return _NORMAL.inv_cdf(1.0 - alpha)


def wilson(passed: float, n: float, z: float = 1.959963984540054) -> tuple[float, float] | None:
    """The Wilson score interval of ``passed``/``n`` (95 % two-sided by default; None: nothing rated)."""
    if n <= 0:
        return None
    p = passed / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe_lower(b: Sequence[float], c: Sequence[float], alpha: float) -> float | None:
    """The one-sided (1 - alpha) lower confidence bound of current rate - baseline rate (Newcombe's
    hybrid score interval); ``b``, ``c`` are [passed, runs]. None when a side has no runs."""
    z = z_of(alpha)
    wb, wc = wilson(b[0], b[1], z), wilson(c[0], c[1], z)
    if wb is None or wc is None:
        return None
    pb, pc = b[0] / b[1], c[0] / c[1]
    return (pc - pb) - math.sqrt((pc - wc[0]) ** 2 + (wb[1] - pb) ** 2)


def runs_to_decide(rate: float, margin: float, alpha: float) -> int:
    """Runs per side for the non-inferiority test to show "not worse" with 80 % power when nothing
    changed, at a true rate ``rate`` (clipped to [2 %, 98 %]: at 100 % the Wilson bound still needs
    about 25 runs to come within 10 points)."""
    p = min(0.98, max(0.02, rate))
    return math.ceil((z_of(alpha) + z_of(1 - POWER)) ** 2 * 2 * p * (1 - p) / margin ** 2)


def runs_to_detect(rate: float, margin: float, alpha: float) -> int | None:
    """Runs per side for a drop of ``margin`` from ``rate`` to be flagged with 80 % power at level
    ``alpha`` (normal approximation with continuity correction; None: the rate is below the margin,
    no such drop exists)."""
    if rate < margin - 1e-12:
        return None
    p1, p2 = min(0.98, max(0.02, rate)), min(0.98, max(0.02, rate - margin))
    n = (z_of(alpha) + z_of(1 - POWER)) ** 2 * (p1 * (1 - p1) + p2 * (1 - p2)) / margin ** 2
    # Fleiss, Tytun & Ury (1980): the continuity correction that brings the normal formula to the
    # runs an exact (Fisher) test needs
    return math.ceil(n / 4 * (1 + math.sqrt(1 + 4 / (n * margin))) ** 2)


# ---------------------------------------------------------------------------------------------
# the stratified drop test


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def _hypergeom(bn: int, cn: int, m1: int) -> tuple[int, list[float]]:
    """The baseline passes of one scenario's table given its margins: (lowest value, pmf from it)."""
    total = bn + cn
    lo, hi = max(0, m1 - cn), min(bn, m1)
    base = _log_comb(total, m1)
    return lo, [math.exp(_log_comb(bn, k) + _log_comb(cn, m1 - k) - base) for k in range(lo, hi + 1)]


def stratified_drop(strata: Sequence[tuple[int, int, int, int]]) -> tuple[float, float, str] | None:
    """One-sided exact stratified test that the baseline passes more often than the current side,
    each stratum (bp, bn, cp, cn) conditioned on its margins. Returns (p, the smallest p the margins
    allow, the method), or None when no stratum can tell the sides apart (every run passed, every run
    failed, or a side has no runs)."""
    kinds = Counter(s for s in strata if s[1] > 0 and s[3] > 0 and 0 < s[0] + s[2] < s[1] + s[3])
    if not kinds:
        return None
    observed = sum(bp * times for (bp, _, _, _), times in kinds.items())
    top = sum(min(bn, bp + cp) * times for (bp, bn, cp, _), times in kinds.items())
    support = sum((min(bn, bp + cp) - max(0, bp + cp - cn)) * times for (bp, bn, cp, cn), times in kinds.items())
    if support * support <= _EXACT_WORK:
        lo, pmf = 0, [1.0]
        for (bp, bn, cp, cn), times in kinds.items():
            s_lo, s_pmf = _hypergeom(bn, cn, bp + cp)
            for _ in range(times):
                out = [0.0] * (len(pmf) + len(s_pmf) - 1)
                for i, a in enumerate(pmf):
                    if a:
                        for j, b in enumerate(s_pmf):
                            out[i + j] += a * b
                lo, pmf = lo + s_lo, out
        p = min(1.0, sum(pmf[max(0, observed - lo):]))
        return p, min(1.0, sum(pmf[top - lo:])), "exact"
    mean = var = 0.0
    for (bp, bn, cp, cn), times in kinds.items():
        n, m1 = bn + cn, bp + cp
        mean += times * bn * m1 / n
        var += times * bn * cn * m1 * (n - m1) / (n * n * (n - 1))
    sd = math.sqrt(var)
    return (1.0 - _NORMAL.cdf((observed - mean - 0.5) / sd), 1.0 - _NORMAL.cdf((top - mean - 0.5) / sd),
            "normal approximation")


# ---------------------------------------------------------------------------------------------
# the family


class _Fenwick:
    def __init__(self, n: int) -> None:
        self.tree = [0] * (n + 1)

    def add(self, i: int, value: int) -> None:
        i += 1
        while i < len(self.tree):
            self.tree[i] += value
            i += i & -i

    def prefix(self, i: int) -> int:
        """The sum of positions 0..i-1."""
        total = 0
        while i > 0:
            total += self.tree[i]
            i -= i & -i
        return total


def tarone_k(p_mins: Sequence[float], alpha: float) -> int:
    """Tarone's K: the smallest k with at most k hypotheses able to reach p < alpha / k (at least 1)."""
    keys = sorted(p for p in p_mins if p < alpha)
    for k in range(1, len(keys) + 1):
        if bisect_left(keys, alpha / k) <= k:
            return k
    return 1


def adjust(p_values: Sequence[float], p_mins: Sequence[float], alpha: float) -> list[float]:
    """Family-adjusted p-values (Holm's step-down with Tarone's K at each step): a hypothesis is
    rejected when its adjusted p is below alpha, and the family-wise error rate is at most alpha.

    Tarone's K over the hypotheses still in: the smallest k with at most k of them able to reach
    p < alpha / k. Only hypotheses whose smallest p is below alpha can ever count, and the count is
    a prefix count over their sorted smallest p-values (a Fenwick tree), found by bisection on k:
    O(n log² n) for n hypotheses."""
    n = len(p_values)
    order = sorted(range(n), key=p_values.__getitem__)
    counted = sorted((p_mins[i], i) for i in range(n) if p_mins[i] < alpha)
    keys = [p for p, _ in counted]
    position = {i: pos for pos, (_, i) in enumerate(counted)}
    tree = _Fenwick(len(counted))
    for pos in range(len(counted)):
        tree.add(pos, 1)
    left = len(counted)

    def tarone() -> int:
        lo, hi = 1, max(1, left)  # c(k) - k falls strictly with k, and c(left) <= left
        while lo < hi:
            mid = (lo + hi) // 2
            if tree.prefix(bisect_left(keys, alpha / mid)) <= mid:
                hi = mid
            else:
                lo = mid + 1
        return lo

    out = [1.0] * n
    running = 0.0
    for i in order:
        if running >= 1.0:
            break  # every later adjusted p is 1
        running = max(running, min(1.0, tarone() * p_values[i]))
        out[i] = running
        if i in position:
            tree.add(position[i], -1)
            left -= 1
    return out
