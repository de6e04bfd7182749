"""How a scenario ended: passed, failed (with its failure type and message) or skipped.

The decision is the engine's, so every front end reports a scenario the same way: the failure
type lives on the exception class (:mod:`fabtest.errors`), a :class:`~fabtest.errors.NeedsLLM`
is a skip, and the work every scenario does after its last step (:func:`conclude`: background
verdicts, a record's verification, the agent's ``metadata()`` and ``around()`` exit) can still
fail a scenario whose steps all passed. The pytest plugin turns an :class:`Outcome` into a pytest
report; :func:`fabtest.run` returns it inside its result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from fabtest.errors import (
    FabtestError,
    FailureType,
    InvalidSimulation,
    UsageError,
    exception_text,
    failure_type_of,
)

if TYPE_CHECKING:
    from fabtest.engine.scenario import ScenarioState

__all__ = ["Ending", "Outcome", "conclude", "ended", "failure_message"]

Ending = Literal["passed", "failed", "skipped"]


@dataclass(frozen=True)
class Outcome:
    """One scenario's ending, in the words of the experiment JSON (``failure_type``, ``skip_reason``)."""

    ending: Ending
    failure_type: FailureType | None = None
    failure_message: str | None = None
    skip_reason: str | None = None

    @property
    def passed(self) -> bool:
        return self.ending == "passed"

    @property
    def skipped(self) -> bool:
        return self.ending == "skipped"

    @classmethod
    def failed(cls, failure_type: FailureType | None, message: str | None) -> Outcome:
        return cls("failed", failure_type, message)


def conclude(state: ScenarioState, exc: BaseException | None) -> BaseException | None:
    """Finish ``state`` after its steps and return what ends the scenario: the steps' own exception,
    else the first failure of the late work (a background verdict, the record's verification, the
    agent's ``metadata()`` or ``around()`` exit). The record is verified only when every step passed."""
    verify = exc is None
    late_steps: tuple[Callable[[], None], ...] = (lambda: state.finish(verify=verify), state.close)
    for late_step in late_steps:
        try:
            late_step()
        except FabtestError as late:  # any of ours ends the scenario with its type; others are bugs to show
            if exc is None:
                exc = late
    if exc is not None and not (isinstance(exc, FabtestError) and exc.skips):
        # a failure must not stand on a conversation its fidelity review voids: wait for that one review
        problems = state.voided()
        if problems:
            again = " and runs again" if state.review is not None and state.review.attempts_left else ""
            exc = InvalidSimulation(f"the simulated user left its role: {'; '.join(problems)} (the run is voided"
                                    f"{again})", where=state.where)
    return exc


def failure_message(exc: BaseException, *, where: str = "", step: str = "") -> str:
    """The one-paragraph failure a user reads: the step (``file:line`` and its words) and what happened.

    A :class:`~fabtest.errors.UsageError` already names its file and line, so it is shown as is.
    """
    text = exception_text(exc)
    if isinstance(exc, UsageError):
        return text
    return f"{where}: {step}\n{type(exc).__name__}: {text}" if where else text


def ended(exc: BaseException | None, *, where: str = "", step: str = "") -> Outcome:
    """The outcome of a scenario that raised ``exc`` (None: it passed) in the step at ``where``."""
    if exc is None:
        return Outcome("passed")
    if isinstance(exc, FabtestError) and exc.skips:
        return Outcome("skipped", skip_reason=exception_text(exc))
    return Outcome.failed(failure_type_of(exc), failure_message(exc, where=where, step=step))
