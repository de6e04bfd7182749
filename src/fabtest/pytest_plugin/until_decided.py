"""``--fabtest-until-decided``: the gate buys the runs it needs (issue 28 point 4).

``pytest features/ --fabtest-baseline EXP --fabtest-until-decided --fabtest-budget N`` runs the
suite as usual, then looks at the sequential gate (:mod:`fabtest.compare.sequential`) of what was
recorded so far against the baseline experiment. While a metric is undecided and the budget allows
one more whole iteration of the scenarios that feed the undecided metrics, it runs that iteration
(new iteration numbers, so the judge's and simulator's caches do not repeat a run) and looks again.
It stops early when the budget left cannot decide anything (futility, see ``decide``). The
e-values stay valid at every look and under any stopping rule, so neither stop costs an error rate.

The budget is scenario runs beyond the first pass (``200``) or dollars (``$5``, ``5usd``): the
next iteration's cost is estimated from the recorded cost of each scenario's runs so far (the
experiment's own pricing), and an iteration that would pass the budget is not started. The
experiment's ``experiment.until_decided`` records the baseline, the budget, the runs and dollars
spent and the sequential decision.

Runs one by one, after the main loop: the extra iterations are few and chosen one look at a time.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import pytest

from fabtest.pytest_plugin.stash_keys import ITERATION_KEY

__all__ = ["Budget", "UntilDecided", "check_options", "parse_budget"]


@dataclass(frozen=True, slots=True)
class Budget:
    """``--fabtest-budget``: at most ``amount`` scenario runs (``usd`` False) or US dollars added."""

    amount: float
    usd: bool = False

    def __str__(self) -> str:
        return f"${self.amount:g}" if self.usd else f"{int(self.amount)} run(s)"

    def to_json(self) -> int | str:
        return f"${self.amount:g}" if self.usd else int(self.amount)


_DOLLARS = re.compile(r"^\s*(?:\$\s*(?P<a>\d+(?:\.\d+)?)|(?P<b>\d+(?:\.\d+)?)\s*(?:usd|\$))\s*$", re.I)


def parse_budget(text: str) -> Budget:
    """``200`` (scenario runs), ``$5``, ``$2.50``, ``5usd`` or ``5 USD`` (dollars); ValueError says what is
    expected."""
    text = str(text)
    dollars = _DOLLARS.match(text)
    if dollars:
        amount = float(dollars.group("a") or dollars.group("b"))
        if not math.isfinite(amount):  # 400 digits read as inf: "$inf" bounds nothing
            raise ValueError(f"expected a budget in dollars a float can hold, got one {len(text)} characters long "
                             "(too large)")
        if amount <= 0:
            raise ValueError(f"expected a budget above $0, got {text!r}")
        return Budget(amount, usd=True)
    if text.strip().isdigit():
        runs = int(text)
        if runs < 1:
            raise ValueError(f"expected at least 1 scenario run, got {runs}")
        return Budget(runs)
    raise ValueError(f"expected scenario runs (200) or dollars ($5, 5usd), got {text!r}")


def check_options(config: pytest.Config) -> None:
    """The three options go together; a usage error names what is missing."""
    until, baseline, budget = (config.getoption(o) for o in
                               ("--fabtest-until-decided", "--fabtest-baseline", "--fabtest-budget"))
    if until and (baseline is None or budget is None):
        raise pytest.UsageError("--fabtest-until-decided needs --fabtest-baseline EXP (the experiment to decide "
                                "against) and --fabtest-budget N (the most scenario runs to add)")
    if (baseline is not None or budget is not None) and not until:
        raise pytest.UsageError("--fabtest-baseline and --fabtest-budget go with --fabtest-until-decided")
    if until and config.getoption("--fabtest-no-results"):
        raise pytest.UsageError("--fabtest-until-decided decides on the recorded experiment: drop --fabtest-no-results")


class UntilDecided:
    """The extra iterations after the main loop; registered only with ``--fabtest-until-decided``."""

    def __init__(self, config: pytest.Config, recording: Any, iterations: int, notes: list[str],
                 settle: Callable[[], None] | None = None) -> None:
        self.config = config
        self.recording = recording  # the session's ExperimentRecording
        self.iterations = iterations
        self.notes = notes  # the run summary's notes
        self.settle = settle  # waits for the soft verdicts still with the judge (their criteria and cost)
        self.baseline_ref = str(config.getoption("--fabtest-baseline"))
        budget = config.getoption("--fabtest-budget")
        self.budget: Budget = budget if isinstance(budget, Budget) else parse_budget(str(budget))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, Any, None]:
        yield
        if session.shouldstop or session.shouldfail or not session.items:
            return
        try:
            self._more(session)
        except Exception as exc:  # the suite's own results still stand and are saved
            self.notes.append(f"fabtest: error: --fabtest-until-decided stopped: {exc}")

    def _more(self, session: pytest.Session) -> None:
        from fabtest.compare.read import read_experiment
        from fabtest.compare.sequential import decide

        _, baseline = read_experiment(self.baseline_ref, self.recording.results_dir)
        recorder = self.recording.recorder()
        spent, iteration, stopped = 0, self.iterations, ""
        while True:
            if self.settle is not None:
                self.settle()
            rows = recorder.index_rows()
            current, problems = _current(recorder, rows, baseline)
            usd = _costs(rows, self.iterations)
            runs_left = self._runs_left(spent, usd)
            decision = decide(baseline, current, budget_left=None if runs_left is None else max(0, runs_left),
                              problems=problems)
            rerun = self._items(session, recorder, set(decision.rerun)) if decision.outcome == "undecided" else []
            wanted = sorted({s for m in decision.metrics if m.outcome == "undecided" for s in m.scenarios}
                            if decision.outcome == "undecided" else ())
            if problems and decision.outcome == "undecided":  # the fixed gate's untested: no run changes it
                stopped = f"undecided whatever runs: {problems[0]}"
            elif runs_left is None and rerun:
                stopped = ("the runs so far cost $0 as recorded (no token usage reported, or no price for their "
                           "models): dollars cannot buy more of them; use a budget in runs (--fabtest-budget 50)"
                           if not usd["unknown"] and usd["mean"] == 0 else
                           "the cost of a run is unknown (a model without a price): a dollar budget cannot be kept")
            elif wanted and self._next_cost(wanted, usd) > self._left(spent, usd):
                stopped = "the budget would be exceeded by another iteration"
            elif decision.futile:
                stopped = f"the budget cannot decide: {decision.needed()}"
            if not rerun or stopped or session.shouldstop or session.shouldfail:
                break
            iteration += 1
            for item in rerun:
                clone = _clone(item, iteration)
                clone.ihook.pytest_runtest_protocol(item=clone, nextitem=None)
            spent += len(rerun)
        stopped = stopped or ("every metric decided" if decision.outcome != "undecided" else "nothing left to run")
        if self.settle is not None:
            self.settle()
        dollars = _costs(recorder.index_rows(), self.iterations)["added"]
        record = {"baseline": self.baseline_ref, "budget": self.budget.to_json(), "runs_added": spent,
                  "usd_added": round(dollars, 6), "iterations_added": iteration - self.iterations,
                  "stopped": stopped, **decision.to_dict()}
        recorder.set_until_decided(record)
        added = f"{spent} run(s)" + (f" (${dollars:.4f})" if self.budget.usd else "")
        self.notes.append(f"fabtest: until decided against {self.baseline_ref}: {decision.line()}; {added} "
                          f"added of a budget of {self.budget} ({stopped})")

    def _left(self, spent: int, usd: dict[str, Any]) -> float:
        """What is left of the budget: runs, or dollars."""
        return self.budget.amount - (usd["added"] if self.budget.usd else spent)

    def _runs_left(self, spent: int, usd: dict[str, Any]) -> int | None:
        """The scenario runs the budget still buys (dollars: at the mean cost of a run so far; None: unknown)."""
        if not self.budget.usd:
            return int(self.budget.amount) - spent
        if usd["unknown"] or not usd["mean"]:  # unpriced, or priced $0: a dollar budget bounds nothing
            return None
        return int(self._left(spent, usd) / usd["mean"])

    def _next_cost(self, scenario_ids: list[str], usd: dict[str, Any]) -> float:
        """The next iteration's runs, or (dollars) its cost: each scenario's mean cost per run so far."""
        if not self.budget.usd:
            return len(scenario_ids)
        per = usd["per_scenario"]
        return float(sum(per.get(sid, usd["mean"] or 0.0) for sid in scenario_ids))

    @staticmethod
    def _items(session: pytest.Session, recorder: Any, scenario_ids: set[str]) -> list[pytest.Function]:
        """The collected items (one per scenario: its first iteration's) whose scenario is to run again."""
        wanted = {nodeid for scenario_id, nodeid in recorder.nodeids() if scenario_id in scenario_ids}
        seen: set[str] = set()
        out: list[pytest.Function] = []
        for item in session.items:
            if item.nodeid in wanted and isinstance(item, pytest.Function):
                key = _without_iteration(item.nodeid)
                if key not in seen:
                    seen.add(key)
                    out.append(item)
        return out


def _current(recorder: Any, rows: list[list[Any]], baseline: Any) -> tuple[Any, list[str]]:
    """The experiment so far, and why the fixed gate would call it untested against ``baseline``
    (compare/gate.py ``untested``: a shared scenario with no measured run, nothing judged, another
    judge or simulated user), so the loop never reports "not worse" where the gate would not."""
    from fabtest.compare import gate as gating
    from fabtest.compare.compute import compare
    from fabtest.compare.read import Experiment, criteria_definitions
    from fabtest.experiment.attribution import Attributions
    from fabtest.experiment.export import document_head

    head = document_head(recorder.info, recorder.results, attribute=lambda _: Attributions())
    head["scenario_results"] = []
    current = Experiment(head, definitions=criteria_definitions(head))
    current.add_rows(rows)
    return current, gating.untested(compare(baseline, current))


def _costs(rows: list[list[Any]], first_pass: int) -> dict[str, Any]:
    """From the index rows: the dollars of the runs added after the ``first_pass`` iterations, the mean
    cost of a run, per scenario, and whether some run's cost is unknown (unpriced tokens)."""
    per: dict[str, list[float]] = {}
    added, unknown = 0.0, False
    for row in rows:
        sid, it, cost, complete = row[0], row[2], row[12], row[13]
        if row[4]:  # skipped: no run
            continue
        if not isinstance(cost, (int, float)) or not complete:
            unknown = True
            continue
        per.setdefault(sid, []).append(float(cost))
        if isinstance(it, int) and it > first_pass:
            added += float(cost)
    every = [c for costs in per.values() for c in costs]
    return {"added": added, "unknown": unknown, "mean": sum(every) / len(every) if every else None,
            "per_scenario": {sid: math.fsum(c) / len(c) for sid, c in per.items()}}


def _without_iteration(nodeid: str) -> str:
    """``x.feature::test[rec-iter2]`` and ``[rec-iter1]`` are one scenario."""
    import re

    return re.sub(r"-?iter\d+(?=\])", "", nodeid)


def _clone(item: pytest.Function, iteration: int) -> pytest.Function:
    """The same scenario as a new item, run as iteration ``iteration``."""
    clone = pytest.Function.from_parent(item.parent, name=f"{item.name}@iteration{iteration}",
                                        callspec=getattr(item, "callspec", None), callobj=item.obj,
                                        fixtureinfo=item._fixtureinfo, originalname=item.originalname)
    clone.stash[ITERATION_KEY] = iteration
    return clone
