"""The judge's and simulator's Gemini calls on the REST wire, through the SDK's own HTTP client.

``client.models.generate_content`` spends most of an LLM call's client-side CPU turning its
pydantic request into the REST body (a generic converter walks every field of every model) and
the REST answer back into pydantic models: about 6 ms of the 8 ms a judge-sized call cost
(benchmarks/bench_llm_cpu.py), GIL-bound, which held one process to ~100 calls per second. A
judge or simulator call is always the same shape (one user text, an optional system
instruction, temperature, JSON mode and schema), so fabtest writes that body itself and reads
the answer's JSON directly. Everything else stays the SDK's: the URL and headers come from its
request builder (base URL, API version, key, user agent, server timeout), the request goes out on
its HTTP client (its pool limits, proxies and :mod:`fabtest.llm.connect_timeout`'s transport),
and an error status is raised by the SDK's own ``APIError``, so retries and error messages do not
change. A test compares this body with the one the SDK sends for the same call.

:func:`lean_transport` returns None when the SDK's client does not have these parts (another SDK
version): the caller then uses ``generate_content`` as before.

:func:`direct_transport` goes one step further for a plain API-key client: it builds the same URL,
headers and HTTP client without loading google-genai at all. Importing the SDK and building its
client cost 0.8 s of one core before a run's first judge or simulator call (its ``types`` module
alone, thousands of pydantic classes, 0.4 s), in every process of the run, most of a sequential
run's overhead above its calls. The SDK is then loaded only where it is needed: an agent built on
it, a call with files, an error status (raised by the SDK's ``APIError``, as before), or settings
the SDK treats specially (Vertex AI, mTLS, httpx2, ephemeral tokens). The wire test compares the
direct path's URL, headers and body with the SDK's for the same call.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable
from typing import Any

from fabtest.llm.limits import RawAnswer

__all__ = ["DEFAULT_BASE_URL", "LeanTransport", "direct_transport", "lean_transport", "raw_answer", "request_body"]

#: The Gemini API's host and version, as the SDK sets them for an API-key client without a base URL
DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com/"
_API_VERSION = "v1beta"


def request_body(prompt: str, *, system: str | None, temperature: float | None,
                 schema: dict[str, Any] | None, seed: int | None = None,
                 max_output_tokens: int | None = None) -> dict[str, Any]:
    """The ``generateContent`` body the SDK sends for one user text (same keys, same order)."""
    body: dict[str, Any] = {"contents": [{"parts": [{"text": prompt}], "role": "user"}]}
    if system:
        body["systemInstruction"] = {"parts": [{"text": system}], "role": "user"}
    config: dict[str, Any] = {}
    if temperature is not None:
        config["temperature"] = temperature
    if max_output_tokens is not None:
        config["maxOutputTokens"] = max_output_tokens
    if seed is not None:
        config["seed"] = seed
    if schema is not None:
        config["responseMimeType"] = "application/json"
        config["responseJsonSchema"] = schema
    body["generationConfig"] = config
    return body


def raw_answer(data: dict[str, Any], model: str) -> RawAnswer:
    """Text of the first candidate (thoughts left out) and token counts, from the REST JSON."""
    candidates = data.get("candidates") or []
    metadata: dict[str, Any] = {}
    texts: list[str] = []
    if candidates:
        first = candidates[0] or {}
        if first.get("finishReason") is not None:
            metadata["finish_reason"] = str(first["finishReason"])
        for part in (first.get("content") or {}).get("parts") or []:
            if part.get("text") and not part.get("thought"):
                texts.append(part["text"])
    blocked = (data.get("promptFeedback") or {}).get("blockReason")
    if blocked is not None:  # the prompt itself was refused: there is no candidate at all
        metadata["block_reason"] = str(blocked)
    usage = data.get("usageMetadata") or {}
    return RawAnswer(
        text="".join(texts),
        input_tokens=int(usage.get("promptTokenCount") or 0),
        output_tokens=int(usage.get("candidatesTokenCount") or 0) + int(usage.get("thoughtsTokenCount") or 0),
        model=data.get("modelVersion") or model,
        metadata=metadata,
    )


#: ``model`` -> (URL, headers less the body's length, default timeout in seconds) of its calls
Target = Callable[[str], tuple[Any, list[tuple[bytes, bytes]], float | None]]


class LeanTransport:
    """Sends a REST body to one client's model URLs, on its HTTP client, raising the SDK's error type.

    What the SDK's builder and httpx's ``build_request`` make of a model's URL and headers is the
    same for every call of one client (its key, base URL and options), so they are made once per
    model and each call only adds its body and timeout: building them (parsing the URL, merging
    the client's headers) was a fifth of a call's client-side CPU at 1,000 conversations at once."""

    def __init__(self, http: Any, target: Target, raise_for_response: Callable[[Any], None],
                 owned: bool = False) -> None:
        self._http = http
        self._target_of = target
        self._raise_for_response = raise_for_response
        self._owned = owned  # the HTTP client is this transport's own (direct_transport), closed with it
        self._targets: dict[str, tuple[Any, list[tuple[bytes, bytes]], float | None]] = {}

    def generate(self, model: str, body: dict[str, Any], *, timeout: float | None = None) -> dict[str, Any]:
        """POST ``<model>:generateContent``; the answer's JSON, or the SDK's ``APIError``. ``timeout``
        shortens the client's (a first attempt's stall limit, :mod:`fabtest.llm.stalls`)."""
        import httpx

        target = self._targets.get(model)
        if target is None:
            target = self._targets[model] = self._target_of(model)
        url, headers, default_timeout = target
        sent = httpx.Request("POST", url, headers=headers, content=json.dumps(body).encode("utf-8"),
                             extensions={"timeout": httpx.Timeout(default_timeout if timeout is None else timeout)
                                         .as_dict()})
        response = self._http.send(sent)
        if response.status_code != 200:  # the SDK's test: anything else is raised as its APIError
            self._raise_for_response(response)
        answer: dict[str, Any] = response.json()
        return answer

    def close(self) -> None:
        """Close the HTTP client if it is this transport's own (an SDK client closes its own)."""
        if self._owned:
            self._http.close()


