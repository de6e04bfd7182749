"""The judge's and simulator's lean Gemini path (llm/gemini_rest.py) says on the wire exactly what
google-genai's ``generate_content`` says, and reads an answer the way the SDK's objects read it."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from fabtest.llm.base import LLMSettings
from fabtest.llm.gemini import GeminiLLM
from fabtest.llm.gemini import _raw_answer
from fabtest.llm.gemini_rest import raw_answer
from fabtest.testing import FakeGemini


class Verdict(BaseModel):
    passed: bool
    reason: str


def _sent(fake: FakeGemini, *, lean: bool, settings: LLMSettings, call: dict[str, Any]) -> tuple[Any, ...]:
    llm = GeminiLLM(settings, api_key="wire-key", backoff_base_s=0.01, backoff_max_s=0.02)
    llm.warm()
    assert llm._lean is not None  # this SDK version has the parts the lean path uses
    if not lean:
        llm._lean = None  # the SDK's generate_content, as before
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
        assert _sent(fake, lean=True, settings=settings, call=dict(call)) == \
            _sent(fake, lean=False, settings=settings, call=dict(call))


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
