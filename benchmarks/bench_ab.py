"""The whole A/B decision of ``fabtest ab`` by Monte Carlo (issue 44): how often each outcome, and
the runs it spends.

    python benchmarks/bench_ab.py [--pairs 400] [--quick] [--seed 44]

Per-run outcomes are simulated (no pytest, no agent) and fed to the code ``fabtest ab`` runs: the
rounds loop (``fabtest.ab.rounds.run_rounds``: first pass, then one iteration at a time of the
scenarios feeding undecided metrics, budget and futility stops) and its decision
(``fabtest.compare.paired.decide_paired``). The two arms' runs are independent (no help from the
shared seed: the worst case for pairing), except in the row that says otherwise. Each run: completion
passes at its scenario's rate, each criterion at its own rate (its run-level rate: every rating
passed), and the overall evaluation passes when every criterion does.

First pass 8 scenarios x 5 iterations per arm (80 runs), budget 3x that (240 runs on both arms),
alpha 0.05, margin 10 points. Every rate is printed with its 95 % Wilson interval, and the runs
spent (both arms, first pass included) as median and 90th percentile. docs/gates.md quotes it.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from tabulate import tabulate

from fabtest.ab.rounds import run_rounds
from fabtest.compare.inference import wilson
from fabtest.compare.paired import Run, decide_paired

SCENARIOS, ITERATIONS, ALPHA, MARGIN = 8, 5, 0.05, 0.10
FIRST_PASS = 2 * SCENARIOS * ITERATIONS
BUDGET = 3 * FIRST_PASS

Suite = dict[str, tuple[float, dict[str, float]]]  # scenario -> (completion rate, {criterion: rate})


def _run(sid: str, iteration: int, suite: Suite, rng: random.Random) -> Run:
    completion, criteria = suite[sid]
    passed = {name: rng.random() < rate for name, rate in criteria.items()}
    return Run(sid, iteration, rng.random() < completion, all(passed.values()) if passed else None, passed)


def ab(baseline: Suite, current: Suite, rng: random.Random, shared: float = 0.0,
       usd: bool = False) -> tuple[str, int, str]:
    """One whole ``fabtest ab`` on simulated runs: the outcome, the runs spent on both arms, why it
    stopped. ``shared``: the chance that a current run replays its baseline pair's outcome (the same
    seed, the same conversation) when the two arms' rates for it agree. ``usd``: a dollar budget, as
    ``fabtest ab --budget '$X'`` keeps it: each scenario's runs cost $0.01-0.05 (a failed run half,
    give or take 20 %), the next iteration is priced at each scenario's mean cost so far, and the
    plan comes from the first pass's mean cost per run (so the number of looks is not known ahead)."""
    runs: dict[str, list[Run]] = {"baseline": [], "current": []}
    price = {sid: rng.uniform(0.01, 0.05) for sid in baseline}
    paid: dict[str, list[float]] = {sid: [] for sid in baseline}

    def charge(run: Run) -> float:
        cost = price[run.scenario] * (1.0 if run.passed else 0.5) * rng.uniform(0.8, 1.2)
        paid[run.scenario].append(cost)
        return cost

    def run_round(scenarios: Sequence[str] | None, iterations: range) -> float:
        spent = 0.0
        for it in iterations:
            for sid in scenarios or sorted(baseline):
                b = _run(sid, it, baseline, rng)
                same = shared and baseline[sid] == current[sid] and rng.random() < shared
                c = b if same else _run(sid, it, current, rng)
                runs["baseline"].append(b)
                runs["current"].append(c)
                spent += charge(b) + charge(c)
        return spent if usd else 2.0 * len(scenarios or baseline) * len(iterations)

    def cost(scenarios: Sequence[str] | None) -> float:
        chosen = list(scenarios or baseline)
        if not usd:
            return 2.0 * len(chosen)
        return 2.0 * sum(statistics.fmean(paid[sid]) for sid in chosen)

    budget = 3.0 * ITERATIONS * 2 * sum(price.values()) if usd else BUDGET
    result = run_rounds(run_round, lambda plan: decide_paired(runs["baseline"], runs["current"], alpha=ALPHA,
                                                              margin=MARGIN, plan=plan),
                        cost, iterations=ITERATIONS, budget=budget)
    return result.decision.outcome, len(runs["baseline"]) + len(runs["current"]), result.stopped


def _suite(completion: Callable[[int], float], criteria: Callable[[int, int], float], n_criteria: int) -> Suite:
    return {f"s{s}": (completion(s), {f"c{j}": criteria(s, j) for j in range(n_criteria)}) for s in range(SCENARIOS)}


