"""Google ADK tool confirmations as fabtest pauses (docs/how-to/approvals.md).

A tool that needs confirmation (``FunctionTool(f, require_confirmation=True)``, or one that calls
``tool_context.request_confirmation(hint=...)``) makes ADK emit an ``adk_request_confirmation``
function call, long-running, whose arguments hold the ``originalFunctionCall`` (name, args, id)
and the ``toolConfirmation`` (its ``hint``). It becomes an approval of the original call, the
hint as its question. The user's decision goes back as the function response of that call,
``{"confirmed": true|false}`` (a rejection's reason, or an answer, as its ``payload``), the
message of the next run. ADK runs the call as the model made it, so an edited approval is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from google.genai import types

from fabtest.agents.base import AgentError, each_decided
from fabtest.conversation import Decision, Pause

__all__ = ["CONFIRMATION", "confirmations", "pause_of"]

#: the function call ADK asks a confirmation with (google.adk.utils._function_call_names)
CONFIRMATION = "adk_request_confirmation"


def pause_of(call: types.FunctionCall) -> Pause:
    """The approval an ``adk_request_confirmation`` call asks; ``metadata["call"]`` is the held call's id."""
    args: Mapping[str, Any] = call.args or {}
    original = args.get("originalFunctionCall") or {}
    confirmation = args.get("toolConfirmation") or {}
    return Pause(tool=str(original.get("name") or "tool"), arguments=dict(original.get("args") or {}),
                 question=confirmation.get("hint") or None, id=call.id or "confirmation", kind="approval",
                 metadata={"call": original.get("id")})


def confirmations(pauses: Sequence[Pause], decisions: Sequence[Decision]) -> types.Content:
    """The user message that answers each confirmation: one function response per pause."""
    parts = []
    waits_on = f"the ADK run waits on {len(pauses)} confirmations"
    for pause, decision in each_decided(pauses, decisions, waits_on=waits_on):
        if decision.decision == "edited":
            raise AgentError(f"ADK runs a confirmed call as the model made it (a ToolConfirmation has no arguments): "
                             f"{pause.describe()} cannot be approved with edited arguments; use When the user "
                             "approves or rejects")
        response: dict[str, Any] = {"confirmed": decision.approved}
        said = decision.answer if decision.decision == "answered" else decision.reason
        if said:
            response["payload"] = {"reason": said} if decision.decision != "answered" else said
        parts.append(types.Part(function_response=types.FunctionResponse(id=pause.id, name=CONFIRMATION,
                                                                         response=response)))
    return types.Content(role="user", parts=parts)
