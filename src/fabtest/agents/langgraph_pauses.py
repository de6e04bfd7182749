"""LangGraph interrupts as fabtest pauses, and the user's decisions as ``Command(resume=...)``.

A graph that calls ``interrupt(value)`` stops; ``ainvoke`` returns its state with
``__interrupt__``: one ``Interrupt(value, id)`` per pending interrupt. What the value says decides
the pause (docs/how-to/approvals.md):

- an Agent Inbox ``HumanInterrupt`` (``{"action_request": {"action", "args"}, "config",
  "description"}``, alone or in a list, as ``interrupt([request])[0]`` sends it): an approval of
  ``action`` with ``args``, resumed with a ``HumanResponse`` (``accept``, ``edit`` with the new
  args, ``response`` with the rejection's reason, or ``ignore``), in a list when the request was
  one, and only with a type its ``config`` allows;
- LangChain's human-in-the-loop middleware request (``{"action_requests": [{"name", "args",
  "description"}], "review_configs": [...]}``): one approval per action, resumed with
  ``{"decisions": [{"type": "approve" | "edit" | "reject", ...}]}``;
- anything else: a question (the value's text), resumed with the user's answer as text.

Several interrupts at once are resumed together, ``Command(resume={interrupt_id: value})``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from langgraph.types import Command

from fabtest.agents.base import AgentError
from fabtest.conversation import Decision, Pause

__all__ = ["held_calls", "pauses_of", "resume_command"]

_SHAPE = "langgraph_shape"
_HUMAN, _HITL, _TEXT = "human_interrupt", "hitl_request", "value"


def pauses_of(interrupts: Sequence[Any]) -> list[Pause]:
    """The pauses of a state's ``__interrupt__`` list, each keeping the interrupt's id and shape."""
    out: list[Pause] = []
    for item in interrupts:
        value, iid = getattr(item, "value", None), str(getattr(item, "id", "") or f"interrupt-{len(out) + 1}")
        requests, listed = _human_requests(value)
        if requests is not None:
            for i, request in enumerate(requests):
                action = request["action_request"]
                out.append(Pause(tool=str(action.get("action")), arguments=dict(action.get("args") or {}),
                                 question=request.get("description") or None, id=_id(iid, i, len(requests), listed),
                                 metadata={_SHAPE: _HUMAN, "interrupt": iid, "index": i, "listed": listed,
                                           "config": dict(request.get("config") or {})}))
            continue
        actions = _hitl_actions(value)
        if actions is not None:
            reviews = value.get("review_configs") if isinstance(value, Mapping) else None
            configs = {str(c.get("action_name")): c for c in reviews or [] if isinstance(c, Mapping)}
            for i, action in enumerate(actions):
                name = str(action.get("name"))
                out.append(Pause(tool=name, arguments=dict(action.get("args") or {}),
                                 question=action.get("description") or None, id=_id(iid, i, len(actions), True),
                                 metadata={_SHAPE: _HITL, "interrupt": iid, "index": i,
                                           "allowed": list((configs.get(name) or {}).get("allowed_decisions") or [])}))
            continue
        text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
        out.append(Pause(question=text or "(no question)", id=iid, kind="question",
                         metadata={_SHAPE: _TEXT, "interrupt": iid}))
    return out


def held_calls(calls: Sequence[Mapping[str, Any]], pauses: Sequence[Pause],
               decisions: Sequence[Decision]) -> list[dict[str, Any]]:
    """The tool calls a pause held, as the turn that resumed it records them: a rejected one was
    not made (the tool only read the rejection), an edited one was made with the new arguments."""
    by_pause = {d.pause_id: d for d in decisions}
    out: list[dict[str, Any]] = []
    for call in calls:
        pause = next((p for p in pauses if p.tool == call.get("name") and p.arguments == (call.get("args") or {})),
                     None)
        decision = by_pause.get(pause.id) if pause is not None else None
        if decision is not None and not decision.approved:
            continue
        args = decision.arguments if decision is not None and decision.arguments is not None else call.get("args")
        out.append({**call, "args": args})
    return out


def _id(iid: str, index: int, count: int, listed: bool) -> str:
    return f"{iid}:{index}" if listed or count > 1 else iid


def _human_requests(value: Any) -> tuple[list[Mapping[str, Any]] | None, bool]:
    """The HumanInterrupt requests of an interrupt's value and whether they came as a list."""
    def is_request(v: Any) -> bool:
        return isinstance(v, Mapping) and isinstance(v.get("action_request"), Mapping)

    if is_request(value):
        return [value], False
    if isinstance(value, list) and value and all(is_request(v) for v in value):
        return list(value), True
    return None, False