def conditions(rng: random.Random) -> list[tuple[str, str, Callable[[], tuple[Suite, Suite]], float, bool]]:
    """(label, target, a maker of (baseline, current) suites), one condition each."""

    def steady() -> tuple[Suite, Suite]:
        suite = _suite(lambda s: rng.uniform(0.9, 1.0), lambda s, j: rng.uniform(0.95, 1.0), 2)
        return suite, suite

    def perfect() -> tuple[Suite, Suite]:
        suite = _suite(lambda s: 1.0, lambda s, j: 1.0, 2)
        return suite, suite

    def mid() -> tuple[Suite, Suite]:
        suite = _suite(lambda s: rng.uniform(0.5, 0.9), lambda s, j: rng.uniform(0.5, 0.9), 3)
        return suite, suite

    def collapse() -> tuple[Suite, Suite]:
        base = _suite(lambda s: 1.0, lambda s, j: 1.0, 2)
        return base, {**base, "s0": (0.3, base["s0"][1])}

    def criterion() -> tuple[Suite, Suite]:
        base = _suite(lambda s: rng.uniform(0.9, 1.0), lambda s, j: 0.9 if j == 0 else rng.uniform(0.95, 1.0), 2)
        return base, {sid: (c, {**crits, "c0": 0.6}) for sid, (c, crits) in base.items()}

    def drop() -> tuple[Suite, Suite]:  # the null of "not worse" at its edge: every scenario 10 points down
        base = _suite(lambda s: rng.uniform(0.9, 1.0), lambda s, j: rng.uniform(0.95, 1.0), 2)
        return base, {sid: (c - MARGIN, crits) for sid, (c, crits) in base.items()}

    return [
        ("unchanged agent, steady suite (completion 90-100 %, 2 criteria at 95-100 % a scenario)",
         "worse <= 5 %, not worse >= 90 %, median runs <= 240", steady, 0.0, False),
        ("the same, half of the pairs replaying one conversation (shared seed)", "as above", steady, 0.5, False),
        ("unchanged agent, every run passing", "not worse >= 90 %", perfect, 0.0, False),
        ("unchanged agent, mid-rate suite (completion and 3 criteria at 50-90 %)",
         "worse <= 5 % (not worse: see docs/gates.md)", mid, 0.0, False),
        ("one scenario 100 % -> 30 % among 7 steady at 100 %", "worse >= 95 %", collapse, 0.0, False),
        ("one criterion 90 % -> 60 % in every scenario (completion 90-100 %)", "worse >= 90 %", criterion, 0.0,
         False),
        ("completion 10 points down in every scenario (90-100 % -> 80-90 %): the margin itself",
         "not worse <= 5 % (alpha)", drop, 0.0, False),
        ("the same under a dollar budget of 3x the first pass's cost (a failed run costs half)",
         "not worse <= 5 % (alpha)", drop, 0.0, True),
        ("unchanged agent, steady suite, the same dollar budget", "not worse >= 90 %", steady, 0.0, True),
    ]


def _share(hits: int, n: int) -> str:
    low, high = wilson(hits, n) or (0.0, 0.0)
    return f"{hits}/{n} = {hits / n:.1%} ({low:.1%}-{high:.1%})"


def measure(pairs: int, seed: int) -> list[list[Any]]:
    rows = []
    for index, (label, target, make, shared, usd) in enumerate(conditions(random.Random(seed))):
        rng = random.Random(seed * 1000 + index)
        seen: Counter[str] = Counter()
        spent: list[int] = []
        stops: Counter[str] = Counter()
        for _ in range(pairs):
            base, cur = make()
            outcome, runs, stopped = ab(base, cur, rng, shared, usd)
            seen[outcome] += 1
            spent.append(runs)
            stops[stopped.split(":")[0]] += 1
        p90 = sorted(spent)[min(len(spent) - 1, int(0.9 * len(spent)))]
        rows.append([label, target, _share(seen["worse"], pairs), _share(seen["not worse"], pairs),
                     _share(seen["undecided"], pairs), f"{statistics.median(spent):g} / {p90}",
                     "; ".join(f"{k} {v}" for k, v in stops.most_common(3))])
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--pairs", type=int, default=400, help="simulated A/B runs per condition (default 400)")
    parser.add_argument("--quick", action="store_true", help="10 per condition: a smoke run of a few seconds")
    parser.add_argument("--seed", type=int, default=44)
    args = parser.parse_args(argv)
    pairs = 10 if args.quick else args.pairs
    started = time.perf_counter()
    rows = measure(pairs, args.seed)
    print(f"fabtest ab: {SCENARIOS} scenarios x {ITERATIONS} iterations a side first ({FIRST_PASS} runs), budget "
          f"{BUDGET} runs more, alpha {ALPHA}, margin {MARGIN * 100:g} points; {pairs} simulated A/B runs per "
          f"condition ({time.perf_counter() - started:.0f} s)")
    print(tabulate(rows, headers=["condition", "target", "worse", "not worse", "undecided",
                                  "runs (median / p90)", "stopped"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
