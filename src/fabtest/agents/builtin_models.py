"""The model behind the built-in agent: one chat history with function calling, Gemini or OpenAI-compatible.

Each class keeps the conversation in its provider's own shape (google-genai ``Content`` objects,
chat-completions message dicts), so what the model sent comes back to it unchanged (Gemini's
thought signatures included). ``generate()`` is one model call with fabtest's retry policy; the
tool loop itself lives in :mod:`fabtest.agents.builtin`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from fabtest.agents.base import STAND_IN_KEY, AgentError
from fabtest.agents.file_parts import openai_content
from fabtest.conversation import Attachment, Message, TokenUsage, jsonable
from fabtest.errors import TransientFailure
from fabtest.llm.base import LLMError, LLMNotConfigured, LLMSettings
from fabtest.llm.gemini import gemini_api_key, gemini_base_url, missing_key_message
from fabtest.llm.limits import (
    RetryPolicy,
    call_with_retries,
    exception_is_connection_error,
    exception_is_timeout,
    is_retryable_status,
    provider_semaphore,
)
from fabtest.llm.openai_compat import openai_api_key, openai_base_url

__all__ = ["STAND_IN_KEY", "ChatModel", "FunctionCall", "GeminiChat", "ModelTurn", "OpenAIChat", "StandInModel",
           "ToolSpec", "build_chat_model", "gemini_parts"]


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the model sees it."""

    name: str
    description: str
    schema: dict[str, Any]


@dataclass
class FunctionCall:
    """A call the model asked for (``id`` is the provider's, or made up when it gives none)."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass
class ModelTurn:
    """One model answer: its text, the calls it asks for, and what it cost."""

    text: str
    calls: list[FunctionCall] = field(default_factory=list)
    usage: TokenUsage = field(default_factory=TokenUsage)


class ChatModel(Protocol):
    """A conversation with one model; the agent appends to it and asks for the next answer."""

    model: str

    def reset(self, messages: Sequence[Message]) -> None: ...
    def add_user(self, text: str, attachments: Sequence[Attachment] = ()) -> None: ...
    def generate(self) -> ModelTurn: ...
    def add_results(self, results: list[tuple[FunctionCall, Any, bool]]) -> None: ...


@dataclass(frozen=True)
class StandInModel:
    """A scripted fake that plays built-in agents' models, so one offline script covers every model.

    ``llm`` has ``chat_model(settings, system=..., tools=...)`` (:class:`fabtest.testing.FakeLLM`
    with ``agent_model`` scripted). ``always``: ``--fabtest-fake-llm`` replaces every model of the
    run; an ``offline_llm`` stands in only where no key is set, so a key still means the real model.
    """

    llm: Any
    always: bool

    def applies(self, settings: LLMSettings) -> bool:
        if self.always:
            return True
        return settings.provider == "gemini" and not gemini_api_key(settings)[0]

    def build(self, settings: LLMSettings, *, system: str, tools: list[ToolSpec]) -> ChatModel:
        return cast(ChatModel, self.llm.chat_model(settings, system=system, tools=tools))


def build_chat_model(settings: LLMSettings, *, system: str, tools: list[ToolSpec],
                     backoff_base_s: float) -> ChatModel:
    """Gemini or OpenAI-compatible; raises LLMNotConfigured when Gemini has no key."""
    if settings.provider == "openai":
        return OpenAIChat(settings, system=system, tools=tools, backoff_base_s=backoff_base_s)
    return GeminiChat(settings, system=system, tools=tools, backoff_base_s=backoff_base_s)


def gemini_parts(text: str, attachments: Sequence[Attachment]) -> list[Any]:
    """A message as google-genai parts: its text, then each file as inline data (``Part.from_bytes``)."""
    from google.genai import types

    return [types.Part(text=text), *(types.Part.from_bytes(data=f.data, mime_type=f.mime_type) for f in attachments)]


def _response_dict(result: Any, is_error: bool) -> dict[str, Any]:
    """What a tool returned, as the JSON object Gemini's function response needs."""
    value = jsonable(result)
    if is_error:
        return {"error": value}
    return value if isinstance(value, dict) else {"result": value}


