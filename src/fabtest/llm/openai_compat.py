"""Any OpenAI-compatible ``/v1/chat/completions`` endpoint (vLLM, llama.cpp server, Ollama).

Talks plain HTTP through httpx, so no OpenAI SDK is needed. The base URL comes from
``LLMSettings.base_url``, else ``OPENAI_BASE_URL``, else ``http://127.0.0.1:8000/v1`` (vLLM's
default; llama.cpp serves ``http://127.0.0.1:8080/v1`` and Ollama ``http://127.0.0.1:11434/v1``).
The key (``LLMSettings.api_key_env``, else ``OPENAI_API_KEY``) is optional: local servers
usually need none. httpx is imported on first use. Retries, timeouts and usage behave exactly as for Gemini.
"""

from __future__ import annotations

import os
import re
import threading
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from fabtest._internal import redaction
from fabtest.errors import TransientFailure
from fabtest.llm.base import Completion, LLMError, LLMSettings
from fabtest.llm.base import json_schema as base_json_schema
from fabtest.llm.connect_timeout import connect_timeout
from fabtest.llm.hedging import hedging
from fabtest.llm.inline_files import call_files, call_seed, openai_content
from fabtest.llm.limits import (
    PROBE_PROMPT,
    ProviderBase,
    RawAnswer,
    complete_validated,
    exception_is_connection_error,
    exception_is_timeout,
    is_retryable_status,
)
from fabtest.llm.retry_budget import RetryBudget
from fabtest.llm.stalls import cut_when_stalled

if TYPE_CHECKING:  # pragma: no cover
    import httpx

T = TypeVar("T", bound=BaseModel)

DEFAULT_OPENAI_BASE_URL = "http://127.0.0.1:8000/v1"
OPENAI_BASE_URL_ENV = "OPENAI_BASE_URL"
OPENAI_KEY_ENV = "OPENAI_API_KEY"


def openai_base_url(settings: LLMSettings) -> str:
    """``settings.base_url``, else ``OPENAI_BASE_URL``, else the vLLM default, without a trailing slash."""
    return (settings.base_url or os.environ.get(OPENAI_BASE_URL_ENV) or DEFAULT_OPENAI_BASE_URL).rstrip("/")


def openai_api_key(settings: LLMSettings) -> str | None:
    """The bearer token, if any variable holds one."""
    for name in (settings.api_key_env, OPENAI_KEY_ENV):
        if name and os.environ.get(name, "").strip():
            redaction.register(os.environ[name].strip())  # the key fabtest holds is a secret in every output
            return os.environ[name].strip()
    return None


