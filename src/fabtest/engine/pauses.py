"""Pauses in a scenario: the checks on what the agent asked, and the user's decisions on them.

An agent that stops for a person ends its turn on pauses (:class:`~fabtest.conversation.Pause`); the
next user message decides them (:class:`~fabtest.conversation.Decision`, docs/how-to/approvals.md).
This module holds the rules every front end shares, as plain functions over the conversation:
which pauses a decision applies to (every pending pause of the kind it decides, so an agent that
asks for two approvals at once gets both), what a decision step says when nothing waits, and the
one line that fails a scenario which ended with a pause still undecided (never a hang, never a
silent pass).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fabtest.conversation import Conversation, Decision, DecisionKind, Pause, describe_pause
from fabtest.engine.checks import ArgExpectation, Result
from fabtest.errors import ExpectationFailed, UsageError

__all__ = ["VERBS", "NothingPending", "asked_approval", "decisions_for", "require_pauses", "undecided",
           "undecided_message"]


class NothingPending(ExpectationFailed):
    """A decision step (``When the user approves``) while the agent waits for nothing: the agent did
    not pause where the scenario expected it to (failure type ``assertion``)."""


def require_pauses(agent: Any, step: str, *, where: str) -> None:
    """A UsageError, in one line, when the agent's adapter can never pause (a CLI agent): an approval
    step there would only ever fail, or pass, for a reason that is not the agent's."""
    why = getattr(type(agent), "pauses_unsupported", None)  # the class's word (an object may answer any name)
    if isinstance(why, property):  # an adapter that pauses or not by its settings (ACP's permission)
        why = getattr(agent, "pauses_unsupported", None)
    if isinstance(why, str) and why:
        raise UsageError(f"{where}: {step}: this agent cannot pause for a decision ({why}); pauses are driven for "
                         "Python, HTTP, A2A, AG-UI, LangGraph, OpenAI Agents SDK, PydanticAI and ADK agents, and ACP "
                         "agents with permission = \"pause\" "
                         "(docs/how-to/approvals.md)")


VERBS = {"approved": "approves", "rejected": "rejects", "answered": "answers", "edited": "approves with:"}


def decisions_for(conversation: Conversation, decision: DecisionKind, *, reason: str | None = None,
                  answer: str | None = None, arguments: Mapping[str, Any] | None = None,
                  where: str = "") -> list[Decision]:
    """The decisions ``When the user <decision>`` sends: one per pending pause of the kind it decides
    (approvals for approves / rejects / approves with:, questions for answers); NothingPending,
    naming what the agent did instead, when no pause of that kind waits."""
    pending = conversation.pending_pauses
    wanted = "question" if decision == "answered" else "approval"
    chosen = [p for p in pending if p.kind == wanted]
    if not chosen:
        turn = conversation.last_turn
        step = f"{where}: When the user {VERBS[decision]}" if where else f"When the user {VERBS[decision]}"
        if turn is None:
            raise NothingPending(f"{step}: nothing is pending: the agent has not answered yet")
        if pending:
            other = "; ".join(describe_pause(p) for p in pending)
            fix = "When the user answers \"...\"" if wanted == "approval" else "When the user approves / rejects"
            raise NothingPending(f"{step}: the agent's pause in turn {turn.number} is not {_a(wanted)} ({other}): "
                                 f"decide it with {fix}")
        raise NothingPending(f"{step}: nothing is pending: the agent asked for no {wanted} in turn {turn.number} "
                             f"(it said {_short(turn.response.text)})")
    return [Decision(p.id, decision, reason=reason, answer=answer,
                     arguments=_edited(p, arguments) if arguments is not None else None) for p in chosen]


def _a(kind: str) -> str:
    return "an approval" if kind == "approval" else "a question"


def _edited(pause: Pause, changes: Mapping[str, Any]) -> dict[str, Any]:
    """The pause's arguments with the user's edits over them (a table names only what changes)."""
    return {**pause.arguments, **changes}


def asked_approval(conversation: Conversation, tool: str | None, args: Sequence[ArgExpectation] = ()) -> Result:
    """Did the latest turn end on an approval of ``tool`` (any tool: None) with matching arguments?"""
    turn = conversation.last_turn
    pauses = [p for p in (turn.response.pauses if turn else []) if p.kind == "approval"]
    asked = "; ".join(p.describe() for p in pauses) or "no approval"
    if tool is None:
        return (True, f"asked: {asked}") if pauses else (False, "asked for no approval")
    same = [p for p in pauses if p.tool == tool]
    if any(all(a.matches(p.arguments) for a in args) for p in same):
        return True, f"asked for approval of {tool}"
    if same:
        wanted = ", ".join(f"{a.name}={a.expected}" for a in args)
        return False, f"asked for approval of {tool} but not with {wanted}; asked: {asked}"
    return False, f"did not ask for approval of {tool}; asked: {asked}"


def undecided(conversation: Conversation) -> list[tuple[int, Pause]]:
    """Every pause no later user message decided, with the turn that asked it."""
    return [(turn.number, pause) for turn in conversation.turns
            for pause, decision, _ in conversation.pause_outcomes(turn) if decision is None]


def undecided_message(left: Sequence[tuple[int, Pause]]) -> str:
    """The line a scenario ending with pauses undecided fails with."""
    named = "; ".join(f"{_pause_name(p)} (asked in turn {n})" for n, p in left)
    return (f"the scenario ended with {'a pause' if len(left) == 1 else f'{len(left)} pauses'} unanswered: {named}: "
            "decide it with When the user approves / rejects with \"...\" / answers \"...\"")


def _pause_name(pause: Pause) -> str:
    if pause.kind == "approval":
        return f"the pending approval of {pause.describe()}"
    return f"the question {pause.describe()!r}"


def _short(text: str, limit: int = 120) -> str:
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")
