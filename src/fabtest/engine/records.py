"""A scenario-set record in a running scenario: who the simulated user is, and what is verified.

``Given a simulated user from the scenario`` takes the record's goal, persona and facts (and its
``verification.max_turns`` as the turn limit); when every step passed, the record's
``verification`` becomes hard expectations (docs/how-to/scenario-sets.md). The record arrives validated
(:class:`fabtest.config.scenario_sets.ScenarioRecord`), so nothing here re-reads a dict.
"""

from __future__ import annotations

from typing import Any, Protocol

from fabtest.config.scenario_sets import ScenarioRecord
from fabtest.conversation import Check, Conversation, Mode, Status
from fabtest.engine import checks
from fabtest.engine.topics import TopicGraph
from fabtest.errors import UsageError

__all__ = ["RecordState", "use_record", "verify_record"]


class RecordState(Protocol):
    """What a record reads and sets of the running scenario (:class:`fabtest.engine.scenario.ScenarioState` is one)."""

    @property
    def where(self) -> str: ...

    @property
    def record(self) -> ScenarioRecord | None: ...

    @property
    def topics(self) -> TopicGraph | None: ...

    @property
    def conversation(self) -> Conversation: ...

    def configure_simulator(self, **changes: Any) -> None: ...

    def record_check(self, kind: str, mode: Mode, label: str, status: Status, details: str,
                     *, turn: int | None = None, data: dict[str, Any] | None = None) -> Check: ...


def use_record(state: RecordState) -> None:
    """Configure the simulated user from the scenario's record; a scenario without one is a usage error."""
    record = state.record
    if record is None:
        raise UsageError(f"{state.where}: 'a simulated user from the scenario' needs a scenario tagged "
                         "@scenario_set:NAME (records in scenarios/NAME.json|yaml|yml)")
    facts = {str(k): str(v) for k, v in record.context.items()}
    state.configure_simulator(goal=record.goal, persona=record.persona, facts=facts)
    if record.checks.max_turns:
        state.configure_simulator(max_turns=record.checks.max_turns)
    if record.checks.reached_topic is not None and state.topics is not None:
        _require_topic(state, record.checks.reached_topic)  # before any turn is paid for


def _require_topic(state: RecordState, topic: str) -> None:
    """A ``verification.reached_topic`` the feature declares no such topic for could never pass."""
    assert state.record is not None
    where = f"{state.where}: {state.record.source}: scenarios[{state.record.index}].verification.reached_topic"
    if state.topics is None:
        raise UsageError(f"{where}: {topic!r} needs topics: add a Given the topics: table to the feature")
    if topic not in state.topics:
        raise UsageError(f"{where}: unknown topic {topic!r}; declared: {', '.join(state.topics.names)}")


def verify_record(state: RecordState) -> None:
    """Check the record's ``verification`` as ``must`` expectations; the first failure raises."""
    if state.record is None:
        return
    expected = state.record.checks
    conv = state.conversation
    if expected.call_tool is not None:
        tool = expected.call_tool
        passed, details = checks.check_called(conv.tool_calls, tool)
        state.record_check("call_tool", "must", f"call_tool:{tool}", "passed" if passed else "failed", details,
                           data={"tool": tool, "source": "verification"})
    if expected.reached_topic is not None:
        topic = expected.reached_topic
        _require_topic(state, topic)
        ok = topic in conv.topic_path
        state.record_check("reached_topic", "must", f"reached:{topic}", "passed" if ok else "failed",
                           f"topic path: {' > '.join(conv.topic_path) or '(none)'}",
                           data={"topic": topic, "source": "verification"})
    if expected.max_turns:
        limit, actual = expected.max_turns, len(conv.turns)
        state.record_check("turn_count", "must", f"turn_count<={limit}", "passed" if actual <= limit else "failed",
                           f"{actual} turn{'' if actual == 1 else 's'} (max {limit})",
                           data={"max": limit, "actual": actual})
