"""The judge's and simulator's lean Gemini path (llm/gemini_rest.py) says on the wire exactly what
google-genai's ``generate_content`` says, and reads an answer the way the SDK's objects read it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest
from pydantic import BaseModel

from fabtest.llm.base import LLMSettings
from fabtest.llm.gemini import GeminiLLM
from fabtest.llm.gemini import _raw_answer
from fabtest.llm.gemini_rest import lean_transport, raw_answer
from fabtest.testing import FakeGemini


class Verdict(BaseModel):
    passed: bool
    reason: str


def _sent(fake: FakeGemini, *, path: str, settings: LLMSettings, call: dict[str, Any]) -> tuple[Any, ...]:
    """What the fake received and what the caller got, on one of the three paths: ``direct`` (the
    lean body on fabtest's own client, the SDK not loaded), ``sdk-lean`` (the lean body on the SDK's
    client) and ``sdk`` (the SDK's ``generate_content``)."""
    llm = GeminiLLM(settings, api_key="wire-key", backoff_base_s=0.01, backoff_max_s=0.02)
    llm.warm()
    assert llm._lean is not None and llm._lean._owned  # a plain API-key client: the direct path
    if path != "direct":
        llm._lean = lean_transport(llm._get_client()) if path == "sdk-lean" else None
        assert path == "sdk" or llm._lean is not None  # this SDK version has the parts the lean path uses
    fake.reset()
    fake.default_json = {"passed": True, "reason": "fine"}
    schema = call.pop("schema", None)
    result = llm.complete_json(schema=schema, **call) if schema else llm.complete(**call)
    [request] = fake.requests
    headers = {k: v for k, v in request.headers.items() if k not in ("host", "content-length")}
    return request.path, request.body, headers, result.text, result.usage.to_dict(), result.model


@pytest.mark.parametrize("call", [
    {"prompt": "Judge this", "schema": Verdict, "system": "You judge.", "temperature": 0.0},
    {"prompt": "hello", "system": None},
    {"prompt": "Say more", "schema": Verdict},
], ids=["json-system-temperature", "text", "json"])
@pytest.mark.parametrize("model", ["gemini-2.5-flash", "models/gemini-x"])
def test_the_lean_path_sends_and_reads_what_the_sdk_does(call: dict[str, Any], model: str) -> None:
    with FakeGemini() as fake:
        settings = LLMSettings(base_url=fake.base_url, model=model, temperature=0.4, timeout_s=7)
        sdk = _sent(fake, path="sdk", settings=settings, call=dict(call))
        assert _sent(fake, path="direct", settings=settings, call=dict(call)) == sdk
        assert _sent(fake, path="sdk-lean", settings=settings, call=dict(call)) == sdk


def test_the_probe_sends_what_the_sdk_sends() -> None:
    """The pre-flight probe (a few output tokens) also goes out on the direct path, unchanged."""
    with FakeGemini() as fake:
        settings = LLMSettings(base_url=fake.base_url, model="gemini-2.5-flash", timeout_s=7)
        seen = []
        for direct in (True, False):
            llm = GeminiLLM(settings, api_key="wire-key")
            if not direct:
                llm._get_client()
                llm._lean = None
            fake.reset()
            llm.probe()
            [request] = fake.requests
            seen.append((request.path, request.body,
                         {k: v for k, v in request.headers.items() if k not in ("host", "content-length")}))
        assert seen[0] == seen[1]


def test_the_direct_path_does_not_load_the_sdk() -> None:
    """A judge's call, its error status and the warm-up: google-genai stays unloaded until an error
    status is raised as its ``APIError`` (classified as before: a 400 is not retried)."""
    code = textwrap.dedent("""
        import sys
        from fabtest.llm.base import LLMError, LLMSettings
        from fabtest.llm.gemini import GeminiLLM
        from fabtest.testing import FakeGemini
        with FakeGemini() as fake:
            llm = GeminiLLM(LLMSettings(base_url=fake.base_url, timeout_s=7), api_key="k", backoff_base_s=0.01)
            llm.warm()
            fake.default_text = "fine"
            print(llm.complete("hello").text, "google.genai" in sys.modules)
            fake.add_fault(400)
            try:
                llm.complete("again")
            except LLMError as exc:
                print("HTTP 400" in str(exc), len(fake.requests), "google.genai" in sys.modules)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["fine", "False", "True", "2", "True"]


@pytest.mark.parametrize("answer", [
    {"candidates": [{"content": {"role": "model", "parts": [{"text": "thinking...", "thought": True},
                                                            {"text": "Hel"}, {"text": "lo"}]},
                     "finishReason": "STOP"}],
     "usageMetadata": {"promptTokenCount": 7, "candidatesTokenCount": 2, "thoughtsTokenCount": 5},
     "modelVersion": "gemini-2.5-flash-001"},
    {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 3}},
    {"candidates": [{"finishReason": "MAX_TOKENS", "content": {"parts": []}}]},
    {},
], ids=["thoughts", "blocked", "no-parts", "empty"])
def test_an_answer_is_read_as_the_sdk_reads_it(answer: dict[str, Any]) -> None:
    from google.genai import types

    assert raw_answer(answer, "m") == _raw_answer(types.GenerateContentResponse.model_validate(answer), "m")
