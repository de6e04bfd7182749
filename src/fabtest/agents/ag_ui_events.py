"""One AG-UI run folded into fabtest's reply: the events of the stream, in the order they come.

The events are validated by the protocol's own types (``ag_ui.core.Event``, a discriminated union),
so a stream that is not AG-UI is one line naming the event. What each event becomes:

- ``TEXT_MESSAGE_START`` / ``CONTENT`` / ``END`` (and ``TEXT_MESSAGE_CHUNK``): the assistant's messages;
  the reply is their text, a paragraph each;
- ``TOOL_CALL_START`` / ``ARGS`` / ``END`` (and ``TOOL_CALL_CHUNK``): a tool call, its arguments the
  JSON of the concatenated deltas; ``TOOL_CALL_RESULT``: its result (a call left without one is a
  frontend tool the run handed to the client: recorded without a result);
- ``STATE_SNAPSHOT`` / ``STATE_DELTA`` (RFC 6902 JSON Patch): the agent's state, which
  ``Then the state ...`` reads; ``MESSAGES_SNAPSHOT``: the thread's messages, sent back next run;
- ``RUN_FINISHED``: the outcome (``success``, ``interrupt``, ``cancelled``) and the tokens of ``usage``;
  each interrupt is a pause: an approval of the tool call it names (``toolCallId``: that call is asked,
  not made), else a question (its ``message``); ``RUN_ERROR``: the agent's failure, one line with its
  message and code.

Reasoning, steps, activities and custom events carry nothing a check reads and are skipped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import (
    EventType,
    MessagesSnapshotEvent,
    RunErrorEvent,
    RunFinishedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from fabtest.agents.base import AgentError
from fabtest.agents.frameworks import ToolLog
from fabtest.conversation import Pause, TokenUsage, ToolCall, jsonable

__all__ = ["AgUiRun"]


@dataclass
class AgUiRun:
    """The events of one run (one POST), folded; ``messages`` are the thread's messages after it."""

    where: str
    log: ToolLog
    state: Any
    messages: list[dict[str, Any]]
    texts: dict[str, list[str]] = field(default_factory=dict)  # assistant message id -> deltas
    calls: dict[str, dict[str, Any]] = field(default_factory=dict)  # tool call id -> {name, args, parent}
    results: list[dict[str, Any]] = field(default_factory=list)  # tool messages, as the wire has them
    outcome: str | None = None  # success, interrupt, cancelled; None until RUN_FINISHED
    interrupts: list[dict[str, Any]] = field(default_factory=list)
    usage: TokenUsage = field(default_factory=TokenUsage)
    model: str | None = None
    snapshot: bool = False  # the agent sent the thread's messages itself
    _last_text: str | None = None
    _last_call: str | None = None

    def add(self, event: Any) -> None:
        kind = event.type
        if isinstance(event, TextMessageStartEvent):
            self._text(event.message_id, event.role, None)
        elif isinstance(event, (TextMessageContentEvent, TextMessageChunkEvent)):
            self._text(event.message_id or self._last_text, getattr(event, "role", None), event.delta)
        elif isinstance(event, (ToolCallStartEvent, ToolCallChunkEvent)) and event.tool_call_id not in self.calls:
            call_id = event.tool_call_id or f"call-{len(self.calls) + 1}"
            self.calls[call_id] = {"name": event.tool_call_name or "unnamed", "args": [],
                                   "parent": event.parent_message_id}
            self._last_call = call_id
            if isinstance(event, ToolCallChunkEvent) and event.delta:
                self.calls[call_id]["args"].append(event.delta)
        elif isinstance(event, (ToolCallArgsEvent, ToolCallChunkEvent)):
            call = self.calls.get(event.tool_call_id or self._last_call or "")
            if call is not None and event.delta:
                call["args"].append(event.delta)
        elif kind == EventType.TOOL_CALL_END:
            self._parsed(event.tool_call_id)
        elif isinstance(event, ToolCallResultEvent):
            self._returned(event)
        elif isinstance(event, StateSnapshotEvent):
            self.state = jsonable(event.snapshot)
        elif isinstance(event, StateDeltaEvent):
            self._patch(event.delta)
        elif isinstance(event, MessagesSnapshotEvent):
            self.messages = [m.model_dump(by_alias=True, mode="json") for m in event.messages]
            self.snapshot = True
        elif isinstance(event, RunFinishedEvent):
            self._finished(event)
        elif isinstance(event, RunErrorEvent):
            code = f" ({event.code})" if event.code else ""
            raise AgentError(f"{self.where}: the run failed{code}: {event.message}")

    @property
    def text(self) -> str:
        return "\n\n".join(t for t in ("".join(parts) for parts in self.texts.values()) if t)

    def pauses(self) -> list[Pause]:
        """The run's interrupts as pauses: an interrupt naming one of the run's tool calls asks approval
        of that call (which is then not a call: it waits), any other is a question."""
        out: list[Pause] = []
        for interrupt in self.interrupts:
            meta: dict[str, Any] = {k: interrupt[k] for k in ("reason", "toolCallId", "responseSchema")
                                    if k in interrupt}
            call_id = interrupt.get("toolCallId") or ""
            call = self._parsed(call_id) if call_id in self.calls else None
            if call is not None:
                call["asked"] = True
                out.append(Pause(tool=call["name"], arguments=call["arguments"], question=interrupt.get("message"),
                                 id=interrupt["id"], metadata={**meta, "call_id": call_id}))
            else:
                out.append(Pause(question=interrupt.get("message") or interrupt["reason"], id=interrupt["id"],
                                 metadata=meta))
        return out

    def tool_calls(self) -> list[ToolCall]:
        """The run's calls (those an interrupt asks approval of left out), each with its result if one came."""
        for call_id, call in self.calls.items():
            if not call.get("asked"):
                self._logged(call_id)
        return self.log.finish()

    def thread(self) -> list[dict[str, Any]]:
        """The thread's messages after this run: the snapshot the agent sent, else the messages before
        it with this run's assistant messages (text and tool calls) and tool results added."""
        for call_id in list(self.calls):
            self._parsed(call_id)  # a call the stream never ended still counts
        if self.snapshot:
            return self.messages
        out = list(self.messages)
        by_id: dict[str, dict[str, Any]] = {}
        for message_id, parts in self.texts.items():
            by_id[message_id] = {"id": message_id, "role": "assistant", "content": "".join(parts)}
            out.append(by_id[message_id])
        for call_id, call in self.calls.items():
            parent = by_id.get(call["parent"] or "")
            if parent is None:
                parent = by_id.setdefault(call["parent"] or f"calls-{call_id}",
                                          {"id": call["parent"] or f"calls-{call_id}", "role": "assistant"})
                out.append(parent)
            parent.setdefault("toolCalls", []).append(
                {"id": call_id, "type": "function", "function": {"name": call["name"], "arguments": call["json"]}})
        return out + self.results

    # -- events ------------------------------------------------------------------------------------

    def _text(self, message_id: str | None, role: str | None, delta: str | None) -> None:
        if role not in (None, "assistant"):
            return
        key = message_id or self._last_text or "reply"
        self.texts.setdefault(key, [])
        self._last_text = key
        if delta:
            self.texts[key].append(delta)

    def _parsed(self, call_id: str) -> dict[str, Any] | None:
        """The call with its arguments parsed from the concatenated deltas (once)."""
        call = self.calls.get(call_id)
        if call is None or "json" in call:
            return call
        call["json"] = "".join(call["args"]) or "{}"
        try:
            arguments = json.loads(call["json"])
        except ValueError:
            raise AgentError(f"{self.where}: the arguments of tool call {call['name']!r} are not JSON: "
                             f"{call['json'][:120]!r}") from None
        call["arguments"] = arguments if isinstance(arguments, dict) else {"input": arguments}
        return call

    def _logged(self, call_id: str) -> None:
        call = self._parsed(call_id)
        if call is not None and not call.get("logged"):
            call["logged"] = True
            self.log.called(call_id, call["name"], call["arguments"])

    def _returned(self, event: ToolCallResultEvent) -> None:
        self._logged(event.tool_call_id)
        content = event.content if isinstance(event.content, str) else \
            "".join(getattr(part, "text", "") for part in event.content)
        self.log.returned(event.tool_call_id, content, name=self.calls.get(event.tool_call_id, {}).get("name"))
        self.results.append({"id": event.message_id, "role": "tool", "toolCallId": event.tool_call_id,
                             "content": content})

    def _patch(self, delta: list[Any]) -> None:
        import jsonpatch

        try:
            operations = [op.model_dump(by_alias=True, mode="json") if hasattr(op, "model_dump") else op
                          for op in delta]
            self.state = jsonpatch.apply_patch(self.state if self.state is not None else {}, jsonable(operations))
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
            raise AgentError(f"{self.where}: a STATE_DELTA does not apply to the state: {exc}") from None

    def _finished(self, event: RunFinishedEvent) -> None:
        outcome = event.outcome
        self.outcome = outcome.type if outcome is not None else "success"
        if outcome is not None and outcome.type == "interrupt":
            self.interrupts = [i.model_dump(by_alias=True, mode="json") for i in outcome.interrupts]
        for entry in event.usage or []:
            self.usage.add(TokenUsage(calls=1, input_tokens=entry.input_tokens or 0,
                                      output_tokens=entry.output_tokens or 0))
            self.model = entry.model or self.model
