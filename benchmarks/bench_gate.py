"""The gate's error rates and power (issue 28), and its speed at 100,000 single runs (issue 30).

    python benchmarks/bench_gate.py [--pairs 400] [--scale 100000] [--skip-scale]

Seeded simulations on the statistics layer (experiments built from index rows, compared and gated
with ``compare.gate.evaluate``: the code of ``fabtest-compare --fail-on-regression``, without files):

* an unchanged agent (3-10 scenarios, 3-10 iterations, 4-10 criteria at 50-90 %, each rated 1-3
  times a run with the ratings of one run correlated): how often each outcome;
* one scenario falling from 10/10 to 3/10 (true rate 30 %) among four steady ones, 10 iterations;
* one criterion falling from 90 % to 60 % at 5 iterations (5 and 10 scenarios);
* the power hints: at the runs ``runs_to_decide`` names, an unchanged metric should be "not worse"
  about 80 % of the time; at ``runs_to_detect``, a drop of the margin "worse" about 80 %;
* the sequential mode (``compare.sequential.decide`` with the budget left, what
  ``--fabtest-until-decided`` looks at after each added iteration, futility stop included): a
  90 % -> 60 % criterion with a budget of 4x the base runs, and the runs it spends on an unchanged
  agent.

Then two experiment files of ``--scale`` single runs each are written (as the Recorder writes them)
and ``fabtest-compare A B --fail-on-regression`` is timed in a subprocess (target: under 10 s).

Every rate is printed with its 95 % Wilson interval. docs/gates.md quotes one run of this script.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tabulate import tabulate

from fabtest.compare.compute import compare
from fabtest.compare.gate import GateOptions, evaluate
from fabtest.compare.inference import runs_to_decide, runs_to_detect, wilson
from fabtest.compare.read import Experiment
from fabtest.compare.sequential import decide

ALPHA, MARGIN = 0.05, 0.10


def _experiment(exp_id: str, rates: dict[str, dict[str, float]], completion: dict[str, float], iterations: int,
                rng: random.Random) -> Experiment:
    """``rates[scenario][criterion]``: the chance a run is good for the criterion; ``completion``: per scenario."""
    exp = Experiment({"experiment": {"id": exp_id, "iterations": iterations}, "summary": {}, "scenario_results": []})
    _grow(exp, rates, completion, range(1, iterations + 1), rng)
    return exp


def _grow(exp: Experiment, rates: dict[str, dict[str, float]], completion: dict[str, float], iterations: range,
          rng: random.Random) -> None:
    """Add ``iterations`` of every scenario to ``exp``."""
    rows = []
    for sid, crits in rates.items():
        for it in iterations:
            counts: dict[str, list[int]] = {}
            for name, rate in crits.items():
                good, ratings = rng.random() < rate, rng.randint(1, 3)
                passed = sum(rng.random() < 0.97 for _ in range(ratings)) if good else rng.randint(0, ratings - 1)
                counts[name] = [passed, ratings]
            ev_p, ev_t = sum(p for p, _ in counts.values()), sum(t for _, t in counts.values())
            rows.append((sid, sid, it, rng.random() < completion[sid], False, 3, None, ev_p, ev_t, None, counts, {},
                         None, True))
    exp.add_rows(rows)


def _outcome(base: Experiment, cur: Experiment, margin: float = MARGIN) -> str:
    gate = evaluate(compare(base, cur), GateOptions(alpha=ALPHA, fail_on_regression=True, margin=margin), describe=False)
    return gate.outcome


def _share(hits: int, n: int) -> str:
    low, high = wilson(hits, n) or (0.0, 0.0)
    return f"{hits}/{n} = {hits / n:.1%} (95% CI {low:.1%}-{high:.1%})"


def unchanged(pairs: int) -> list[list[Any]]:
    rng = random.Random(20261127)
    seen: Counter[str] = Counter()
    for k in range(pairs):
        n_s, n_c = rng.randint(3, 10), rng.randint(4, 10)
        rates = {f"s{s}": {f"c{j}": rng.uniform(0.5, 0.9) for j in range(n_c)} for s in range(n_s)}
        completion = {sid: rng.uniform(0.5, 0.9) for sid in rates}
        iterations = rng.randint(3, 10)
        seen[_outcome(_experiment(f"b{k}", rates, completion, iterations, rng),
                      _experiment(f"c{k}", rates, completion, iterations, rng))] += 1
    return [["unchanged agent (3-10 scenarios x 3-10 iterations, 6-12 metrics)", "worse <= 5 %",
             _share(seen["worse"], pairs), f"not worse {seen['not worse']}, undecided {seen['undecided']}"]]


def one_scenario_collapse(pairs: int) -> list[list[Any]]:
    out = []
    for steady, criteria in ((1.0, 0), (0.9, 0), (1.0, 3)):
        rng = random.Random(28 + criteria + int(steady * 10))
        seen: Counter[str] = Counter()
        for k in range(pairs):
            rates = {f"s{s}": {f"c{j}": 0.9 for j in range(criteria)} for s in range(5)}
            base = {sid: steady for sid in rates} | {"s0": 1.0}
            cur = {sid: steady for sid in rates} | {"s0": 0.3}
            seen[_outcome(_experiment(f"b{k}", rates, base, 10, rng), _experiment(f"c{k}", rates, cur, 10, rng))] += 1
        label = (f"one scenario 10/10 -> 3/10 among 4 steady at {steady:.0%} completion, 10 iterations"
                 + (f", {criteria} criteria at 90 %" if criteria else ", no criteria"))
        out.append([label, "worse >= 95 %", _share(seen["worse"], pairs),
                    f"not worse {seen['not worse']}, undecided {seen['undecided']}"])
    return out


def criterion_drop(pairs: int) -> list[list[Any]]:
    out = []
    for scenarios in (5, 10):
        rng = random.Random(9060 + scenarios)
        seen: Counter[str] = Counter()
        for k in range(pairs):
            n_c = rng.randint(3, 8)
            rates = {f"s{s}": {f"c{j}": rng.uniform(0.5, 0.9) for j in range(n_c)} for s in range(scenarios)}
            for crits in rates.values():
                crits["c0"] = 0.9
            completion = {sid: rng.uniform(0.7, 0.95) for sid in rates}
            dropped = {sid: {**crits, "c0": 0.6} for sid, crits in rates.items()}
            seen[_outcome(_experiment(f"b{k}", rates, completion, 5, rng),
                          _experiment(f"c{k}", dropped, completion, 5, rng))] += 1
        out.append([f"one criterion 90 % -> 60 %, {scenarios} scenarios x 5 iterations (4-9 criteria)",
                    "worse or undecided >= 95 %, never not worse",
                    _share(seen["worse"] + seen["undecided"], pairs),
                    f"worse {_share(seen['worse'], pairs)}; not worse {seen['not worse']}"])
    return out


def _until_decided(base: Experiment, rates: dict[str, dict[str, float]], completion: dict[str, float],
                   start: int, budget: int, rng: random.Random) -> tuple[str, int]:
    """``--fabtest-until-decided`` on the statistics layer: the current experiment starts with
    ``start`` iterations and gets whole iterations of the scenarios to run again while undecided and
    within ``budget`` added runs. Returns the outcome and the current runs spent in all."""
    cur = _experiment("cur", rates, completion, start, rng)
    iteration, added = start, 0
    while True:
        decision = decide(base, cur, alpha=ALPHA, margin=MARGIN, budget_left=budget - added)
        rerun = decision.rerun if decision.outcome == "undecided" else []
        if not rerun or added + len(rerun) > budget:
            return decision.outcome, decision.runs_spent
        iteration += 1
        _grow(cur, {sid: rates[sid] for sid in rerun}, completion, range(iteration, iteration + 1), rng)
        added += len(rerun)


def sequential(pairs: int) -> list[list[Any]]:
    """The sequential mode's rows: a 90 % -> 60 % criterion at 5 iterations with a budget of 4x the
    base runs, and the runs it spends on an unchanged agent."""
    rng = random.Random(4028)
    seen: Counter[str] = Counter()
    for _ in range(pairs):
        rates = {f"s{s}": {"c0": 0.9, "c1": rng.uniform(0.5, 0.9)} for s in range(5)}
        completion = {sid: rng.uniform(0.7, 0.95) for sid in rates}
        dropped = {sid: {**crits, "c0": 0.6} for sid, crits in rates.items()}
        outcome, _ = _until_decided(_experiment("b", rates, completion, 5, rng), dropped, completion, 5, 4 * 25, rng)
        seen[outcome] += 1
    out = [["until decided: one criterion 90 % -> 60 %, 5 scenarios x 5 iterations, budget 4x the base runs",
            "worse >= 80 %, never not worse", _share(seen["worse"], pairs),
            f"not worse {seen['not worse']}, undecided {seen['undecided']}"]]
    spent = []
    for _ in range(pairs):
        rates = {f"s{s}": {"c0": rng.uniform(0.6, 0.95)} for s in range(5)}
        completion = {sid: rng.uniform(0.7, 0.95) for sid in rates}
        outcome, runs = _until_decided(_experiment("b", rates, completion, 5, rng), rates, completion, 5, 4 * 25, rng)
        spent.append(runs)
        seen[f"unchanged {outcome}"] += 1
    spent.sort()
    out.append(["until decided: unchanged agent, 5 scenarios x 5 iterations, budget 4x the base runs",
                "median runs spent <= 2x base (50)", f"median {spent[len(spent) // 2]} runs",
                f"worse {seen['unchanged worse']}, not worse {seen['unchanged not worse']}, "
                f"undecided {seen['unchanged undecided']} of {pairs}"])
    return out


def power_hints(pairs: int) -> list[list[Any]]:
    """A single metric (completion, 10 scenarios) at the runs the hints name."""
    out = []
    for rate in (0.9, 0.7):
        n = runs_to_decide(rate, MARGIN, ALPHA)
        its = -(-n // 10)
        rng = random.Random(int(rate * 100))
        ok = sum(_outcome(_experiment(f"b{k}", {f"s{s}": {} for s in range(10)}, {f"s{s}": rate for s in range(10)}, its, rng),
                          _experiment(f"c{k}", {f"s{s}": {} for s in range(10)}, {f"s{s}": rate for s in range(10)}, its, rng))
                 == "not worse" for k in range(pairs))
        out.append([f"hint: {10 * its} runs a side ('runs to decide' {n}) at {rate:.0%}, unchanged", "not worse ~ 80 %",
                    _share(ok, pairs), ""])
        m = runs_to_detect(rate, MARGIN, ALPHA) or 0
        its = -(-m // 10)
        caught = sum(_outcome(_experiment(f"b{k}", {f"s{s}": {} for s in range(10)}, {f"s{s}": rate for s in range(10)}, its, rng),
                              _experiment(f"c{k}", {f"s{s}": {} for s in range(10)},
                                          {f"s{s}": rate - MARGIN for s in range(10)}, its, rng)) == "worse"
                     for k in range(pairs))
        out.append([f"hint: {10 * its} runs a side ('runs to detect' {m}) at {rate:.0%} -> {rate - MARGIN:.0%}",
                    "worse ~ 80 %", _share(caught, pairs), ""])
    return out


def scale(count: int) -> list[list[Any]]:
    """``fabtest-compare A B --fail-on-regression`` on two files of ``count`` single runs each."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_compare import iter_synthetic, timed_child  # the same synthetic results as the compare benchmark

    from fabtest.experiment.recorder import Recorder

    with tempfile.TemporaryDirectory(prefix="fabtest-bench-gate-") as tmp:
        root = Path(tmp)
        results_dir = root / "results"
        t0 = time.perf_counter()
        for exp_id, variant in (("exp_gate_a", 0), ("exp_gate_b", 1)):
            recorder = Recorder(results_dir=results_dir, experiment_id=exp_id, name=exp_id, judge_provider="gemini",
                                judge_model="gemini-2.5-flash", cwd=root)
            for result in iter_synthetic(count, variant):
                recorder.add(result)
            recorder.finalise()
        made = time.perf_counter() - t0
        cmd = [sys.executable, "-c", "import sys; from fabtest.cli import compare_main; sys.exit(compare_main())",
               "exp_gate_a", "exp_gate_b", "--results-dir", str(results_dir), "--fail-on-regression"]
        wall, cpu, rss, code, _, err = timed_child(cmd, root)
    verdict = next((line for line in err.splitlines() if "gate " in line and "(exit" in line), "")[:120]
    return [[f"fabtest-compare --fail-on-regression, 2 x {count:,} single runs (files made in {made:.0f} s)",
             "under 10 s", f"{wall:.2f} s wall, {cpu:.2f} s CPU, {rss:.0f} MiB, exit {code}", verdict]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=400, help="simulated comparisons per row (at least 200)")
    parser.add_argument("--scale", type=int, default=100_000)
    parser.add_argument("--skip-scale", action="store_true")
    parser.add_argument("--sequential-pairs", type=int, default=200,
                        help="simulated --fabtest-until-decided runs per sequential row (0: skip them)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test in seconds: few comparisons, 200 results to compare (tests/benchmarks)")
    args = parser.parse_args(argv)
    if args.quick:
        args.pairs, args.sequential_pairs, args.scale = 5, 2, 200
    started = time.perf_counter()
    rows = unchanged(args.pairs) + one_scenario_collapse(args.pairs) + criterion_drop(args.pairs) + power_hints(args.pairs)
    if args.sequential_pairs:
        rows += sequential(args.sequential_pairs)
    if not args.skip_scale:
        rows += scale(args.scale)
    print(f"Gate at alpha {ALPHA}, margin {MARGIN * 100:g} points, {args.pairs} seeded comparisons per row "
          f"({time.perf_counter() - started:.0f} s)")
    print(tabulate(rows, headers=["case", "target", "measured", "notes"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
