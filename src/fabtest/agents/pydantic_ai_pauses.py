"""PydanticAI deferred tool calls as fabtest pauses (docs/how-to/approvals.md).

An agent whose ``output_type`` includes ``DeferredToolRequests`` ends its run on the calls it
cannot finish alone: ``approvals`` (a tool with ``requires_approval``, or one that raised
``ApprovalRequired``) become approval pauses; ``calls`` (``CallDeferred``) become questions, the
question being the call's ``metadata["question"]`` or ``question`` argument when it has one. The
next run gets the user's decisions as ``DeferredToolResults``: ``True``, ``ToolDenied(reason)``,
``ToolApproved(override_args=...)`` for an edit, and the answer's text as the result of a
question.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic_ai import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied

from fabtest.agents.base import each_decided
from fabtest.conversation import Decision, Pause

__all__ = ["held_calls", "pauses_of", "results_for"]


def pauses_of(requests: DeferredToolRequests) -> list[Pause]:
    """One pause per deferred call: approvals first, then the calls waiting for an answer."""
    out = [Pause(tool=c.tool_name, arguments=c.args_as_dict(), id=c.tool_call_id, kind="approval",
                 question=_text((requests.metadata.get(c.tool_call_id) or {}).get("question")))
           for c in requests.approvals]
    for call in requests.calls:
        args = call.args_as_dict()
        meta = requests.metadata.get(call.tool_call_id) or {}
        question = _text(meta.get("question")) or _text(args.get("question"))
        out.append(Pause(tool=call.tool_name, arguments=args, id=call.tool_call_id, kind="question",
                         question=question or f"{call.tool_name}({json.dumps(args, ensure_ascii=False)})",
                         metadata={"deferred": requests.kind(call.tool_call_id)}))
    return out


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def results_for(pauses: Sequence[Pause], decisions: Sequence[Decision]) -> DeferredToolResults:
    """The ``DeferredToolResults`` of the user's decisions on ``pauses``."""
    results = DeferredToolResults()
    waits_on = f"the PydanticAI run waits on {len(pauses)} deferred calls"
    for pause, decision in each_decided(pauses, decisions, waits_on=waits_on):
        if pause.kind == "question":
            results.calls[pause.id] = decision.answer if decision.decision == "answered" else decision.reason or ""
        elif decision.decision == "edited":
            results.approvals[pause.id] = ToolApproved(override_args=dict(decision.arguments or {}))
        elif decision.approved:
            results.approvals[pause.id] = True
        else:
            results.approvals[pause.id] = ToolDenied(decision.reason) if decision.reason else False
    return results


def held_calls(pauses: Sequence[Pause], decisions: Sequence[Decision]) -> list[tuple[Pause, bool]]:
    """Each approval the run held, as the call the resumed run makes (with edited arguments when
    edited) and whether it is skipped: a rejected call is not made, a question's answer is no call."""
    by_pause = {d.pause_id: d for d in decisions}
    out: list[tuple[Pause, bool]] = []
    for pause in pauses:
        decision = by_pause.get(pause.id)
        if pause.kind != "approval" or decision is None or not decision.approved:
            out.append((pause, True))
            continue
        arguments = decision.arguments if decision.arguments is not None else pause.arguments
        out.append((Pause(tool=pause.tool, arguments=dict(arguments), id=pause.id, kind="approval"), False))
    return out