class OpenAICompatLLM(ProviderBase):
    """The :class:`~fabtest.llm.base.LLM` protocol on an OpenAI-compatible server; thread-safe.

    Structured output uses ``response_format={"type": "json_schema", ...}``. ``strict`` is true
    whenever the schema allows it (every property required, as OpenAI's strict mode demands);
    local servers constrain decoding to the schema either way.
    """

    provider = "openai"

    def __init__(
        self,
        settings: LLMSettings | None = None,
        *,
        api_key: str | None = None,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 8.0,
        bad_output_retries: int = 2,
        retry_budget: RetryBudget | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        settings = settings or LLMSettings(provider="openai")
        base_url = openai_base_url(settings)
        self._setup(settings, base_url, backoff_base_s=backoff_base_s, backoff_max_s=backoff_max_s,
                    bad_output_retries=bad_output_retries, retry_budget=retry_budget)
        key = api_key or openai_api_key(settings)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        import httpx  # deferred: importing fabtest should not pay for it

        pool = max(1, settings.max_concurrency)  # httpx's default (100) would cap calls under max_concurrency
        # a short connect timeout under the answer timeout: a dropped SYN is retried after seconds
        timeout = httpx.Timeout(settings.timeout_s, connect=connect_timeout(settings.timeout_s))
        self._http = httpx.Client(base_url=base_url, headers=headers, timeout=timeout, transport=transport,
                                  limits=httpx.Limits(max_connections=pool, max_keepalive_connections=pool))
        self._hedging = hedging(self, self._http)  # a first attempt silent past the recent p95 is hedged
        self._close_lock = threading.Lock()

    def close(self) -> None:
        with self._close_lock:
            self._http.close()

    def _call(self, prompt: str, schema: type[T] | None, system: str | None,
              temperature: float | None) -> Completion[Any]:
        files = call_files()  # a transcript's files, beside the lines naming them
        content = openai_content(prompt, files)
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": content}]
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        temp = temperature if temperature is not None else self.settings.temperature
        if temp is not None:
            body["temperature"] = temp
        if (seed := call_seed()) is not None:  # the simulated user's: the same on both arms of an A/B
            body["seed"] = seed
        if schema is not None:
            body["response_format"] = _response_format(schema)

        def send(limit: float | None) -> RawAnswer:
            return _raw_answer(self._post(body, timeout=limit), self.model)

        return complete_validated(
            # calls with files are another class of requests, with a p95 of their own
            cut_when_stalled(self._latency_files if files else self._latency, self.settings.timeout_s, send,
                             self._hedging),
            schema=schema,
            policy=self._policy,
            bad_output_retries=self._bad_output_retries,
            what=f"openai {self.model} at {self.base_url}",
            semaphore=self._semaphore,
            budget=self._budget,
        )

    def _probe_attempt(self) -> None:
        self._post({"model": self.model, "messages": [{"role": "user", "content": PROBE_PROMPT}], "max_tokens": 4})

    def _post(self, body: dict[str, Any], *, timeout: float | None = None) -> httpx.Response:
        """One POST to /chat/completions; a failure becomes TransientFailure (retry) or LLMError.
        ``timeout`` shortens the client's (a first attempt's stall limit, :mod:`fabtest.llm.stalls`)."""
        extra: dict[str, Any] = {}
        if timeout is not None:
            import httpx

            extra["timeout"] = httpx.Timeout(timeout, connect=connect_timeout(timeout))
        try:
            response = self._http.post("/chat/completions", json=body, **extra)
        except Exception as exc:  # classified below
            if exception_is_timeout(exc):
                raise TransientFailure(f"timed out after {timeout or self.settings.timeout_s:g}s",
                                       timeout=True) from exc
            if exception_is_connection_error(exc):
                raise TransientFailure(f"connection error to {self.base_url}: {exc}") from exc
            raise LLMError(f"openai {self.model}: {type(exc).__name__}: {exc}") from exc
        if response.status_code != 200:
            detail = f"HTTP {response.status_code}: {response.text[:300]}"
            if is_retryable_status(response.status_code):
                raise TransientFailure(detail, status=response.status_code, retry_after_s=_retry_after(response))
            raise LLMError(f"openai {self.model} at {self.base_url}: {detail}")
        return response


def _raw_answer(response: httpx.Response, model: str) -> RawAnswer:
    """Text of the first choice and the token counts; an unreadable body counts as empty."""
    try:
        payload = response.json()
        message = payload["choices"][0]["message"]
        text = message.get("content") or ""
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return RawAnswer(text="", model=model)
    usage = payload.get("usage") or {}
    finish = payload["choices"][0].get("finish_reason")
    return RawAnswer(
        text=text,
        input_tokens=int(usage.get("prompt_tokens") or 0),
        output_tokens=int(usage.get("completion_tokens") or 0),
        model=payload.get("model") or model,
        metadata={"finish_reason": finish} if finish else {},
    )


def _response_format(schema: type[BaseModel]) -> dict[str, Any]:
    json_schema = _closed(base_json_schema(schema))
    name = re.sub(r"[^A-Za-z0-9_-]", "_", schema.__name__)[:64] or "answer"
    return {"type": "json_schema", "json_schema": {"name": name, "schema": json_schema,
                                                   "strict": _strict_ok(json_schema)}}


def _closed(node: Any) -> Any:
    """Add ``additionalProperties: false`` to every object schema (what strict mode expects)."""
    if isinstance(node, dict):
        if node.get("type") == "object" and "properties" in node:
            node.setdefault("additionalProperties", False)
        for value in node.values():
            _closed(value)
    elif isinstance(node, list):
        for value in node:
            _closed(value)
    return node


def _strict_ok(node: Any) -> bool:
    """True when every object lists all its properties as required."""
    if isinstance(node, dict):
        if node.get("type") == "object" and "properties" in node:
            if set(node["properties"]) - set(node.get("required") or []):
                return False
        return all(_strict_ok(v) for v in node.values())
    if isinstance(node, list):
        return all(_strict_ok(v) for v in node)
    return True


def _retry_after(response: httpx.Response) -> float | None:
    try:
        value = response.headers.get("retry-after")
        return float(value) if value else None
    except ValueError:
        return None
