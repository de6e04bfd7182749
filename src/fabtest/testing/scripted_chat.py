"""The built-in agent's model, scripted: one offline script covers every model of a run.

:class:`fabtest.testing.FakeLLM` scripts the judge and the simulated user; ``agent_model`` makes it
the built-in agent's model too, so a feature that uses ``[tool.fabtest.agents.NAME]`` with a
``gemini``/``openai`` model runs its real tool loop (Python tools, MCP servers) with no key.
:class:`ScriptedChat` implements the built-in agent's chat-model protocol
(:class:`fabtest.agents.builtin_models.ChatModel`) from that script. It keeps the conversation in
Gemini's REST shape, so a function of the call receives the same :class:`FakeRequest` a
:class:`FakeGemini` rule would (``last_user_text``, ``function_responses``, ``tool_rounds``...).

A reply is a text, ``{"call": NAME, "args": {...}}``, ``{"calls": [{"name", "args"}, ...]}``, a
:class:`~fabtest.testing.fake_gemini.Reply`, or a function of the request returning one of those.
Replies are played in order, restarted for every agent (one per scenario); past the last one the
agent says ``then``, or, with no ``then``, it is an error naming what to script.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from fabtest.agents.builtin_models import FunctionCall, ModelTurn, ToolSpec
from fabtest.conversation import Attachment, Message, TokenUsage, jsonable
from fabtest.llm.base import LLMError
from fabtest.testing.fake_gemini import FakeRequest, Reply

__all__ = ["AgentScript", "ScriptedChat", "as_reply"]

#: A function of the request, or a fixed list of replies.
AgentScript = Callable[[FakeRequest], Any] | Sequence[Any]


def as_reply(value: Any, *, where: str = "agent_model") -> Reply:
    """One scripted reply in any of its forms as a :class:`Reply` (a ValueError names what is wrong)."""
    if isinstance(value, Reply):
        return value
    if isinstance(value, str):
        return Reply(text=value)
    if isinstance(value, dict):
        unknown = set(value) - {"text", "call", "args", "calls"}
        if unknown:
            raise ValueError(f"{where}: unknown key {sorted(unknown)[0]!r} in a reply (use text, call with args, "
                             "or calls: [{name, args}])")
        calls = [{"name": str(c.get("name", "")), "args": dict(c.get("args") or {})} for c in value.get("calls") or []]
        if "call" in value:
            calls.insert(0, {"name": str(value["call"]), "args": dict(value.get("args") or {})})
        if not calls and "text" not in value:
            raise ValueError(f"{where}: a reply needs text, call or calls")
        return Reply(text=value.get("text"), function_call=calls or None)
    raise ValueError(f"{where}: a reply is a text or a mapping with text, call/args or calls, not "
                     f"{type(value).__name__}")


class ScriptedChat:
    """A built-in agent's model answering from a script (see the module docstring)."""

    def __init__(self, script: AgentScript, *, then: str | None, model: str, system: str,
                 tools: list[ToolSpec]) -> None:
        self.model = model
        self._script = script
        self._then = then
        self._system = system
        self._tools = [{"functionDeclarations": [{"name": t.name, "description": t.description,
                                                  "parameters": t.schema} for t in tools]}] if tools else []
        self._contents: list[dict[str, Any]] = []
        self._played = 0

    def reset(self, messages: Sequence[Message]) -> None:
        self._contents = [{"role": "user" if m.role == "user" else "model", "parts": _parts(m.content, m.attachments)}
                          for m in messages]

    def add_user(self, text: str, attachments: Sequence[Attachment] = ()) -> None:
        self._contents.append({"role": "user", "parts": _parts(text, attachments)})

    def add_results(self, results: list[tuple[FunctionCall, Any, bool]]) -> None:
        parts = [{"functionResponse": {"name": call.name, "response": {"error": jsonable(result)} if is_error else
                                       _as_object(jsonable(result))}} for call, result, is_error in results]
        self._contents.append({"role": "user", "parts": parts})

    def generate(self) -> ModelTurn:
        reply = self._next()
        calls = [FunctionCall(id=f"fabtest-scripted-{self._played}-{i}", name=c["name"],
                              arguments=dict(c.get("args") or {}))
                 for i, c in enumerate(reply.function_calls())]
        text = reply.candidate_text()
        parts: list[dict[str, Any]] = ([{"text": text}] if text else []) + \
            [{"functionCall": {"name": c.name, "args": c.arguments}} for c in calls]
        self._contents.append({"role": "model", "parts": parts or [{"text": ""}]})
        return ModelTurn(text=text, calls=calls, usage=TokenUsage(calls=1))

    def _next(self) -> Reply:
        self._played += 1
        if callable(self._script):
            value = self._script(self._request())
            if value is None:
                raise LLMError("FakeLLM agent_model: the script's function returned nothing for this request")
            return _checked(value)
        if self._played <= len(self._script):
            return _checked(self._script[self._played - 1])
        if self._then is not None:
            return Reply(text=self._then)
        raise LLMError(f"FakeLLM agent_model: the agent's model was asked for reply {self._played}, and the script has "
                       f"{len(self._script)}: add replies, or give then: \"...\" for every later one")

    def _request(self) -> FakeRequest:
        body: dict[str, Any] = {"contents": list(self._contents)}
        if self._tools:
            body["tools"] = self._tools
        prompt = "\n".join(json.dumps(p, default=str) if "text" not in p else str(p["text"])
                           for c in self._contents for p in c.get("parts") or [])
        return FakeRequest(method="POST", path=f"/v1beta/models/{self.model}:generateContent", model=self.model,
                           api_version="v1beta", action="generateContent", body=body,
                           text="\n".join(p for p in (self._system, prompt) if p), system=self._system, prompt=prompt,
                           stream=False)


def _checked(value: Any) -> Reply:
    try:
        return as_reply(value)
    except ValueError as exc:
        raise LLMError(f"FakeLLM {exc}") from None


def _as_object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {"result": value}


def _parts(text: str, attachments: Sequence[Attachment]) -> list[dict[str, Any]]:
    """Gemini's REST parts: the text, then each file as ``inlineData`` (what the scripted fake records)."""
    from fabtest.agents.file_parts import b64

    return [{"text": text}, *({"inlineData": {"mimeType": f.mime_type, "data": b64(f.data)}} for f in attachments)]
