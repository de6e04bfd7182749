"""Soft verdicts that arrive after their scenario's result: merged in before the experiment is written.

A scenario's test ends when its conversation and its hard expectations are done; its soft LLM
checks (``should`` criteria, grounding, intent, goal) may still be with the judge. Its result is
recorded with each such check as a placeholder (status ``skipped``, ``data.pending`` true) and
the verdicts follow as a :class:`LateVerdict`: the scenario's node id, each check with its index
in the result's ``evaluations``, and the judge usage they cost. The recorder journals them as
they arrive (``"kind": "late"``) and :func:`merge` puts them into their results. When the
experiment is built, :func:`settle` leaves a placeholder whose verdict never came (the run was
interrupted, its worker died) ``skipped`` with that reason, so it is left out of every rate.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from fabtest.experiment.model import CheckRecord, ScenarioResult, UsageRecord

__all__ = [
    "INTERRUPTED",
    "LATE_KIND",
    "NEVER_ARRIVED",
    "PENDING",
    "PENDING_DETAILS",
    "VOIDED",
    "LateCheck",
    "LateVerdict",
    "has_pending",
    "merge",
    "settle",
]

#: the journal record kind of a late verdict
LATE_KIND = "late"
#: ``data`` key marking a placeholder whose verdict is still being judged
PENDING = "pending"
PENDING_DETAILS = "still with the judge when the scenario finished"
#: why a placeholder stayed skipped
INTERRUPTED = "not judged: the run was interrupted before this soft verdict arrived"
NEVER_ARRIVED = "not judged: the process judging it ended before this soft verdict arrived"
#: why a run whose fidelity review came back late and invalid is skipped (until it runs again)
VOIDED = "voided by the simulator-fidelity review: the simulated user left its role: "


class LateCheck(BaseModel):
    """One soft check's verdict and where it goes: ``evaluations[index]`` of its result."""

    index: int = Field(ge=0)
    check: CheckRecord


class LateVerdict(BaseModel):
    """The verdicts of one scenario's soft checks that finished after its result was recorded."""

    nodeid: str
    checks: list[LateCheck] = Field(default_factory=list)
    #: judge tokens spent on them (not in the result, which left before they finished)
    usage: dict[str, UsageRecord] = Field(default_factory=dict)
    #: every simulated try of the run once its fidelity review came back late (None: no such review);
    #: when the last one is invalid the run is voided (skipped) until it runs again
    tries: list[dict[str, Any]] | None = None


def has_pending(result: ScenarioResult) -> bool:
    """Some soft check of ``result`` is still a placeholder waiting for its verdict."""
    return any(e.data.get(PENDING) for e in result.evaluations)


def merge(result: ScenarioResult, verdicts: list[LateVerdict]) -> ScenarioResult:
    """``result`` with ``verdicts`` in their placeholders' places and their judge tokens added."""
    if not verdicts:
        return result
    evaluations = list(result.evaluations)
    usage = dict(result.usage)
    for verdict in verdicts:
        for late in verdict.checks:
            if late.index < len(evaluations) and evaluations[late.index].data.get(PENDING):
                evaluations[late.index] = late.check
        for role, spent in verdict.usage.items():
            mine = usage.get(role) or UsageRecord()
            usage[role] = mine.model_copy(update={  # the model too: the role may have spent nothing before
                "calls": mine.calls + spent.calls, "input_tokens": mine.input_tokens + spent.input_tokens,
                "output_tokens": mine.output_tokens + spent.output_tokens, "model": mine.model or spent.model})
    update: dict[str, Any] = {"evaluations": evaluations, "usage": usage}
    for verdict in verdicts:
        if verdict.tries:
            update.update(_reviewed(verdict.tries))
    return result.model_copy(update=update)


def _reviewed(tries: list[dict[str, Any]]) -> dict[str, Any]:
    """A result's fields once its simulation's late fidelity review is in: voided (skipped, out of
    every rate, like a run whose every try was invalid) when the last try was invalid."""
    last = tries[-1]
    update: dict[str, Any] = {"simulation": {"valid": bool(last.get("valid")), "tries": tries}}
    if not last.get("valid"):
        update.update(passed=False, skipped=True, failure_type=None, failure_message=None,
                      skip_reason=VOIDED + "; ".join(last.get("problems") or []))
    return update


def settle(result: ScenarioResult, missing: str) -> ScenarioResult:
    """``result`` with every placeholder still waiting ``skipped`` for good, ``missing`` saying why."""
    if not has_pending(result):
        return result
    evaluations = list(result.evaluations)
    for index, check in enumerate(evaluations):
        if check.data.get(PENDING):
            data = {k: v for k, v in check.data.items() if k != PENDING}
            evaluations[index] = check.model_copy(update={"details": missing, "data": data})
    return result.model_copy(update={"evaluations": evaluations})
