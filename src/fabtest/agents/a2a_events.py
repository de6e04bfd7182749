"""One A2A turn assembled from what the agent sends back: a message, a task, status and artifact updates.

An A2A agent answers ``SendMessage`` with a :class:`Message` (a direct reply) or works on a
:class:`Task`, reporting it as status updates (``working``, then ``completed``, ``input-required``,
``failed`` ...) and artifacts (streamed in chunks under one ``artifact_id``). This module folds those
events, in the order they come, into fabtest's reply:

- **text**: the direct message's text parts, then each artifact's text (its text parts joined: they are
  the chunks it was streamed in, which the server's stored task keeps as parts), then the final status
  message's (the question of an ``input-required`` task, a failure's reason); the ``working`` status
  messages are progress, used only when nothing else carried text;
- **files**: ``raw`` parts (and ``url`` parts holding a ``data:`` URI) of messages and artifacts, as
  :class:`~fabtest.conversation.Attachment` s named by the part's ``filename``; other URLs are listed in
  the turn's metadata (fabtest fetches nothing the agent links to);
- **tool calls**: A2A itself has no tool call. fabtest reads the convention Google ADK's A2A bridge
  writes (``to_a2a``, ``A2aAgentExecutor``): a ``data`` part whose metadata says ``adk_type`` (or ``type``)
  ``function_call`` with ``{id, name, args}``, and ``function_response`` with ``{id, name, response}``;
  ``tool_call`` / ``tool_response`` and ``arguments`` / ``result`` are read too. Any other data part is
  structured output and joins the text as JSON;
- **pauses**: an ``input-required`` status is the agent waiting for the user. A function call in its
  message (ADK's long-running tool, the way an ADK agent asks for approval) is asked, not made: it
  becomes an approval (:attr:`A2ATurn.asked`) rather than a tool call; without one the status
  message is a question. :mod:`fabtest.agents.a2a` sends the decision back in the same task.

The same message can reach the client twice (a status update's message is also in the task's
history), so messages are read once per ``message_id``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from a2a.types import Message, Part, Role, StreamResponse, Task, TaskState, TaskStatus
from google.protobuf.json_format import MessageToDict

from fabtest.agents.file_parts import from_data_uri
from fabtest.agents.frameworks import ToolLog
from fabtest.conversation import AgentResponse, Attachment

__all__ = ["FAILED", "PAUSED", "A2ATurn", "Asked", "state_name"]

_CALL_TYPES = {"function_call", "tool_call"}
_RESULT_TYPES = {"function_response", "tool_response"}
#: the state in which the task waits for the user: the next message continues it (same task id)
PAUSED = {"input-required"}
#: states that end the turn as the agent's failure, with how the failure line says it
FAILED = {"failed": "failed", "canceled": "was canceled",
          "auth-required": "needs authentication (auth-required), which fabtest cannot give"}


def state_name(state: int) -> str:
    """``TASK_STATE_INPUT_REQUIRED`` as the spec's ``input-required``."""
    name: str = TaskState.Name(state)
    return name.removeprefix("TASK_STATE_").lower().replace("_", "-")


@dataclass(frozen=True)
class Asked:
    """A tool call the agent waits to have approved: its id (the task's when the part has none)."""

    call_id: str
    name: str
    arguments: dict[str, Any]


