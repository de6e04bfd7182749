"""OpenAICompatLLM against a tiny local OpenAI-compatible server."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from fabtest.llm.base import LLMBadOutput, LLMError, LLMSettings
from fabtest.llm.factory import build_llm
from fabtest.llm.openai_compat import OpenAICompatLLM
from fabtest.llm.openai_compat import DEFAULT_OPENAI_BASE_URL

FAST = {"backoff_base_s": 0.01, "backoff_max_s": 0.05}


class Verdict(BaseModel):
    passed: bool
    reason: str


class Loose(BaseModel):
    passed: bool
    note: str = ""


def _settings(url: str, **kw: object) -> LLMSettings:
    return LLMSettings(provider="openai", model="qwen2.5-7b", base_url=url, timeout_s=5, max_retries=3, **kw)  # type: ignore[arg-type]


def test_text_completion_and_usage(fake_openai) -> None:  # type: ignore[no-untyped-def]
    llm = OpenAICompatLLM(_settings(fake_openai.base_url), **FAST)
    result = llm.complete("hello", system="be nice", temperature=0.1)
    assert result.text == "hello from openai"
    assert result.usage.to_dict() == {"calls": 1, "input_tokens": 7, "output_tokens": 3}
    [body] = fake_openai.requests
    assert body["model"] == "qwen2.5-7b" and body["temperature"] == 0.1
    assert body["messages"] == [{"role": "system", "content": "be nice"}, {"role": "user", "content": "hello"}]
    assert "authorization" not in fake_openai.headers[0]


def test_json_schema_structured_output(fake_openai, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
    fake_openai.replies = ['{"passed": true, "reason": "ok"}', '{"passed": false}']
    llm = OpenAICompatLLM(_settings(fake_openai.base_url), **FAST)
    assert llm.complete_json("judge", Verdict).parsed == Verdict(passed=True, reason="ok")
    assert llm.complete_json("judge", Loose).parsed == Loose(passed=False)
    strict_format, loose_format = (body["response_format"] for body in fake_openai.requests)
    assert strict_format["type"] == "json_schema"
    assert strict_format["json_schema"]["name"] == "Verdict" and strict_format["json_schema"]["strict"] is True
    assert strict_format["json_schema"]["schema"]["additionalProperties"] is False
    assert loose_format["json_schema"]["strict"] is False  # "note" is optional: strict mode would reject it
    assert fake_openai.headers[0]["authorization"] == "Bearer sk-local"


def test_retries_then_success_and_gives_up(fake_openai) -> None:  # type: ignore[no-untyped-def]
    fake_openai.replies = [429, 503, "finally"]
    llm = OpenAICompatLLM(_settings(fake_openai.base_url), **FAST)
    assert llm.complete("x").text == "finally"
    assert len(fake_openai.requests) == 3
    fake_openai.replies = [500] * 10
    with pytest.raises(LLMError, match="500"):
        llm.complete("x")
    assert len(fake_openai.requests) == 3 + 4


def test_bad_json_then_bad_output(fake_openai) -> None:  # type: ignore[no-untyped-def]
    fake_openai.replies = ["not json", "", '{"passed": "maybe"}']
    llm = OpenAICompatLLM(_settings(fake_openai.base_url), bad_output_retries=2, **FAST)
    with pytest.raises(LLMBadOutput):
        llm.complete_json("judge", Verdict)
    assert len(fake_openai.requests) == 3


def test_client_error_not_retried(fake_openai) -> None:  # type: ignore[no-untyped-def]
    fake_openai.replies = [400]
    with pytest.raises(LLMError, match="400"):
        OpenAICompatLLM(_settings(fake_openai.base_url), **FAST).complete("x")
    assert len(fake_openai.requests) == 1


def test_base_url_from_env_and_default(fake_openai, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    assert OpenAICompatLLM(LLMSettings(provider="openai")).base_url == DEFAULT_OPENAI_BASE_URL
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url + "/")
    llm = build_llm(LLMSettings(provider="openai", model="llama3"), backoff_base_s=0.01)
    assert isinstance(llm, OpenAICompatLLM) and llm.base_url == fake_openai.base_url
    assert llm.complete("hi").text == "hello from openai"
