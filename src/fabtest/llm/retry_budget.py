"""The suite-wide retry budget: retries may add at most a fraction of the calls made.

Per-call retries alone let a 429 storm multiply every call by ``max_retries + 1`` and turn a
ten-minute run into hours. The budget caps the sum: with ``retry_budget = 0.1`` the run may
retry at most 10 % as often as it called, never less than :data:`RETRY_BUDGET_FLOOR` retries so
a small suite can still ride out a blip. Once spent, a transient failure ends its call at once
(:class:`RetryBudgetSpent`, failure type ``error``), and the summary counts the scenarios that
cost (they carry :data:`BUDGET_SPENT_MARKER` in their failure message).

Like the concurrency limit (:func:`fabtest.pytest_plugin.llm_roles.SessionLLMs.concurrency_share`),
the budget is per process: under ``-n N`` each worker gets its share of the floor, and the ratio
applies to the calls of that worker, so together the workers stay inside the suite's budget.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from typing import Any

from fabtest.llm.base import LLMError

__all__ = ["BUDGET_SPENT_MARKER", "RETRY_BUDGET_FLOOR", "RetryBudget", "RetryBudgetSpent", "budget_line",
           "budget_spent_message"]

#: Retries always allowed, whatever the ratio: enough for a tiny suite to survive a blip.
RETRY_BUDGET_FLOOR = 10
#: Words every budget failure message contains (the summary counts scenarios by them).
BUDGET_SPENT_MARKER = "retry budget is spent"


class RetryBudgetSpent(LLMError):
    """A transient failure that was not retried because the suite's retry budget ran out."""


class RetryBudget:
    """Counts calls and retries for one run; thread-safe, shared by the judge and the simulator."""

    def __init__(self, ratio: float, *, floor: int = RETRY_BUDGET_FLOOR) -> None:
        if not math.isfinite(ratio) or ratio < 0:
            raise ValueError(f"retry_budget must be a finite number >= 0, got {ratio!r}")
        self.ratio = ratio
        self.floor = max(0, int(floor))
        self.calls = 0
        self.retries = 0
        self.refused = 0
        #: of ``retries``, the hedges (fabtest.llm.hedging): second copies of a first attempt
        self.hedges = 0
        self._lock = threading.Lock()

    @property
    def allowed(self) -> int:
        """Retries allowed so far: the floor, or ``ratio`` times the calls made if that is more."""
        return max(self.floor, math.floor(self.ratio * self.calls))

    def record_call(self) -> None:
        """One logical call went out (its first attempt)."""
        with self._lock:
            self.calls += 1

    def spend(self) -> bool:
        """Take one retry from the budget; False (and nothing taken) when it is spent."""
        with self._lock:
            if self.retries + 1 > self.allowed:
                self.refused += 1
                return False
            self.retries += 1
            return True

    def spend_on_hedge(self) -> bool:
        """Take one retry for a hedge while at most half the allowance is spent; False (nothing taken,
        nothing refused: a hedge not sent is no failure) otherwise. The other half stays for real
        failures, and hedges add at most ``ratio / 2`` to the calls (5 % by default: the extra load
        Dean & Barroso's hedge after the p95 is meant to cost)."""
        with self._lock:
            if self.retries + 1 > self.allowed // 2:
                return False
            self.retries += 1
            self.hedges += 1
            return True

    def refund_hedge(self) -> None:
        """Give back a hedge's retry that did not go out after all (no free slot once its thread ran)."""
        with self._lock:
            self.retries -= 1
            self.hedges -= 1

    @property
    def spent(self) -> bool:
        """True once a retry was refused."""
        return self.refused > 0

    def exhausted(self, what: str) -> RetryBudgetSpent:
        """The error for a transient failure that the budget does not pay for."""
        return RetryBudgetSpent(f"{what}; not retried: {budget_spent_message(self)}")


def budget_spent_message(budget: RetryBudget) -> str:
    """Why a call was not retried, with the numbers and the setting to change."""
    return (f"the suite's {BUDGET_SPENT_MARKER} ({budget.retries} retries for {budget.calls} calls; "
            f"retry_budget = {budget.ratio:g} in [tool.fabtest] or --fabtest-retry-budget)")


def budget_line(doc: Mapping[str, Any]) -> list[str]:
    """The summary line saying the budget ran out and how many scenarios it cost (none if it did not)."""
    cost = sum(1 for s in doc.get("scenario_results") or [] if isinstance(s, Mapping)
               and BUDGET_SPENT_MARKER in str(s.get("failure_message") or ""))
    if not cost:
        return []
    return [f"  Retry budget:     ran out; {cost} scenario(s) ended as error without retrying "
            "(raise retry_budget in [tool.fabtest])"]
