"""``--fabtest-until-decided``: the gate buys the runs it needs (issue 28 point 4).

``pytest features/ --fabtest-baseline EXP --fabtest-until-decided --fabtest-budget N`` runs the
suite as usual, then looks at the sequential gate (:mod:`fabtest.compare.sequential`) of what was
recorded so far against the baseline experiment. While a metric is undecided and the budget (scenario
runs beyond the first pass) allows one more whole iteration of the scenarios that feed the undecided
metrics, it runs that iteration (new iteration numbers, so the judge's and simulator's caches do not
repeat a run) and looks again. The e-values stay valid at every look, so stopping as soon as every
metric is decided costs no error rate. The experiment's ``experiment.until_decided`` records the
baseline, the budget, the runs spent and the sequential decision.

Runs one by one, after the main loop: the extra iterations are few and chosen one look at a time.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from fabtest.pytest_plugin.stash_keys import ITERATION_KEY

__all__ = ["UntilDecided", "check_options"]


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

    def __init__(self, config: pytest.Config, recording: Any, iterations: int, notes: list[str]) -> None:
        self.config = config
        self.recording = recording  # the session's ExperimentRecording
        self.iterations = iterations
        self.notes = notes  # the run summary's notes
        self.baseline_ref = str(config.getoption("--fabtest-baseline"))
        self.budget = int(config.getoption("--fabtest-budget"))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, Any, None]:
        yield
        if session.shouldstop or session.shouldfail or not session.items:
            return
        try:
            self._more(session)
        except Exception as exc:  # noqa: BLE001 - the suite's own results still stand and are saved
            self.notes.append(f"fabtest: error: --fabtest-until-decided stopped: {exc}")

    def _more(self, session: pytest.Session) -> None:
        from fabtest.compare.read import Experiment, read_experiment
        from fabtest.compare.sequential import decide

        _, baseline = read_experiment(self.baseline_ref, self.recording.results_dir)
        recorder = self.recording.recorder()
        spent, iteration = 0, self.iterations
        while True:
            current = Experiment({})
            current.add_rows(recorder.index_rows())
            decision = decide(baseline, current)
            rerun = self._items(session, recorder, set(decision.rerun)) if decision.outcome == "undecided" else []
            if not rerun or spent + len(rerun) > self.budget or session.shouldstop or session.shouldfail:
                break
            iteration += 1
            for item in rerun:
                clone = _clone(item, iteration)
                clone.ihook.pytest_runtest_protocol(item=clone, nextitem=None)
            spent += len(rerun)
        stopped = ("every metric decided" if decision.outcome != "undecided" else
                   "the budget would be exceeded by another iteration" if decision.rerun else "nothing left to run")
        record = {"baseline": self.baseline_ref, "budget": self.budget, "runs_added": spent,
                  "iterations_added": iteration - self.iterations, "stopped": stopped, **decision.to_dict()}
        recorder.set_until_decided(record)
        self.notes.append(f"fabtest: until decided against {self.baseline_ref}: {decision.line()}; {spent} run(s) "
                          f"added of a budget of {self.budget} ({stopped})")

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


def _without_iteration(nodeid: str) -> str:
    """``x.feature::test[rec-iter2]`` and ``[rec-iter1]`` are one scenario."""
    import re

    return re.sub(r"-?iter\d+(?=\])", "", nodeid)


def _clone(item: pytest.Function, iteration: int) -> pytest.Function:
    """The same scenario as a new item, run as iteration ``iteration``."""
    clone = pytest.Function.from_parent(item.parent, name=f"{item.name}@iteration{iteration}",
                                        callspec=getattr(item, "callspec", None), callobj=item.obj,
                                        fixtureinfo=item._fixtureinfo, originalname=item.originalname)  # noqa: SLF001
    clone.stash[ITERATION_KEY] = iteration
    return clone
