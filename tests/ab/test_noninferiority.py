"""The group-sequential not-worse test of ``fabtest ab`` (compare/noninferiority.py), in process."""

from __future__ import annotations

import math
import random

from fabtest.ab.rounds import plan_of
from fabtest.compare.noninferiority import NonInferiority, boundaries, spent, tango_z
from fabtest.compare.paired import Plan, Run, decide_paired


def test_the_boundaries_are_the_published_lan_demets_obrien_fleming_ones() -> None:
    # Jennison & Turnbull (2000) and gsDesign's sfLDOF: 5 equally spaced looks, one-sided 0.025
    found = boundaries((0.2, 0.4, 0.6, 0.8, 1.0), 0.025)
    assert [round(b, 3) for b in found] == [4.877, 3.357, 2.680, 2.290, 2.031]
    assert math.isclose(spent(1.0, 0.05), 0.05) and spent(0.25, 0.05) < 1e-3 and spent(2.0, 0.05) == spent(1.0, 0.05)
    one = boundaries((1.0,), 0.05)[0]
    assert math.isclose(one, 1.6448536, rel_tol=1e-6)  # one look at full information: the fixed-sample test


def test_the_score_statistic_is_mcnemar_at_no_margin_and_uses_the_null_variance() -> None:
    assert math.isclose(tango_z(3, 12, 100, 0.0, correction=0.0), (12 - 3) / math.sqrt(15))
    assert math.isclose(tango_z(3, 12, 100, 0.0), (12 - 3 - 0.5) / math.sqrt(15))  # half a pair: continuity
    # the restricted maximum likelihood: p01 = q, p10 = q + d maximises the likelihood of the counts
    worse, better, n, d = 9, 4, 120, 0.1
    def loglik(q: float) -> float:
        return worse * math.log(q + d) + better * math.log(q) + (n - worse - better) * math.log(1 - 2 * q - d)
    best = max((i / 100000 for i in range(1, 44999)), key=loglik)
    z = tango_z(worse, better, n, d, correction=0.0)
    assert math.isclose(z, (better - worse + n * d) / math.sqrt(n * (2 * best + d * (1 - d))), rel_tol=1e-3)
    # no discordant pair is not infinite evidence: the null's variance is at least d (1 - d) a pair
    assert math.isclose(tango_z(0, 0, 40, 0.1, correction=0.0), 40 * 0.1 / math.sqrt(40 * 0.09))


def test_a_look_past_the_plan_cannot_decide_and_close_looks_are_merged() -> None:
    test = NonInferiority(0.1, 0.05, planned=40)
    test.add([-1.0] * 10 + [0.0] * 30)  # 25 points down: never within the margin
    assert not test.look() and test.fractions == [1.0]
    test.add([0.0] * 400)
    assert not test.look() and test.fractions == [1.0]  # alpha was spent at full information
    assert not test.reachable(800, 40)
    small = NonInferiority(0.1, 0.05, planned=1000)
    small.add([0.0] * 100)
    small.look()
    small.add([0.0] * 5)  # half a percent more information: the next look waits for more
    small.look()
    assert small.fractions == [0.1]


def test_the_plan_is_what_the_budget_buys_with_every_scenario() -> None:
    assert plan_of(5, 240, 16.0) == Plan(5, 20)
    assert plan_of(5, 0, 16.0) == Plan(5, 5)
    assert plan_of(5, 5.0, math.inf) == Plan(5, 5)  # an unknown price: the first pass is the plan
    assert plan_of(5, 5.0, 0.0, max_rounds=10) == Plan(5, 14)


def test_an_unchanged_agent_is_shown_not_worse_by_the_last_planned_look() -> None:
    rng = random.Random(5)
    rates = {f"s{i}": 0.9 + 0.0125 * i for i in range(8)}
    base = [Run(s, it, rng.random() < r) for it in range(1, 21) for s, r in rates.items()]
    cur = [Run(s, it, rng.random() < r) for it in range(1, 21) for s, r in rates.items()]
    early = decide_paired([r for r in base if r.iteration <= 5], [r for r in cur if r.iteration <= 5],
                          plan=Plan(5, 20))
    assert early.outcome == "undecided"  # 40 pairs at a quarter of the plan: O'Brien-Fleming waits
    late = decide_paired(base, cur, plan=Plan(5, 20))
    completion = next(m for m in late.metrics if m.metric == "completion")
    assert late.outcome == "not worse" and completion.not_worse is not None
    assert completion.not_worse.to_dict()["planned_pairs"] == 160
    assert completion.decided_at is not None and completion.decided_at <= 20
