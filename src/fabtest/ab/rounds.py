"""The rounds of ``fabtest ab``: a first pass on both arms, then one iteration at a time of the
scenarios that feed undecided metrics, until the decision is made or the budget cannot pay for it.

The loop knows nothing of pytest or git: ``run_round`` runs the given scenarios (None: all) at the
given iterations on both arms, ``look`` returns the decision over every run so far under the plan,
and ``cost`` prices one more iteration of some scenarios (None: all) on both arms (scenario runs, or
dollars at each scenario's mean cost per run so far). The plan (:class:`Plan`: the iterations the
first pass and the whole budget would run) is fixed after the first pass and before any look, from
the budget and the first pass's cost, never from a difference seen: the not-worse test spends its
error rate over it. The benchmark drives it with simulated runs, the command
with pytest processes. Every stop is one more stopping rule, and the decision's e-processes hold
under any (docs/gates.md), so stopping early for futility or the budget changes no error rate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fabtest.compare.paired import PairedDecision, Plan

__all__ = ["DECIDED", "EXCEEDED", "FIRST_PASS_ONLY", "RoundsResult", "plan_of", "run_rounds"]

DECIDED = "every metric decided"
#: the most rounds a run takes, whatever the budget: runs that cost nothing (an offline suite under a
#: dollar budget) would otherwise go on as long as a metric stays open
MAX_ROUNDS = 100
EXCEEDED = "the budget would be exceeded by another iteration"
FIRST_PASS_ONLY = "no budget beyond the first pass"


@dataclass(slots=True)
class RoundsResult:
    decision: PairedDecision
    rounds: int
    stopped: str
    spent: float  # runs (both arms) or dollars beyond the first pass
    plan: Plan | None = None


def plan_of(iterations: int, budget: float, every: float, max_rounds: int = MAX_ROUNDS) -> Plan:
    """The iterations the first pass and the budget would run if every round bought every scenario
    (``every``: the price of one iteration of all of them), at most ``max_rounds`` rounds in all."""
    more = max_rounds - 1 if every <= 0 else int(max(0.0, budget) // every + 1e-9)
    return Plan(iterations, iterations + min(max_rounds - 1, more))


def run_rounds(run_round: Callable[[Sequence[str] | None, range], float], look: Callable[[Plan], PairedDecision],
               cost: Callable[[Sequence[str] | None], float], *, iterations: int, budget: float,
               max_rounds: int = MAX_ROUNDS) -> RoundsResult:
    """Run the first pass (``iterations`` of every scenario), then buy iterations while undecided.

    ``run_round`` returns what the round spent (runs or dollars, as ``budget`` counts). The loop
    stops when the decision is made, when another iteration would exceed ``budget``, when the runs
    the budget leaves could not decide (:meth:`PairedDecision.futile`), or when nothing is left to
    run (a problem keeps the gate undecided whatever runs)."""
    run_round(None, range(1, iterations + 1))
    rounds, spent, next_iteration = 1, 0.0, iterations + 1
    plan = plan_of(iterations, budget, cost(None), max_rounds)
    while True:
        decision = look(plan)
        if decision.outcome != "undecided":
            return RoundsResult(decision, rounds, DECIDED, spent, plan)
        if decision.problems:
            return RoundsResult(decision, rounds, f"undecided whatever runs: {decision.problems[0]}", spent, plan)
        if not decision.rerun:
            return RoundsResult(decision, rounds, "nothing left to run", spent, plan)
        price = cost(decision.rerun)
        left = budget - spent
        if price > left + 1e-9:
            return RoundsResult(decision, rounds, FIRST_PASS_ONLY if budget <= 0 else EXCEEDED, spent, plan)
        rounds_left = min(max_rounds - rounds, int(left // price) if price > 0 else max_rounds)
        if rounds_left < 1:
            return RoundsResult(decision, rounds, f"{max_rounds} rounds without a decision", spent, plan)
        if decision.futile(rounds_left):
            return RoundsResult(decision, rounds, decision.why_futile(), spent, plan)
        spent += run_round(decision.rerun, range(next_iteration, next_iteration + 1))
        rounds, next_iteration = rounds + 1, next_iteration + 1
