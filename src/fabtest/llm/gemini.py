"""Gemini through the google-genai SDK.

google-genai is imported lazily (it costs about half a second), so importing fabtest stays cheap
and runs without an LLM never pay for it. The SDK's own retries are off; fabtest retries with
:func:`fabtest.llm.limits.call_with_retries` so a call is never retried twice over.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from fabtest._internal import redaction
from fabtest.errors import TransientFailure
from fabtest.llm.base import Completion, LLMError, LLMNotConfigured, LLMSettings, json_schema
from fabtest.llm.connect_timeout import connect_timeout, shorten_connect
from fabtest.llm.gemini_rest import LeanTransport, direct_transport, lean_transport, raw_answer, request_body
from fabtest.llm.hedging import hedging, watch_reads
from fabtest.llm.inline_files import call_files, call_seed, gemini_contents
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
    from google import genai

T = TypeVar("T", bound=BaseModel)

#: Environment variables searched for the key, in order (after ``LLMSettings.api_key_env``).
GEMINI_KEY_ENV_VARS = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
#: Environment variable the SDK (and fabtest) read to point Gemini at another host.
GEMINI_BASE_URL_ENV = "GOOGLE_GEMINI_BASE_URL"


def gemini_api_key(settings: LLMSettings) -> tuple[str | None, str]:
    """Return ``(key, variable it came from)``; the key is None when no variable is set."""
    names = ((settings.api_key_env,) if settings.api_key_env else ()) + GEMINI_KEY_ENV_VARS
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            redaction.register(value)  # the key fabtest holds is a secret in every output
            return value, name
    return None, names[0]


def missing_key_message(settings: LLMSettings) -> str:
    """The reason shown when Gemini has no key: it names the variable to set."""
    wanted = f"{settings.api_key_env} or GEMINI_API_KEY" if settings.api_key_env else "GEMINI_API_KEY"
    return f"no Gemini API key: set {wanted} (or GOOGLE_API_KEY) to use the {settings.model} LLM"


def gemini_base_url(settings: LLMSettings) -> str | None:
    """``settings.base_url``, else ``GOOGLE_GEMINI_BASE_URL``, else None (the SDK's default host)."""
    return settings.base_url or os.environ.get(GEMINI_BASE_URL_ENV) or None


class GeminiLLM(ProviderBase):
    """The :class:`~fabtest.llm.base.LLM` protocol on Gemini; safe to share between threads.

    One SDK client lives per instance (created on first use). Calls to the same base URL share
    a process-wide semaphore of ``settings.max_concurrency``. ``backoff_base_s`` /
    ``backoff_max_s`` shape retry delays (tests set them near zero); ``bad_output_retries`` is
    how many times an empty or off-schema answer is asked for again.
    """

    provider = "gemini"

    def __init__(
        self,
        settings: LLMSettings | None = None,
        *,
        api_key: str | None = None,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 8.0,
        bad_output_retries: int = 2,
        retry_budget: RetryBudget | None = None,
    ) -> None:
        settings = settings or LLMSettings()
        key = api_key or gemini_api_key(settings)[0]
        if not key:
            raise LLMNotConfigured(missing_key_message(settings))
        self._api_key = key
        self._setup(settings, gemini_base_url(settings), backoff_base_s=backoff_base_s, backoff_max_s=backoff_max_s,
                    bad_output_retries=bad_output_retries, retry_budget=retry_budget)
        self._client: genai.Client | None = None
        self._lean: LeanTransport | None = None
        self._lean_built = False  # the lean path was looked for (it may be None: the SDK's calls then)
        # a first attempt silent past the recent p95 is sent again in parallel, on a client whose
        # reads are watched (_prepare); on one that cannot be, it is only cut (hedging.py)
        self._hedging = hedging(self)
        self._client_lock = threading.Lock()

    def close(self) -> None:
        """Release the HTTP clients' connections (optional; the process exit does it too)."""
        with self._client_lock:
            client, lean, self._client, self._lean, self._lean_built = self._client, self._lean, None, None, False
        for closing in (lean, client):
            if closing is not None:
                try:
                    closing.close()
                except Exception:  # closing is best effort
                    pass

    def warm(self) -> None:
        """Build the lean path now (the warm-up thread), not on the first call: google-genai is
        loaded only if the lean path cannot do without it (gemini_rest.direct_transport)."""
        self._lean_path()

    # -- internals -----------------------------------------------------------------------

    def _call(self, prompt: str, schema: type[T] | None, system: str | None,
              temperature: float | None) -> Completion[Any]:
        temperature = temperature if temperature is not None else self.settings.temperature
        files = call_files()  # a transcript's files, beside the lines naming them
        seed = call_seed()  # the simulated user's: the same on both arms of an A/B
        lean = None if files else self._lean_path()
        if lean is not None:  # the REST body written here, sent on the lean path's client (gemini_rest.py)
            body = request_body(prompt, system=system, temperature=temperature,
                                schema=json_schema(schema) if schema is not None else None, seed=seed)

            def send(limit: float | None) -> RawAnswer:
                try:
                    return raw_answer(lean.generate(self.model, body, timeout=limit), self.model)
                except Exception as exc:  # classified below
                    raise self._classify(exc) from exc

        else:  # files go as the SDK's inline parts
            from google.genai import types

            client = self._get_client()
            config = types.GenerateContentConfig(
                system_instruction=system or None,
                temperature=temperature,
                seed=seed,
                response_mime_type="application/json" if schema is not None else None,
                response_json_schema=json_schema(schema) if schema is not None else None,
            )
            contents = gemini_contents(prompt, files)

            def send(limit: float | None) -> RawAnswer:
                sent = config if limit is None else config.model_copy(
                    update={"http_options": types.HttpOptions(timeout=max(1, int(limit * 1000)))})
                try:
                    response = client.models.generate_content(model=self.model, contents=contents, config=sent)
                except Exception as exc:  # classified below
                    raise self._classify(exc) from exc
                return _raw_answer(response, self.model)

        latency = self._latency_files if files else self._latency  # calls with files: another p95
        fetch = cut_when_stalled(latency, self.settings.timeout_s, send, self._hedging)

        return complete_validated(
            fetch,
            schema=schema,
            policy=self._policy,
            bad_output_retries=self._bad_output_retries,
            what=f"gemini {self.model}",
            semaphore=self._semaphore,
            budget=self._budget,
        )

    def _probe_attempt(self) -> None:
        lean = self._lean_path()
        if lean is not None:
            body = request_body(PROBE_PROMPT, system=None, temperature=None, schema=None, max_output_tokens=16)
            try:
                lean.generate(self.model, body)
            except Exception as exc:  # classified below
                raise self._classify(exc) from exc
            return
        from google.genai import types

        config = types.GenerateContentConfig(max_output_tokens=16)
        try:
            self._get_client().models.generate_content(model=self.model, contents=PROBE_PROMPT, config=config)
        except Exception as exc:  # classified below
            raise self._classify(exc) from exc

    def _timeout_ms(self) -> int:
        return max(1, int(self.settings.timeout_s * 1000))

    def _lean_path(self) -> LeanTransport | None:
        """The judge's and simulator's lean transport: fabtest's own HTTP client where google-genai
        need not load, else the SDK client's; None when neither fits (``generate_content`` then)."""
        if self._lean_built:  # built: no lock (hundreds of threads calling at once queued on it)
            return self._lean
        with self._client_lock:
            if not self._lean_built:
                self._lean = direct_transport(self._api_key, self.base_url, timeout_s=self._timeout_ms() / 1000,
                                              limits=_pool_limits(self.settings.max_concurrency), wrap=self._prepare)
                self._lean_built = self._lean is not None
        if not self._lean_built:
            self._get_client()  # the SDK's client, and the lean path over it if its version has one
        return self._lean

    def _prepare(self, http: Any) -> None:
        """Settle a new HTTP client (fabtest's own or the SDK's): a dropped SYN is retried after
        seconds, not after the whole answer timeout (connect_timeout.py), and its reads are watched
        so a first attempt the server leaves silent can be hedged (hedging.py)."""
        shorten_connect(http, connect_timeout(self.settings.timeout_s))
        watch_reads(http)

    def _get_client(self) -> genai.Client:
        client = self._client
        if client is not None:  # built: no lock (hundreds of threads calling at once queued on it)
            return client
        with self._client_lock:
            if self._client is None:
                from google import genai
                from google.genai import types

                options = types.HttpOptions(timeout=self._timeout_ms(), retry_options=None,
                                            client_args={"limits": _pool_limits(self.settings.max_concurrency)})
                if self.base_url:
                    options.base_url = self.base_url
                built = genai.Client(api_key=self._api_key, http_options=options)
                self._prepare(getattr(getattr(built, "_api_client", None), "_httpx_client", None))
                if not self._lean_built:
                    self._lean = lean_transport(built)
                    self._lean_built = True
                self._client = built  # last: a caller that sees the client sees its lean path too
            return self._client

    def _classify(self, exc: Exception) -> Exception:
        """Map an SDK or transport exception to TransientFailure (retry) or LLMError (give up)."""
        errors = sys.modules.get("google.genai.errors")  # not loaded: the exception cannot be its APIError
        if errors is not None and isinstance(exc, errors.APIError):
            status = getattr(exc, "code", None)
            detail = f"HTTP {status} {exc.status or ''}: {exc.message or exc}".strip()
            if is_retryable_status(status):
                return TransientFailure(detail, status=status, retry_after_s=_retry_after(exc))
            hint = " (check the API key)" if status in (401, 403) else ""
            return LLMError(f"gemini {self.model}: {detail}{hint}")
        if exception_is_timeout(exc):
            return TransientFailure(f"timed out after {self.settings.timeout_s:g}s", timeout=True)
        if exception_is_connection_error(exc):
            return TransientFailure(f"connection error: {type(exc).__name__}: {exc}")
        return LLMError(f"gemini {self.model}: {type(exc).__name__}: {exc}")


def _pool_limits(max_concurrency: int) -> Any:
    """Connection-pool limits as large as fabtest's own cap on calls in flight.

    The SDK's HTTP client keeps at most 100 connections (20 kept alive) by default: a second,
    hidden cap under ``max_concurrency`` that held 96 conversations at once to ~100 judge calls in
    flight, and closed most connections after each call. The limits object is read by attribute,
    so httpx's and httpx2's (which recent google-genai uses) are interchangeable.
    """
    import importlib

    try:
        http: Any = importlib.import_module("httpx2")
    except ImportError:
        http = importlib.import_module("httpx")
    size = max(1, max_concurrency)
    return http.Limits(max_connections=size, max_keepalive_connections=size)


def _raw_answer(response: Any, model: str) -> RawAnswer:
    """Text of the first candidate (thoughts left out) and token counts."""
    texts: list[str] = []
    finish = None
    candidates = getattr(response, "candidates", None) or []
    if candidates:
        finish = getattr(candidates[0], "finish_reason", None)
        content = getattr(candidates[0], "content", None)
        for part in getattr(content, "parts", None) or []:
            if getattr(part, "text", None) and not getattr(part, "thought", False):
                texts.append(part.text)
    usage = getattr(response, "usage_metadata", None)
    metadata: dict[str, Any] = {}
    if finish is not None:
        metadata["finish_reason"] = str(getattr(finish, "value", finish))
    blocked = getattr(getattr(response, "prompt_feedback", None), "block_reason", None)
    if blocked is not None:  # the prompt itself was refused: there is no candidate at all
        metadata["block_reason"] = str(getattr(blocked, "value", blocked))
    version = getattr(response, "model_version", None)
    return RawAnswer(
        text="".join(texts),
        input_tokens=int(getattr(usage, "prompt_token_count", 0) or 0),
        output_tokens=int(getattr(usage, "candidates_token_count", 0) or 0)
        + int(getattr(usage, "thoughts_token_count", 0) or 0),
        model=version or model,
        metadata=metadata,
    )


def _retry_after(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    try:
        value = headers.get("retry-after") if headers is not None else None
        return float(value) if value else None
    except (TypeError, ValueError, AttributeError):
        return None