class GeminiChat:
    """Gemini through google-genai with manual function calling (the SDK's automatic calling is off)."""

    def __init__(self, settings: LLMSettings, *, system: str, tools: list[ToolSpec], backoff_base_s: float) -> None:
        key = gemini_api_key(settings)[0]
        if not key:
            raise LLMNotConfigured(missing_key_message(settings).replace("LLM", "built-in agent"))
        from google import genai
        from google.genai import types

        self.model = settings.model
        self._settings = settings
        options = types.HttpOptions(timeout=max(1, int(settings.timeout_s * 1000)), retry_options=None)
        base_url = gemini_base_url(settings)
        if base_url:
            options.base_url = base_url
        self._client = genai.Client(api_key=key, http_options=options)
        declarations = [types.FunctionDeclaration(name=t.name, description=t.description,
                                                  parameters_json_schema=t.schema) for t in tools]
        self._config = types.GenerateContentConfig(
            system_instruction=system or None,
            temperature=settings.temperature,
            tools=[types.Tool(function_declarations=declarations)] if declarations else None,
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        )
        self._policy = RetryPolicy(max_retries=settings.max_retries, backoff_base_s=backoff_base_s)
        self._semaphore = provider_semaphore("gemini", base_url, settings.max_concurrency)
        self._contents: list[Any] = []

    def reset(self, messages: Sequence[Message]) -> None:
        from google.genai import types

        self._contents = [types.Content(role="user" if m.role == "user" else "model",
                                        parts=gemini_parts(m.content, m.attachments))
                          for m in messages]

    def add_user(self, text: str, attachments: Sequence[Attachment] = ()) -> None:
        from google.genai import types

        self._contents.append(types.Content(role="user", parts=gemini_parts(text, attachments)))

    def add_results(self, results: list[tuple[FunctionCall, Any, bool]]) -> None:
        from google.genai import types

        parts = [types.Part(function_response=types.FunctionResponse(
            id=call.id if not call.id.startswith("fabtest-") else None, name=call.name,
            response=_response_dict(result, is_error))) for call, result, is_error in results]
        self._contents.append(types.Content(role="user", parts=parts))

    def generate(self) -> ModelTurn:
        from google.genai import errors, types

        def attempt() -> Any:
            try:
                with self._semaphore:
                    return self._client.models.generate_content(model=self.model, contents=list(self._contents),
                                                                config=self._config)
            except errors.APIError as exc:
                if is_retryable_status(exc.code):
                    raise TransientFailure(f"HTTP {exc.code}: {exc.message}", status=exc.code) from exc
                raise LLMError(f"gemini {self.model}: HTTP {exc.code}: {exc.message}") from exc
            except Exception as exc:  # classified here
                if exception_is_timeout(exc):
                    raise TransientFailure(f"timed out after {self._settings.timeout_s:g}s", timeout=True) from exc
                if exception_is_connection_error(exc):
                    raise TransientFailure(f"connection error: {exc}") from exc
                raise

        response = call_with_retries(attempt, policy=self._policy, what=f"built-in agent gemini {self.model}")
        candidates = response.candidates or []
        content = candidates[0].content if candidates else None
        if content is None or not content.parts:
            content = types.Content(role="model", parts=[types.Part(text="")])
        self._contents.append(content)
        texts, calls = [], []
        for part in content.parts or []:
            if part.function_call is not None:
                fc = part.function_call
                calls.append(FunctionCall(id=fc.id or f"fabtest-{uuid.uuid4().hex[:8]}", name=fc.name or "?",
                                          arguments=dict(fc.args or {})))
            elif part.text and not part.thought:
                texts.append(part.text)
        meta = response.usage_metadata
        usage = TokenUsage(calls=1, input_tokens=int(getattr(meta, "prompt_token_count", 0) or 0),
                           output_tokens=int(getattr(meta, "candidates_token_count", 0) or 0)
                           + int(getattr(meta, "thoughts_token_count", 0) or 0))
        return ModelTurn(text="".join(texts), calls=calls, usage=usage)


