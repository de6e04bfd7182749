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
"""

from __future__ import annotations

import json
from typing import Any

from fabtest.llm.limits import RawAnswer

__all__ = ["LeanTransport", "lean_transport", "raw_answer", "request_body"]


def request_body(prompt: str, *, system: str | None, temperature: float | None,
                 schema: dict[str, Any] | None, seed: int | None = None) -> dict[str, Any]:
    """The ``generateContent`` body the SDK sends for one user text (same keys, same order)."""
    body: dict[str, Any] = {"contents": [{"parts": [{"text": prompt}], "role": "user"}]}
    if system:
        body["systemInstruction"] = {"parts": [{"text": system}], "role": "user"}
    config: dict[str, Any] = {}
    if temperature is not None:
        config["temperature"] = temperature
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


class LeanTransport:
    """Sends a REST body with one SDK client's request builder, HTTP client and error type.

    What the SDK's builder and httpx's ``build_request`` make of a model's URL and headers is the
    same for every call of one client (its key, base URL and options), so they are made once per
    model and each call only adds its body and timeout: building them (parsing the URL, merging
    the client's headers) was a fifth of a call's client-side CPU at 1,000 conversations at once."""

    def __init__(self, api_client: Any, http: Any, api_error: Any, model_path: Any) -> None:
        self._api = api_client
        self._http = http
        self._api_error = api_error
        self._model_path = model_path
        self._targets: dict[str, tuple[Any, list[tuple[bytes, bytes]], float | None]] = {}

    def generate(self, model: str, body: dict[str, Any], *, timeout: float | None = None) -> dict[str, Any]:
        """POST ``<model>:generateContent``; the answer's JSON, or the SDK's ``APIError``. ``timeout``
        shortens the SDK client's (a first attempt's stall limit, :mod:`fabtest.llm.stalls`)."""
        import httpx

        url, headers, default_timeout = self._target(model)
        sent = httpx.Request("POST", url, headers=headers, content=json.dumps(body).encode("utf-8"),
                             extensions={"timeout": httpx.Timeout(default_timeout if timeout is None else timeout)
                                         .as_dict()})
        response = self._http.send(sent)
        self._api_error.raise_for_response(response)
        answer: dict[str, Any] = response.json()
        return answer

    def _target(self, model: str) -> tuple[Any, list[tuple[bytes, bytes]], float | None]:
        """The URL, headers (less the body's length) and timeout of ``model``'s calls, as the SDK's
        builder and the HTTP client's ``build_request`` make them."""
        target = self._targets.get(model)
        if target is None:
            path = f"{self._model_path(self._api, model)}:generateContent"  # "models/<model>", as the SDK names it
            request = self._api._build_request("post", path, {})
            built = self._http.build_request(method=request.method,
                                             url=self._api._httpx_url(request.url, is_async=False),
                                             content=b"", headers=request.headers, timeout=request.timeout)
            headers = [(k, v) for k, v in built.headers.raw if k.lower() != b"content-length"]
            target = self._targets[model] = (built.url, headers, request.timeout)
        return target


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
    return LeanTransport(api, http, errors.APIError, model_path)
