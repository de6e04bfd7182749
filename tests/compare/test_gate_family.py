"""The gate's targets (issue 22), checked by seeded simulation on the statistics layer.

Experiments are built from index rows (``Experiment.add_rows``, what ``fabtest-compare`` adds up
while reading a file), compared and gated with ``experiment.gate.evaluate``: the same code as the
command, without files. Every run of a criterion is rated 1-3 times, and the ratings of one run are
correlated (a run is "good" or "bad" for a criterion), as the turns of one conversation are.
"""

from __future__ import annotations

import random
from typing import Any

from fabtest.compare.compute import compare
from fabtest.compare.read import Experiment
from fabtest.compare.gate import GateOptions, adjust, binomial_cdf, evaluate, sign_test_p

ALPHA = 0.05
PAIRS = 1000


def _experiment(exp_id: str, rates: dict[str, dict[str, float]], completion: dict[str, float], iterations: int,
                rng: random.Random, drop: tuple[str, float] | None = None) -> Experiment:
    """One experiment: ``rates[scenario][criterion]`` is the chance a run is good for the criterion;
    ``drop`` = (criterion, new rate) changes one criterion's rate in every scenario."""
    doc: dict[str, Any] = {"experiment": {"id": exp_id, "iterations": iterations}, "summary": {}, "scenario_results": []}
    exp = Experiment(doc)
    rows = []
    for sid, crits in rates.items():
        for it in range(1, iterations + 1):
            counts: dict[str, list[int]] = {}
            for name, rate in crits.items():
                if drop is not None and name == drop[0]:
                    rate = drop[1]
                good = rng.random() < rate
                ratings = rng.randint(1, 3)
                # a good run passes nearly every rating, a bad one fails at least one
                passed = sum(rng.random() < 0.97 for _ in range(ratings)) if good else rng.randint(0, ratings - 1)
                counts[name] = [passed, ratings]
            ev_p, ev_t = sum(p for p, _ in counts.values()), sum(t for _, t in counts.values())
            rows.append((sid, sid, it, rng.random() < completion[sid], False, 3, None, ev_p, ev_t, None, counts, {}, None, True))
    exp.add_rows(rows)
    return exp


def _world(rng: random.Random, scenarios: int | None = None, criteria: int | None = None,
           low: float = 0.5, high: float = 0.9) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    n_s = scenarios or rng.randint(3, 10)
    n_c = criteria if criteria is not None else rng.randint(6, 12) - 2  # + completion and the overall evaluation
    names = [f"c{k}" for k in range(n_c)]
    rates = {f"s{s}": {n: rng.uniform(low, high) for n in names} for s in range(n_s)}
    return rates, {sid: rng.uniform(low, high) for sid in rates}


def _fails(base: Experiment, cur: Experiment) -> bool:
    return evaluate(compare(base, cur), GateOptions(alpha=ALPHA, fail_on_regression=True), describe=False).failed


def test_an_unchanged_agent_fails_the_gate_in_at_most_alpha_of_1000_pairs():
    rng = random.Random(20261124)
    false_alarms = 0
    metrics = []
    for k in range(PAIRS):
        rates, completion = _world(rng)
        iterations = rng.randint(3, 10)
        base = _experiment(f"b{k}", rates, completion, iterations, rng)
        cur = _experiment(f"c{k}", rates, completion, iterations, rng)
        gate = evaluate(compare(base, cur), GateOptions(alpha=ALPHA, fail_on_regression=True), describe=False)
        metrics.append(sum(1 for e in gate.entries if e.scenario is None))  # the pooled metrics (found scenarios follow)
        false_alarms += gate.failed
    assert min(metrics) == 6 and max(metrics) == 12
    print(f"{false_alarms} false alarms in {PAIRS} pairs")
    assert false_alarms <= ALPHA * PAIRS, f"{false_alarms} false alarms in {PAIRS} pairs"


def test_power_of_a_90_to_60_drop_with_10_scenarios_and_10_iterations():
    """docs/gates.md states this figure: at least 80 % of such drops fail the gate."""
    rng = random.Random(7)
    trials, caught = 200, 0
    for k in range(trials):
        rates, completion = _world(rng, scenarios=10, criteria=rng.randint(4, 10))
        for crits in rates.values():
            crits["c0"] = 0.9
        base = _experiment(f"b{k}", rates, completion, 10, rng)
        cur = _experiment(f"c{k}", rates, completion, 10, rng, drop=("c0", 0.6))
        caught += _fails(base, cur)
    assert caught / trials >= 0.8, f"power {caught / trials:.0%}"


def test_an_identical_rerun_never_fails():
    rng = random.Random(11)
    for k in range(200):
        rates, completion = _world(rng, low=0.0, high=1.0)
        exp = _experiment(f"e{k}", rates, completion, rng.randint(1, 10), rng)
        assert not _fails(exp, exp)


def test_a_100_to_0_drop_of_one_criterion_over_10_iterations_always_fails():
    rng = random.Random(13)
    for k in range(200):
        rates, completion = _world(rng, scenarios=1)
        rates["s0"]["c0"] = 1.0
        base = _experiment(f"b{k}", rates, completion, 10, rng)
        cur = _experiment(f"c{k}", rates, completion, 10, rng, drop=("c0", 0.0))
        gate = evaluate(compare(base, cur), GateOptions(alpha=ALPHA, fail_on_regression=True), describe=False)
        assert gate.failed and "criterion:c0" in [e.metric for e in gate.failures()]


def test_holm_tarone_adjustment():
    # plain Holm when every hypothesis can reach the level
    assert adjust([0.01, 0.04, 0.03], [0.0, 0.0, 0.0], 0.05) == [0.03, 0.06, 0.06]
    # a hypothesis that can never reach alpha does not dilute the others (Tarone)
    assert adjust([0.01, 0.9], [1e-6, 0.125], 0.05) == [0.01, 0.9]
    assert abs(binomial_cdf(0, 10, 0.4) - 0.6 ** 10) < 1e-15
    assert sign_test_p(3, 0) == 0.125 and sign_test_p(0, 3) == 1.0


def test_exact_tests_match_scipy():
    import scipy.stats

    rng = random.Random(3)
    for _ in range(500):
        n, p = rng.randint(1, 300), rng.random()
        x = rng.randint(0, n)
        expected = scipy.stats.binom.cdf(x, n, p)
        assert abs(binomial_cdf(x, n, p) - expected) <= 1e-12 * max(expected, 1e-300) + 1e-300
        up = rng.randint(0, 40)
        down = rng.randint(0, 40)
        if up + down:
            want = scipy.stats.binomtest(up, up + down, 0.5, alternative="greater").pvalue
            assert abs(sign_test_p(up, down) - want) < 1e-12
