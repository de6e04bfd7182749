"""An agent that speaks the OpenAI chat-completions protocol itself: ``{openai = URL, model = "..."}``.

Many agent servers (and agent frameworks' "OpenAI-compatible" front ends) take a chat-completions
request and answer with a chat-completions response, running their own tools. fabtest sends the
conversation so far as ``messages`` (user and assistant turns, an optional ``system`` first) and
reads ``choices[0].message``: ``content`` is the reply, ``tool_calls`` (``{id, type: "function",
function: {name, arguments: "<json>"}}``) are recorded as the turn's tool calls, with a
``result`` or ``output`` next to ``function`` taken as the call's result when the server gives
one. ``usage`` (``prompt_tokens``, ``completion_tokens``) is reported in
``AgentResponse.metadata["usage"]``. ``URL`` is the endpoint itself (``.../chat/completions``) or
its base (``.../v1``). A message with files is sent as content parts (``image_url`` with a
``data:`` URI for an image, ``file`` with ``filename`` and ``file_data`` otherwise), and a reply
whose ``content`` is a list of such parts gives the turn its files.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from fabtest.agents.base import AgentError, OnToolCall, declared_tools
from fabtest.agents.builtin_models import openai_function_call
from fabtest.agents.file_parts import openai_content, openai_reply_files
from fabtest.agents.http import post_json
from fabtest.conversation import AgentResponse, Message, TokenUsage, ToolCall
from fabtest.errors import UsageError

__all__ = ["OpenAIChatAgent", "build_openai_chat_agent"]

_KEYS = {"openai", "model", "headers", "timeout", "system", "extra_body", "session_field", "tools"}


def build_openai_chat_agent(table: Mapping[str, Any], context: Mapping[str, Any], *, where: str) -> OpenAIChatAgent:
    """The registry's entry point: check the table's keys, one-line errors naming them."""
    name = context.get("agent_name")
    where = f"{where}: [tool.fabtest.agents.{name}]" if name else where
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise UsageError(f"{where}: unknown key {unknown[0]!r} for an OpenAI chat-completions agent "
                         f"(allowed: {', '.join(sorted(_KEYS))})")
    url = table["openai"]
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise UsageError(f"{where}: openai must be the endpoint's URL, like \"http://127.0.0.1:8000/v1\", got {url!r}")
    model = table.get("model", "")
    if not isinstance(model, str):
        raise UsageError(f"{where}: model must be a string, got {model!r}")
    timeout = table.get("timeout", 60)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise UsageError(f"{where}: timeout must be a positive number of seconds, got {timeout!r}")
    for key in ("headers", "extra_body"):
        if not isinstance(table.get(key, {}), Mapping):
            raise UsageError(f"{where}: {key} must be a table, got {table[key]!r}")
    return OpenAIChatAgent(url, model=model, headers=table.get("headers"), timeout=float(timeout),
                           system=str(table.get("system") or ""), extra_body=table.get("extra_body"),
                           session_field=table.get("session_field"),
                           tools=declared_tools(table.get("tools"), where=where))


class OpenAIChatAgent:
    """POSTs the conversation as chat-completions messages each turn; see the module docstring."""

    #: why this adapter never pauses (docs/how-to/approvals.md): an approval step names it
    pauses_unsupported = "an OpenAI-compatible chat endpoint has no way to pause for a decision"

    def __init__(self, url: str, *, model: str = "", headers: Mapping[str, str] | None = None,
                 timeout: float = 60.0, system: str = "", extra_body: Mapping[str, Any] | None = None,
                 session_field: str | None = None, tools: Sequence[str] | None = None) -> None:
        url = url.rstrip("/")
        self.url = url if url.endswith("/chat/completions") else f"{url}/chat/completions"
        self.model = model
        self.timeout = timeout
        self.system = system
        self._extra = dict(extra_body or {})
        self._session_field = session_field
        self._session_id = str(uuid.uuid4())
        self._usage = TokenUsage()
        self._client = httpx.Client(headers=dict(headers or {}), timeout=timeout)
        self.tools = list(tools) if tools is not None else None  # declared: steps naming another tool are errors

    def metadata(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"adapter": "openai-chat", "url": self.url, "model": self.model,
                                "usage": self._usage.to_dict()}
        if self.tools is not None:
            meta["tools"] = list(self.tools)
        return meta

    def close(self) -> None:
        self._client.close()

    def around(self) -> Any:
        from contextlib import closing

        return closing(self)

    def chat(self, messages: Sequence[Message], on_tool_call: OnToolCall | None = None) -> AgentResponse:
        wire = [{"role": "user" if m.role == "user" else "assistant", "content": openai_content(m)} for m in messages]
        body: dict[str, Any] = {**self._extra, "messages": ([{"role": "system", "content": self.system}]
                                                            if self.system else []) + wire}
        if self.model:
            body["model"] = self.model
        if self._session_field:
            body[self._session_field] = self._session_id
        reply = post_json(self._client, self.url, body, timeout=self.timeout, label="OpenAI chat agent")
        try:
            payload = reply.json()
            choice = payload["choices"][0]
            message = choice["message"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise AgentError(f"OpenAI chat agent at {self.url}: expected {{\"choices\": [{{\"message\": {{...}}}}]}}, "
                             f"got {reply.text[:200]!r}") from None
        if not isinstance(message, Mapping):  # "message": null (a filtered or failed completion)
            raise AgentError(f"OpenAI chat agent at {self.url}: choices[0].message is "
                             f"{'null' if message is None else type(message).__name__}, expected an object with "
                             "'content' (finish_reason: "
                             f"{choice.get('finish_reason') if isinstance(choice, Mapping) else None!r})")
        content = message.get("content")
        if content is not None and not isinstance(content, (str, list)):
            raise AgentError(f"OpenAI chat agent at {self.url}: choices[0].message.content is "
                             f"{type(content).__name__}, expected a string or a list of content parts")
        content, files = openai_reply_files(content, where=f"OpenAI chat agent at {self.url}")
        calls = [_tool_call(raw, self.url) for raw in (message.get("tool_calls") or [])]
        if on_tool_call is not None:
            for call in calls:
                on_tool_call(call)
        usage = _usage(payload.get("usage"))
        self._usage.add(usage)
        metadata: dict[str, Any] = {"usage": usage.to_dict()}
        for key, value in (("id", payload.get("id")), ("model", payload.get("model")),
                           ("finish_reason", choice.get("finish_reason"))):
            if value:
                metadata[key] = value
        return AgentResponse(text=content or "", tool_calls=calls, metadata=metadata, attachments=files)


def _tool_call(raw: Any, url: str) -> ToolCall:
    parsed = openai_function_call(raw, where=f"OpenAI chat agent at {url}")
    result = None
    for key in ("result", "output"):
        if isinstance(raw, Mapping) and key in raw:
            result = raw[key]
            break
    return ToolCall(name=parsed.name, arguments=parsed.arguments, result=result, metadata={"id": parsed.id})


def _usage(raw: Any) -> TokenUsage:
    if not isinstance(raw, Mapping):
        return TokenUsage(calls=1)
    try:
        return TokenUsage(calls=1, input_tokens=int(raw.get("prompt_tokens") or 0),
                          output_tokens=int(raw.get("completion_tokens") or 0))
    except (TypeError, ValueError):
        return TokenUsage(calls=1)
