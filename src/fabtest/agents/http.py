"""An agent behind an HTTP JSON endpoint.

Default wire format (change it with the field options; README "Plugging in your agent"):
request ``{"messages": [{"role": "user", "content": "..."}], "session_id": "..."}``;
response ``{"text": "...", "tool_calls": [...], "metadata": {...}}``. ``tool_calls`` entries may be
in any shape :mod:`fabtest.agents.boundary` accepts (``{name, arguments}``, ``{name, args}``,
OpenAI's ``{id, type, function: {name, arguments: "<json>"}}``, with ``result``/``output``);
``metadata`` (model, request id, usage...) is recorded with the turn.

Files: a message with files carries ``"attachments": [{"name", "mime_type", "data": "<base64>"}]``
beside its ``content`` (``files_field`` renames the list, ``file_keys`` the three keys, as in
``file_keys = {name = "filename", mime_type = "type", data = "base64"}``); a response's list under
the same name becomes the turn's files.

Pauses (docs/how-to/approvals.md): a response's ``pauses`` list (``[{id, kind, tool, arguments,
question}]``) ends the turn on them; the agent's message carries them again in the next request,
and the user's message that decides them carries ``"decisions": [{pause_id, decision, reason,
answer, arguments}]``.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from fabtest.agents import trace_calls
from fabtest.agents.base import AgentError, AgentTimeout, OnToolCall, declared_tools
from fabtest.agents.boundary import coerce_response
from fabtest.agents.file_parts import b64, from_base64
from fabtest.conversation import AgentResponse, Attachment, Message


class HttpAgent:
    """POSTs the conversation to ``url`` each turn; one session id per agent (= per scenario)."""

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        messages_field: str = "messages",
        session_field: str | None = "session_id",
        text_field: str = "text",
        tool_calls_field: str = "tool_calls",
        metadata_field: str = "metadata",
        extra_body: Mapping[str, Any] | None = None,
        tools: Sequence[str] | None = None,
        traces: bool = False,
        files_field: str = "attachments",
        file_keys: Mapping[str, str] | None = None,
    ) -> None:
        self.url = url
        #: the tool names the agent declares (``tools = [...]``): steps naming another tool are usage errors
        self.tools = declared_tools(tools, where=f"HTTP agent at {url}")
        self.timeout = _positive_seconds(timeout, "timeout")
        #: the agent exports its OpenTelemetry spans to fabtest (``traces = true``): its tool calls are read
        #: from them (:mod:`fabtest.agents.trace_calls`)
        self.exports_traces = trace_calls.exports_flag(traces, f"HTTP agent at {url}")
        self._fields = (messages_field, session_field, text_field, tool_calls_field, metadata_field)
        self._extra = dict(extra_body or {})
        self._files = FileFields(files_field, file_keys, where=f"HTTP agent at {url}")
        self._session_id = str(uuid.uuid4())
        self._client = httpx.Client(headers=dict(headers or {}), timeout=self.timeout)

    def metadata(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"adapter": "http", "url": self.url, "session_id": self._session_id}
        if self.tools is not None:
            meta["tools"] = list(self.tools)
        if self.exports_traces:
            meta["traces"] = True
        return meta

    def close(self) -> None:
        self._client.close()

    def around(self) -> Any:
        from contextlib import closing

        return closing(self)

    def chat(self, messages: Sequence[Message], on_tool_call: OnToolCall | None = None) -> AgentResponse:
        messages_field, session_field, text_field, calls_field, meta_field = self._fields
        body: dict[str, Any] = {**self._extra, messages_field: [self._files.message(m) for m in messages]}
        if session_field:
            body[session_field] = self._session_id
        reply = post_json(self._client, self.url, body, timeout=self.timeout, label="HTTP agent")
        try:
            data = reply.json()
        except ValueError:
            raise AgentError(f"HTTP agent at {self.url} answered non-JSON: {reply.text[:200]!r}") from None
        text = _dig(data, text_field)
        if not isinstance(text, str):
            raise AgentError(f"HTTP agent at {self.url}: response has no string field {text_field!r}: "
                             f"{str(data)[:200]}")
        try:  # the same boundary as Python agents: every common tool-call shape, bad data named by field
            response = coerce_response({"text": text, "tool_calls": _dig(data, calls_field),
                                        "metadata": _dig(data, meta_field), "pauses": _dig(data, "pauses")})
        except AgentError as exc:
            raise AgentError(f"HTTP agent at {self.url}: {str(exc).replace('the agent returned bad data: ', '')}"
                             ) from None
        response.attachments = self._files.read(data)
        if on_tool_call is not None:
            for call in response.tool_calls:
                on_tool_call(call)
        return response


class FileFields:
    """Where an HTTP body carries files: the list's field name and the keys of each file."""

    def __init__(self, field: str, keys: Mapping[str, str] | None, *, where: str) -> None:
        known = {"name", "mime_type", "data"}
        keys = dict(keys or {})
        if (not isinstance(field, str) or not field or set(keys) - known
                or not all(isinstance(v, str) for v in keys.values())):
            raise TypeError(f"files_field must be a field name and file_keys a table of {sorted(known)} to field "
                            f"names, got {field!r} and {keys!r}")
        self.field = field
        self.name, self.mime_type, self.data = (keys.get(k, k) for k in ("name", "mime_type", "data"))
        self.where = where

    def message(self, m: Message) -> dict[str, Any]:
        out: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.attachments:
            out[self.field] = [{self.name: f.name, self.mime_type: f.mime_type, self.data: b64(f.data)}
                               for f in m.attachments]
        if m.pauses:
            out["pauses"] = [{"id": p.id, "kind": p.kind, "tool": p.tool, "arguments": p.arguments,
                              "question": p.question} for p in m.pauses]
        if m.decisions:
            out["decisions"] = [{"pause_id": d.pause_id, "decision": d.decision, "reason": d.reason,
                                 "answer": d.answer, "arguments": d.arguments} for d in m.decisions]
        return out

    def read(self, data: Any) -> list[Attachment]:
        raw = _dig(data, self.field)
        if raw is None:
            return []
        if not isinstance(raw, list) or not all(isinstance(f, Mapping) for f in raw):
            raise AgentError(f"{self.where}: {self.field!r} must be a list of {{{self.name}, {self.mime_type}, "
                             f"{self.data}}} objects, got {str(raw)[:200]}")
        files = []
        for i, f in enumerate(raw):
            name, content = f.get(self.name) or f"file-{i + 1}", f.get(self.data)
            if not isinstance(content, str):
                raise AgentError(f"{self.where}: {self.field}[{i}] has no base64 string {self.data!r}")
            files.append(from_base64(content, name=str(name), mime_type=f.get(self.mime_type), where=self.where))
        return files


def _positive_seconds(value: Any, name: str) -> float:
    """A finite number of seconds above zero; a TypeError naming ``name`` otherwise (the agent table
    turns it into one line before the run)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise TypeError(f"{name}: expected a positive, finite number of seconds, got {value!r}")
    return float(value)


def _dig(data: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(data, Mapping):
            return None
        data = data.get(part)
    return data


def post_json(client: httpx.Client, url: str, body: Mapping[str, Any], *, timeout: float, label: str) -> httpx.Response:
    """POST one turn; a timeout, an unreachable server or an error status is the agent's failure
    (shared by the HTTP and the OpenAI chat-completions adapters)."""
    try:
        reply = client.post(url, json=body, headers=trace_calls.headers())  # the turn's traceparent
    except httpx.TimeoutException:
        raise AgentTimeout(f"{label} at {url} did not answer within {timeout:g}s") from None
    except httpx.HTTPError as exc:
        raise AgentError(f"{label} at {url} unreachable: {type(exc).__name__}: {exc}") from None
    if reply.status_code >= 400:
        raise AgentError(f"{label} at {url} answered {reply.status_code}: {reply.text[:300]}")
    return reply
