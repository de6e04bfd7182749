"""The handoff checks (issue 40): the events a framework adapter records in a turn's metadata, by
agent name; run again from a recorded check's data (``fabtest replay``)."""

from __future__ import annotations

from fabtest.conversation import AgentResponse, Turn
from fabtest.engine import handoffs


def _turn(number: int, *events: tuple[str, str]) -> Turn:
    metadata = {"handoffs": [{"from": a, "to": b} for a, b in events]} if events else {}
    return Turn(number, "hi", AgentResponse(text="ok", metadata=metadata))


def test_a_handoff_to_the_agent_named_passes_and_the_details_list_what_was_seen() -> None:
    turns = [_turn(1, ("Triage Agent", "Seat Booking Agent")), _turn(2)]
    assert handoffs.check_handoff(handoffs.handoffs_of(turns), "Seat Booking Agent") == (
        True, 'a handoff to "Seat Booking Agent": Triage Agent -> Seat Booking Agent')
    assert handoffs.check_handoff(handoffs.handoffs_of(turns), "FAQ Agent") == (
        False, 'a handoff to "FAQ Agent" was expected; the handoffs: Triage Agent -> Seat Booking Agent')
    assert handoffs.check_handoff(handoffs.handoffs_of(turns[1:]), None) == (
        False, "a handoff was expected; the handoffs: no handoff")


def test_a_recorded_check_runs_again_on_new_turns() -> None:
    turns = [_turn(1, ("Triage Agent", "FAQ Agent"))]
    assert handoffs.evaluate(handoffs.KIND, {"agent": "FAQ Agent"}, turns)[0] is True
    assert handoffs.evaluate(handoffs.NOT_KIND, {}, turns)[0] is False  # must not hand off, and it did
    assert handoffs.evaluate(handoffs.NOT_KIND, {}, [_turn(1)])[0] is True
    assert handoffs.evaluate("call_tool", {}, turns) is None