def lean_transport(client: Any) -> LeanTransport | None:
    """The lean path over ``client`` (a ``genai.Client``), or None when it is not a plain API-key
    client of a known shape (Vertex AI with its own auth, or an SDK without these internals)."""
    from google.genai import _transformers, errors

    api = getattr(client, "_api_client", None)
    http = getattr(api, "_httpx_client", None)
    if api is None or http is None or getattr(api, "vertexai", False):
        return None
    if not all(hasattr(api, name) for name in ("_build_request", "_httpx_url")):
        return None
    if not (hasattr(http, "build_request") and hasattr(http, "send")):
        return None
    model_path = getattr(_transformers, "t_model", None)
    if model_path is None:
        return None

    def target(model: str) -> tuple[Any, list[tuple[bytes, bytes]], float | None]:
        path = f"{model_path(api, model)}:generateContent"  # "models/<model>", as the SDK names it
        request = api._build_request("post", path, {})
        built = http.build_request(method=request.method, url=api._httpx_url(request.url, is_async=False),
                                   content=b"", headers=request.headers, timeout=request.timeout)
        return built.url, _without_length(built.headers.raw), request.timeout

    return LeanTransport(http, target, errors.APIError.raise_for_response)


def direct_transport(api_key: str, base_url: str | None, *, timeout_s: float, limits: Any,
                     wrap: Callable[[Any], object] | None = None) -> LeanTransport | None:
    """The lean path on fabtest's own HTTP client, google-genai not loaded; None where the SDK would
    build something else than a plain API-key client (then the caller builds the SDK's client).

    The URL, headers and client settings are the SDK's for an API-key client (google-genai's
    ``BaseApiClient``): ``<base>/v1beta/models/<model>:generateContent``, the key in
    ``x-goog-api-key``, its version in ``user-agent`` and ``x-goog-api-client``, the server timeout
    in ``X-Server-Timeout``, redirects followed, the CA bundle of ``SSL_CERT_FILE`` or certifi.
    ``wrap`` adjusts the client once built (``connect_timeout.shorten_connect``)."""
    if _sdk_builds_something_else(api_key):
        return None
    try:
        from importlib.metadata import version

        sdk = version("google-genai")
    except Exception:  # not installed as a distribution: leave it to the SDK
        return None
    import httpx

    label = f"google-genai-sdk/{sdk} gl-python/{sys.version.split()[0]}"
    headers = {"Content-Type": "application/json", "x-goog-api-key": api_key, "user-agent": label,
               "x-goog-api-client": label}
    if timeout_s:
        headers["X-Server-Timeout"] = str(math.ceil(timeout_s))
    http = httpx.Client(timeout=timeout_s, limits=limits, follow_redirects=True, verify=_ssl_context())
    if wrap is not None:
        wrap(http)
    root = base_url or DEFAULT_BASE_URL

    def target(model: str) -> tuple[Any, list[tuple[bytes, bytes]], float | None]:
        name = model if model.startswith(("models/", "tunedModels/")) else f"models/{model}"
        url = f"{root.rstrip('/')}/{_API_VERSION}/{name}:generateContent"
        built = http.build_request("POST", url, content=b"", headers=headers)
        return built.url, _without_length(built.headers.raw), timeout_s

    return LeanTransport(http, target, _sdk_error, owned=True)


def _sdk_builds_something_else(api_key: str) -> bool:
    """The SDK would not build a plain httpx API-key client: Vertex AI, an mTLS endpoint, httpx2
    asked for, or an ephemeral token."""
    vertex = os.environ.get("GOOGLE_GENAI_USE_VERTEXAI", "").strip().lower() in ("1", "true", "yes", "on")
    mtls = os.environ.get("GOOGLE_API_USE_MTLS_ENDPOINT", "").strip().lower() == "always"
    client = os.environ.get("GOOGLE_GENAI_HTTP_CLIENT", "").strip().lower() not in ("", "auto", "httpx")
    return vertex or mtls or client or api_key.startswith("auth_tokens/")


def _ssl_context() -> Any:
    """The SDK's: the CA bundle named by ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``, else certifi's."""
    import ssl

    try:
        import certifi  # httpx's own dependency

        bundle: str | None = certifi.where()
    except ImportError:  # pragma: no cover - httpx requires it
        bundle = None
    return ssl.create_default_context(cafile=os.environ.get("SSL_CERT_FILE", bundle),
                                      capath=os.environ.get("SSL_CERT_DIR"))


def _sdk_error(response: Any) -> None:
    """An error status, raised as the SDK raises it (its ``APIError``: the same messages and
    classification as its own client); loads the SDK, which an error can afford."""
    from google.genai import errors

    errors.APIError.raise_for_response(response)


def _without_length(raw: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    return [(k, v) for k, v in raw if k.lower() != b"content-length"]
