"""The checks the judge decides, one function each: ask the judge, word its verdict as a :class:`Check`.

Every prompt is in :mod:`fabtest.engine.judge`; this module only says what a verdict is recorded as
(kind, label, status, details, data in the experiment JSON). When the call runs (at once for a
``must``, in the background for a ``should``) is :class:`~fabtest.engine.scenario.ScenarioState`'s.
Each function returns the check and what the call cost, to charge to the judge.
"""

from __future__ import annotations

from collections.abc import Sequence

from fabtest.config.criteria import Criterion
from fabtest.conversation import Check, Mode, TokenUsage, ToolCall, Turn
from fabtest.engine.judge import CriterionVerdict, Judge, Scope, criterion_data

__all__ = ["Judged", "criterion_check", "goal_check", "grounding_check", "intent_check"]

Judged = tuple[Check, TokenUsage]


def criterion_check(criterion: Criterion, mode: Mode, verdict: CriterionVerdict, scope: Scope,
                    turn: int | None) -> Check:
    """``... satisfy "criterion"``: one criterion's verdict from a batched call (the call itself is
    :class:`~fabtest.engine.scenario.ScenarioState`'s, which batches every criterion due on a turn)."""
    return Check("satisfy", mode, criterion.name, verdict.verdict, turn, verdict.reasoning,
                 {"scope": scope, **criterion_data(criterion), **verdict.sample_data()})


def grounding_check(judge: Judge, turn: Turn, source: str, calls: Sequence[ToolCall], mode: Mode) -> Judged:
    """``the response ... be grounded in "source"``: every claim of the reply backed by that tool's results."""
    result = judge.grounding(turn.response.text, source, calls, turn=turn)
    verdict = result.value
    data = {"source": source, **verdict.to_data(), "claims_total": len(verdict.claims),
            "claims_unsupported": len(verdict.unsupported)}
    details = verdict.reasoning or ("unsupported claims: " + "; ".join(verdict.unsupported)
                                    if verdict.unsupported else "every claim is supported")
    check = Check("grounded_in", mode, f"grounded_in:{source}", verdict.verdict, turn.number, details, data)
    return check, result.usage


def intent_check(judge: Judge, turn: Turn, exchange: str, intent: str, mode: Mode) -> Judged:
    """``the response ... have the intent "intent"``: ``exchange`` is the turn with the turns before
    it (:func:`fabtest.engine.transcript.exchange_for_judge`)."""
    result = judge.intent(exchange, intent)
    check = Check("intent", mode, f"intent:{intent}", result.value.verdict, turn.number, result.value.reasoning)
    return check, result.usage


def goal_check(judge: Judge, goal: str, transcript: str, mode: Mode) -> Judged:
    """``the goal ... be achieved``: judged over the whole transcript (:func:`fabtest.engine.transcript.for_judge`)."""
    result = judge.goal_achieved(goal, transcript)
    check = Check("goal", mode, "goal achieved", result.value.verdict, None, result.value.reasoning, {"goal": goal})
    return check, result.usage