def _hitl_actions(value: Any) -> list[Mapping[str, Any]] | None:
    if isinstance(value, Mapping) and isinstance(value.get("action_requests"), list):
        actions = value["action_requests"]
        if actions and all(isinstance(a, Mapping) and a.get("name") for a in actions):
            return list(actions)
    return None


def resume_command(pauses: Sequence[Pause], decisions: Sequence[Decision]) -> Command[Any]:
    """The ``Command(resume=...)`` that gives the graph the user's decisions on ``pauses``; an
    AgentError naming the interrupt when a decision is one the interrupt does not allow."""
    by_pause = {d.pause_id: d for d in decisions}
    values: dict[str, Any] = {}
    groups: dict[str, list[Pause]] = {}
    for pause in pauses:
        groups.setdefault(str(pause.metadata.get("interrupt", pause.id)), []).append(pause)
    for iid, group in groups.items():
        decided = [(p, by_pause.get(p.id)) for p in group]
        missing = [p for p, d in decided if d is None]
        if missing:  # LangGraph resumes every pending interrupt at once: a value is needed for each
            raise AgentError(f"the LangGraph graph waits on {len(pauses)} interrupts and only some were decided: "
                             f"decide {missing[0].describe()} too (one When step decides every pending pause)")
        values[iid] = _value([(p, d) for p, d in decided if d is not None])
    if len(values) == 1:
        return Command(resume=next(iter(values.values())))
    return Command(resume=values)


def _value(decided: list[tuple[Pause, Decision]]) -> Any:
    shape = decided[0][0].metadata.get(_SHAPE)
    if shape == _HUMAN:
        responses = [_human_response(p, d) for p, d in decided]
        return responses if decided[0][0].metadata.get("listed") else responses[0]
    if shape == _HITL:
        return {"decisions": [_hitl_decision(p, d) for p, d in decided]}
    pause, decision = decided[0]
    if decision.decision != "answered":
        raise AgentError(f"the LangGraph interrupt {pause.id} asks {pause.describe()!r}, a question: it is resumed "
                         "with the answer's text (When the user answers \"...\"), not an approval")
    return decision.answer


def _human_response(pause: Pause, decision: Decision) -> dict[str, Any]:
    """A HumanResponse, checked against the request's ``config`` (Agent Inbox's allow_* flags)."""
    config = pause.metadata.get("config") or {}
    args: Any
    if decision.decision == "approved":
        kind, args = "accept", None
    elif decision.decision == "edited":
        kind, args = "edit", {"action": pause.tool, "args": decision.arguments}
    elif decision.decision == "answered" or decision.reason:
        kind, args = "response", decision.answer if decision.decision == "answered" else decision.reason
    else:
        kind, args = "ignore", None
    flag = {"accept": "allow_accept", "edit": "allow_edit", "response": "allow_respond", "ignore": "allow_ignore"}[kind]
    if config and not config.get(flag, False):
        allowed = ", ".join(k.removeprefix("allow_") for k, v in config.items() if v) or "nothing"
        raise AgentError(f"the LangGraph interrupt {pause.id} ({pause.describe()}) does not allow "
                         f"{kind!r} (its config allows {allowed}): the user's {decision.decision} decision cannot "
                         "resume it")
    return {"type": kind, "args": args}


def _hitl_decision(pause: Pause, decision: Decision) -> dict[str, Any]:
    """One decision of LangChain's human-in-the-loop middleware, checked against ``allowed_decisions``."""
    if decision.decision == "approved":
        out: dict[str, Any] = {"type": "approve"}
    elif decision.decision == "edited":
        out = {"type": "edit", "edited_action": {"name": pause.tool, "args": decision.arguments}}
    else:
        message = decision.answer if decision.decision == "answered" else decision.reason
        out = {"type": "reject", **({"message": message} if message else {})}
    allowed = pause.metadata.get("allowed") or []
    if allowed and out["type"] not in allowed:
        raise AgentError(f"the LangGraph interrupt {pause.id} ({pause.describe()}) does not allow "
                         f"{out['type']!r} (allowed_decisions: {', '.join(allowed)})")
    return out