@dataclass
class A2ATurn:
    """The events of one ``SendMessage`` / ``SendStreamingMessage`` call, folded in arrival order."""

    where: str
    log: ToolLog
    task_id: str = ""
    context_id: str = ""
    state: str | None = None
    replies: list[str] = field(default_factory=list)  # direct messages' text
    progress: list[str] = field(default_factory=list)  # working status messages' text
    final: str = ""  # the last status message's text in a state that is not working
    artifacts: dict[str, list[Part]] = field(default_factory=dict)
    artifact_names: dict[str, str] = field(default_factory=dict)
    files: list[Attachment] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    #: the tool calls an input-required status asks approval of (ADK's long-running calls)
    asked: list[Asked] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set)
    _asking: bool = False

    def add(self, event: StreamResponse) -> None:
        kind = event.WhichOneof("payload")
        if kind == "message":
            self._ids(event.message.task_id, event.message.context_id)
            self.replies.extend(self._read(event.message))
        elif kind == "task":
            self._task(event.task)
        elif kind == "status_update":
            self._ids(event.status_update.task_id, event.status_update.context_id)
            self._status(event.status_update.status)
        elif kind == "artifact_update":
            update = event.artifact_update
            self._ids(update.task_id, update.context_id)
            key = update.artifact.artifact_id or f"#{len(self.artifacts) + 1}"
            parts = self.artifacts.setdefault(key, [])
            if not update.append:  # a chunk that does not append replaces the artifact
                parts.clear()
            parts.extend(update.artifact.parts)
            if update.artifact.name:
                self.artifact_names[key] = update.artifact.name

    def response(self) -> AgentResponse:
        texts = list(self.replies)
        for key, parts in self.artifacts.items():  # an artifact's text parts are its chunks, streamed or not
            texts.append("".join(self._parts_text(parts, default_name=self.artifact_names.get(key) or key)))
        if self.final and self.final not in texts:
            texts.append(self.final)
        texts = [t for t in texts if t] or [t for t in self.progress if t]
        metadata: dict[str, Any] = {"context_id": self.context_id}
        if self.task_id:
            metadata["task_id"] = self.task_id
        if self.state:
            metadata["task_state"] = self.state
        if self.artifact_names:
            metadata["artifacts"] = list(self.artifact_names.values())
        if self.links:
            metadata["file_urls"] = list(self.links)
        return AgentResponse(text="\n\n".join(texts), tool_calls=self.log.finish(), metadata=metadata,
                             attachments=list(self.files))

    # -- events ------------------------------------------------------------------------------------

    def _ids(self, task_id: str, context_id: str) -> None:
        self.task_id = task_id or self.task_id
        self.context_id = context_id or self.context_id

    def _task(self, task: Task) -> None:
        self._ids(task.id, task.context_id)
        if task.HasField("status"):  # first: its message may be in the history too, and is read once
            self._status(task.status)
        for message in task.history:  # a non-streaming reply: the tool calls of the working updates
            if message.role == Role.ROLE_AGENT and message.message_id not in self._seen:
                self._seen.add(message.message_id)
                self._tool_parts(message.parts)
        for artifact in task.artifacts:
            key = artifact.artifact_id or f"#{len(self.artifacts) + 1}"
            self.artifacts[key] = list(artifact.parts)
            if artifact.name:
                self.artifact_names[key] = artifact.name

    def _status(self, status: TaskStatus) -> None:
        self.state = state_name(status.state)
        if not status.HasField("message"):
            return
        self._asking = self.state in PAUSED  # its tool calls wait for approval: they are asked, not made
        try:
            text = "\n".join(self._read(status.message))
        finally:
            self._asking = False
        if self.state in ("working", "submitted"):
            self.progress.append(text)
        elif text:
            self.final = text

    def _read(self, message: Message) -> list[str]:
        """The message's text (tool-call parts recorded, files kept); empty when already read."""
        if message.message_id:
            if message.message_id in self._seen:
                return []
            self._seen.add(message.message_id)
        return self._parts_text(list(message.parts), default_name="file")

    def _parts_text(self, parts: list[Part], *, default_name: str) -> list[str]:
        texts: list[str] = []
        for i, part in enumerate(parts):
            kind = part.WhichOneof("content")
            if kind == "text":
                texts.append(part.text)
            elif kind == "data" and not self._tool_part(part):
                texts.append(json.dumps(_whole(MessageToDict(part).get("data")), ensure_ascii=False))
            elif kind == "raw":
                name = part.filename or _numbered(default_name, i, part.media_type)
                self.files.append(Attachment.from_bytes(part.raw, name=name, mime_type=part.media_type or None))
            elif kind == "url":
                name = part.filename or _numbered(default_name, i, part.media_type)
                file = from_data_uri(part.url, name=name, where=self.where)
                if file is not None:
                    self.files.append(file)
                else:
                    self.links.append(part.url)
        return texts

    def _tool_parts(self, parts: Any) -> None:
        for part in parts:
            if part.WhichOneof("content") == "data":
                self._tool_part(part)

    def _tool_part(self, part: Part) -> bool:
        """Record a tool call or result written as a data part (module docstring); False for other data."""
        meta = MessageToDict(part.metadata) if part.HasField("metadata") else {}
        kind = meta.get("adk_type", meta.get("type"))
        if kind not in _CALL_TYPES | _RESULT_TYPES:
            return False
        data = _whole(MessageToDict(part).get("data"))
        data = data if isinstance(data, Mapping) else {}
        name = str(data.get("name") or "")
        call_id = str(data["id"]) if data.get("id") else None
        arguments = data.get("args", data.get("arguments"))
        if kind in _CALL_TYPES and self._asking:
            self.asked.append(Asked(call_id or self.task_id, name or "unnamed",
                                    arguments if isinstance(arguments, dict) else {}))
        elif kind in _CALL_TYPES:
            self.log.called(call_id, name or "unnamed", arguments)
        else:
            self.log.returned(call_id, data.get("response", data.get("result")), name=name or None)
        return True


def _whole(value: Any) -> Any:
    """A data part's numbers as JSON had them: protobuf's ``Value`` holds every number as a double, so
    ``80`` comes back ``80.0``; a whole number is an int again (``must call ... with: amount 80``)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {k: _whole(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole(v) for v in value]
    return value


def _numbered(stem: str, index: int, mime_type: str) -> str:
    """A name for a file part that has none: its artifact's name, its place and its type's extension."""
    import mimetypes

    return f"{stem}-{index + 1}{(mimetypes.guess_extension(mime_type) if mime_type else None) or ''}"
