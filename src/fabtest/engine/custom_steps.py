"""``fabtest.Scenario``: the part of a running scenario a custom step may use.

The ``fabtest_scenario`` fixture hands a step the engine's whole ``ScenarioState`` (its agent,
judge batching, topic tracking, clean-up); a project's own steps need four things: the
conversation so far, its last turn, a way to record an outcome as a soft (``should``) or hard
(``must``) check like the built-in steps, and the judge's verdict on a criterion. This protocol
names those, so a step annotated ``fabtest_scenario: fabtest.Scenario`` is type-checked against
what stays stable (docs/how-to/custom-steps.md), not against the engine's internals.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from fabtest.config.criteria import Criterion
from fabtest.conversation import Check, Conversation, Mode, Status, Turn

__all__ = ["Scenario"]


@runtime_checkable
class Scenario(Protocol):
    """A running scenario, as a custom step sees it (the ``fabtest_scenario`` fixture)."""

    @property
    def conversation(self) -> Conversation:
        """Every turn so far, with tool calls and token usage."""
        ...

    @property
    def last_turn(self) -> Turn:
        """The latest turn; a :class:`fabtest.UsageError` naming the step when there is none yet."""
        ...

    @property
    def criteria(self) -> Mapping[str, Criterion]:
        """The criteria declared so far (project, Background, scenario), by name."""
        ...

    def record_check(self, kind: str, mode: Mode, label: str, status: Status, details: str,
                     *, turn: int | None = None, data: dict[str, Any] | None = None) -> Check:
        """Record an outcome (``status``: passed, failed, inconclusive, skipped) under ``kind`` and
        ``label`` (the criterion column of the experiment); a failed or inconclusive ``must`` raises
        :class:`fabtest.ExpectationFailed` naming the turn and the reply."""
        ...

    def satisfy(self, criterion: Criterion, mode: Mode, scope: Literal["response", "every", "conversation"]) -> None:
        """Have the judge decide ``criterion`` over the last response, every response or the whole
        conversation, recorded like the built-in ``should satisfy`` / ``must satisfy`` steps (a
        ``should`` is judged in the background; a ``must`` waits and fails the step)."""
        ...


if TYPE_CHECKING:
    from fabtest.engine.scenario import ScenarioState

    def _the_engine_state_is_a_scenario(state: ScenarioState) -> Scenario:
        return state  # mypy checks here that the fixture's ScenarioState keeps this promise
