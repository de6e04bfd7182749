"""An agent behind an HTTP JSON endpoint.

Default wire format (change it with the field options):
request ``{"messages": [{"role": "user", "content": "..."}], "session_id": "..."}``;
response ``{"text": "...", "tool_calls": [{"name", "arguments", "result"}], "metadata": {...}}``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from fabtest.agents.base import AgentError, AgentTimeout, OnToolCall
from fabtest.conversation import AgentResponse, Message, ToolCall


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
    ) -> None:
        self.url = url
        self.timeout = float(timeout)
        self._fields = (messages_field, session_field, text_field, tool_calls_field, metadata_field)
        self._extra = dict(extra_body or {})
        self._session_id = str(uuid.uuid4())
        self._client = httpx.Client(headers=dict(headers or {}), timeout=self.timeout)

    def metadata(self) -> dict[str, Any]:
        return {"adapter": "http", "url": self.url, "session_id": self._session_id}

    def close(self) -> None:
        self._client.close()

    def around(self) -> Any:
        from contextlib import closing

        return closing(self)

    def chat(self, messages: Sequence[Message], on_tool_call: OnToolCall | None = None) -> AgentResponse:
        messages_field, session_field, text_field, calls_field, meta_field = self._fields
        body: dict[str, Any] = {**self._extra, messages_field: [{"role": m.role, "content": m.content} for m in messages]}
        if session_field:
            body[session_field] = self._session_id
        try:
            reply = self._client.post(self.url, json=body)
        except httpx.TimeoutException:
            raise AgentTimeout(f"HTTP agent at {self.url} did not answer within {self.timeout:g}s") from None
        except httpx.HTTPError as exc:
            raise AgentError(f"HTTP agent at {self.url} unreachable: {type(exc).__name__}: {exc}") from None
        if reply.status_code >= 400:
            raise AgentError(f"HTTP agent at {self.url} answered {reply.status_code}: {reply.text[:300]}")
        try:
            data = reply.json()
        except ValueError:
            raise AgentError(f"HTTP agent at {self.url} answered non-JSON: {reply.text[:200]!r}") from None
        text = _dig(data, text_field)
        if not isinstance(text, str):
            raise AgentError(f"HTTP agent at {self.url}: response has no string field {text_field!r}: {str(data)[:200]}")
        calls = [_tool_call(c, self.url) for c in (_dig(data, calls_field) or [])]
        if on_tool_call is not None:
            for call in calls:
                on_tool_call(call)
        meta = _dig(data, meta_field)
        return AgentResponse(text=text, tool_calls=calls, metadata=meta if isinstance(meta, dict) else {})


def _dig(data: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(data, Mapping):
            return None
        data = data.get(part)
    return data


def _tool_call(raw: Any, url: str) -> ToolCall:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
        raise AgentError(f"HTTP agent at {url}: malformed tool call {str(raw)[:120]}")
    args = raw.get("arguments") or {}
    return ToolCall(name=raw["name"], arguments=dict(args) if isinstance(args, Mapping) else {"value": args},
                    result=raw.get("result"), metadata=dict(raw.get("metadata") or {}))