class OpenAIChat:
    """Any OpenAI-compatible ``/chat/completions`` endpoint with ``tools`` (vLLM, llama.cpp, Ollama)."""

    def __init__(self, settings: LLMSettings, *, system: str, tools: list[ToolSpec], backoff_base_s: float) -> None:
        import httpx

        self.model = settings.model
        self._settings = settings
        self._base_url = openai_base_url(settings)
        key = openai_api_key(settings)
        self._http = httpx.Client(base_url=self._base_url, timeout=settings.timeout_s,
                                  headers={"Authorization": f"Bearer {key}"} if key else {})
        self._system = system
        self._tools = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                         "parameters": t.schema}} for t in tools]
        self._policy = RetryPolicy(max_retries=settings.max_retries, backoff_base_s=backoff_base_s)
        self._semaphore = provider_semaphore("openai", self._base_url, settings.max_concurrency)
        self._messages: list[dict[str, Any]] = []

    def reset(self, messages: Sequence[Message]) -> None:
        self._messages = [{"role": "user" if m.role == "user" else "assistant", "content": openai_content(m)}
                          for m in messages]

    def add_user(self, text: str, attachments: Sequence[Attachment] = ()) -> None:
        self._messages.append({"role": "user", "content": openai_content(Message("user", text, tuple(attachments)))})

    def add_results(self, results: list[tuple[FunctionCall, Any, bool]]) -> None:
        for call, result, is_error in results:
            self._messages.append({"role": "tool", "tool_call_id": call.id,
                                   "content": json.dumps(_response_dict(result, is_error))})

    def generate(self) -> ModelTurn:
        import httpx

        body: dict[str, Any] = {"model": self.model,
                                "messages": ([{"role": "system", "content": self._system}] if self._system else [])
                                + self._messages}
        if self._tools:
            body["tools"] = self._tools
        if self._settings.temperature is not None:
            body["temperature"] = self._settings.temperature

        def attempt() -> dict[str, Any]:
            try:
                with self._semaphore:
                    reply = self._http.post("/chat/completions", json=body)
            except httpx.TimeoutException as exc:
                raise TransientFailure(f"timed out after {self._settings.timeout_s:g}s", timeout=True) from exc
            except httpx.HTTPError as exc:
                raise TransientFailure(f"connection error to {self._base_url}: {exc}") from exc
            if reply.status_code != 200:
                detail = f"HTTP {reply.status_code}: {reply.text[:300]}"
                if is_retryable_status(reply.status_code):
                    raise TransientFailure(detail, status=reply.status_code)
                raise LLMError(f"openai {self.model} at {self._base_url}: {detail}")
            try:
                payload = reply.json()
                if not isinstance(payload["choices"][0]["message"], dict):  # "message": null
                    raise TypeError("choices[0].message is not an object")
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                raise LLMError(f"openai {self.model} at {self._base_url}: no choices[0].message object in "
                               f"{reply.text[:200]!r}") from exc
            return cast(dict[str, Any], payload)

        payload = call_with_retries(attempt, policy=self._policy, what=f"built-in agent openai {self.model}")
        message = payload["choices"][0]["message"]
        self._messages.append({k: v for k, v in message.items() if k in ("role", "content", "tool_calls")}
                              | {"role": "assistant"})
        calls = [openai_function_call(raw, where=f"openai {self.model}") for raw in message.get("tool_calls") or []]
        usage = payload.get("usage") or {}
        return ModelTurn(text=message.get("content") or "", calls=calls,
                         usage=TokenUsage(calls=1, input_tokens=int(usage.get("prompt_tokens") or 0),
                                          output_tokens=int(usage.get("completion_tokens") or 0)))


def openai_function_call(raw: Any, *, where: str) -> FunctionCall:
    """``{id, type: "function", function: {name, arguments: "<json>"}}`` as a FunctionCall."""
    function = raw.get("function") if isinstance(raw, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise AgentError(f"{where}: malformed tool call {str(raw)[:160]} (expected "
                         "{id, type: 'function', function: {name, arguments}})")
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            raise AgentError(f"{where}: tool call {function['name']!r} has arguments that are not JSON: "
                             f"{arguments[:160]!r}") from None
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        arguments = {"value": arguments}
    return FunctionCall(id=str(raw.get("id") or f"fabtest-{uuid.uuid4().hex[:8]}"), name=function["name"],
                        arguments=arguments)
