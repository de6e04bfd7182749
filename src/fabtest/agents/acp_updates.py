"""What one ACP prompt streams back, turned into a reply: text, tool calls, permission answers.

Kept apart from the process and protocol handling in :mod:`fabtest.agents.acp`: this is the
part that decides what a check sees. Agents that send ``rawInput`` give their arguments as they
are; the Gemini CLI does not, so :func:`rebuild_arguments` recovers what ``title``,
``locations`` and ``content`` show (docs/how-to/acp-agent.md).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from fabtest.conversation import Pause, ToolCall

__all__ = ["PERMISSIONS", "Collector", "Turn", "Waiting", "rebuild_arguments"]

#: Allow everything (like ``--approval-mode yolo``), deny everything, cancel the request, or pause:
#: the turn ends on the request and the scenario's user decides it (docs/how-to/approvals.md).
PERMISSIONS = ("allow", "deny", "cancel", "pause")
#: The Gemini CLI names tool calls ``<tool>__<tool>_<epoch ms>_<n>`` (0.61) or ``<tool>-<epoch ms>-<n>``.
_GEMINI_CALL_ID = re.compile(r"^(?P<name>[A-Za-z_][\w.-]*?)(?:__(?P=name))?[-_]\d{10,}[-_]\d+$")


class _HasPermission(Protocol):
    permission: str | Mapping[str, str]


@dataclass
class Waiting:
    """A permission request left to the scenario's user (``permission = "pause"``): the pause the turn
    ends on, and the future its answer (``allow`` or ``deny``; None: cancelled) resolves."""

    pause: Pause
    answer: asyncio.Future[str | None]


@dataclass
class Turn:
    """The updates of one prompt, in arrival order."""

    segments: list[str] = field(default_factory=lambda: [""])
    calls: dict[str, ToolCall] = field(default_factory=dict)
    updates: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: session updates the SDK could not read (it logs and drops them): the reply is incomplete
    malformed: list[str] = field(default_factory=list)
    #: permission requests that wait for the user, and the event set when one arrives
    waiting: list[Waiting] = field(default_factory=list)
    paused: asyncio.Event = field(default_factory=asyncio.Event)

    def text(self) -> str:
        return "\n".join(seg.strip() for seg in self.segments if seg.strip())

    def resumed(self) -> Turn:
        """The turn that goes on after the user decided: what the agent says and does from now on,
        with what is known of every call so far (a paused call's title, its arguments)."""
        return Turn(updates=self.updates)


class Collector:
    """The ACP client: collects session updates and answers permission requests."""

    def __init__(self, owner: _HasPermission) -> None:
        self.owner = owner  # its ``permission`` is read at each request, so a test may change it
        self.turn = Turn()

    def observe(self, event: Any) -> None:
        """A stream observer of the connection: notes each ``session/update`` the SDK will drop as
        invalid, so a turn with a malformed update is the agent's error, not a shorter reply that a
        check then fails (an ``assertion`` blaming the wrong side)."""
        message = getattr(event, "message", None)
        if getattr(getattr(event, "direction", None), "value", None) != "incoming" or not isinstance(message, dict) \
                or message.get("method") != "session/update":
            return
        from acp.schema import SessionNotification
        from pydantic import ValidationError

        try:
            SessionNotification.model_validate(message.get("params"))
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "params"
            self.turn.malformed.append(f"{where}: {err['msg']}")

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        kind = getattr(update, "session_update", None)
        if kind == "agent_message_chunk":
            text = getattr(update.content, "text", None)
            if isinstance(text, str):
                self.turn.segments[-1] += text
        elif kind in ("tool_call", "tool_call_update"):
            self._track(update)

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any) -> Any:
        from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

        call = self._track(tool_call)
        decision = _decide(self.owner.permission, call.name, getattr(tool_call, "kind", None))
        if decision == "pause":
            decision = await self._wait_for_user(call, options) or "cancel"
        wanted = {"allow": ("allow_once", "allow_always"), "deny": ("reject_once", "reject_always")}.get(decision, ())
        for option_kind in wanted:
            for option in options:
                if option.kind == option_kind:
                    call.metadata["permission"] = f"{decision}: {option.option_id}"
                    selected = AllowedOutcome(outcome="selected", option_id=option.option_id)
                    return RequestPermissionResponse(outcome=selected)
        call.metadata["permission"] = "cancelled"
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))

    async def _wait_for_user(self, call: ToolCall, options: list[Any]) -> str | None:
        """Leave the request to the scenario's user: the turn ends on it as a pause (the call is not
        the turn's: it runs, if ever, after the decision), and the answer comes with the next message."""
        turn = self.turn
        call_id = str(call.metadata.get("tool_id"))
        turn.calls.pop(call_id, None)
        pause = Pause(tool=call.name, arguments=dict(call.arguments), id=call_id,
                      question=call.metadata.get("title"),
                      metadata={"options": [{"id": o.option_id, "name": o.name, "kind": o.kind} for o in options]})
        waiting = Waiting(pause, asyncio.get_running_loop().create_future())
        turn.waiting.append(waiting)
        turn.paused.set()
        return await waiting.answer

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    def _track(self, update: Any) -> ToolCall:
        """Merge a ``tool_call``/``tool_call_update`` (or a permission request's call) into the turn."""
        call_id = str(update.tool_call_id)
        fields = self.turn.updates.setdefault(call_id, {})
        for name in ("title", "kind", "status", "content", "locations", "raw_input", "raw_output", "field_meta"):
            value = getattr(update, name, None)
            if value is not None:
                fields[name] = value
        call = self.turn.calls.get(call_id)
        if call is None:
            call = ToolCall(name="?", arguments={})
            self.turn.calls[call_id] = call
            self.turn.segments.append("")  # text after a tool call is a new paragraph
        _fill(call, call_id, fields)
        return call


def _fill(call: ToolCall, call_id: str, fields: dict[str, Any]) -> None:
    call.name = _tool_name(call_id, fields)
    call.arguments = rebuild_arguments(call.name, fields)
    call.result = _output(fields)
    meta = call.metadata
    meta["tool_id"] = call_id
    for key in ("title", "kind", "status"):
        if fields.get(key) is not None:
            meta[key] = fields[key]
    if fields.get("locations"):
        meta["locations"] = [loc.path for loc in fields["locations"]]


def _tool_name(call_id: str, fields: dict[str, Any]) -> str:
    """``_meta`` ``toolName`` if the agent sends one, else the Gemini CLI's id prefix, else the title."""
    meta = fields.get("field_meta") or {}
    for value in [meta, *(v for v in meta.values() if isinstance(v, dict))]:
        for key in ("toolName", "tool_name"):
            if isinstance(name := value.get(key), str):
                return name
    if m := _GEMINI_CALL_ID.match(call_id):
        return m.group("name")
    return str(fields.get("title") or fields.get("kind") or call_id)


def rebuild_arguments(name: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """A tool call's arguments: ``rawInput`` when sent, else what ``title``, ``locations`` and ``content`` show.

    Rebuilt keys: ``command`` (a shell call's title is its command line), ``file_path`` (the diff's
    path, else the first location) and ``content`` (the file's text after an edit: ``write_file``'s
    own argument; for ``replace`` the whole new file).
    """
    raw = fields.get("raw_input")
    if isinstance(raw, dict):
        return dict(raw)
    args: dict[str, Any] = {}
    if name == "run_shell_command" or fields.get("kind") == "execute":
        if fields.get("title"):
            args["command"] = fields["title"]
    for item in fields.get("content") or []:
        if getattr(item, "type", None) == "diff":
            args["file_path"] = item.path
            args["content"] = item.new_text
            break
    if "file_path" not in args and fields.get("locations"):
        args["file_path"] = fields["locations"][0].path
    return args


def _output(fields: Mapping[str, Any]) -> Any:
    """The tool's output: its text content blocks, else ``rawOutput``, else the diff's path."""
    texts, diffs = [], []
    for item in fields.get("content") or []:
        kind = getattr(item, "type", None)
        if kind == "content" and isinstance(getattr(item.content, "text", None), str):
            texts.append(item.content.text)
        elif kind == "diff":
            diffs.append(f"wrote {item.path}")
    if texts:
        return "\n".join(texts)
    if fields.get("raw_output") is not None:
        return fields["raw_output"]
    return "\n".join(diffs) or None


def _decide(permission: str | Mapping[str, str], name: str, kind: str | None) -> str:
    if isinstance(permission, str):
        return permission
    for key in (name, kind or "", "*"):
        if key in permission:
            return permission[key]
    return "allow"
