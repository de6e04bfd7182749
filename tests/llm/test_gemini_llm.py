"""GeminiLLM through the real google-genai client against FakeGemini."""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from pydantic import BaseModel

from fabtest.llm.base import LLMBadOutput, LLMError, LLMNotConfigured, LLMSettings, LLMTimeout
from fabtest.llm.gemini import GeminiLLM
from fabtest.llm.base import LLM
from fabtest.testing import FakeGemini


class Verdict(BaseModel):
    passed: bool
    reason: str


#: Retry fast in tests.
FAST = {"backoff_base_s": 0.01, "backoff_max_s": 0.05}


def _llm(settings: LLMSettings, **kwargs: object) -> GeminiLLM:
    return GeminiLLM(settings, **{**FAST, **kwargs})  # type: ignore[arg-type]


def test_text_completion_and_usage(fake: FakeGemini, settings: LLMSettings) -> None:
    fake.add_rule(r"greet", text="Hello there friend")
    llm = _llm(settings)
    assert isinstance(llm, LLM)
    result = llm.complete("please greet me", system="You are kind.", temperature=0.3)
    assert result.text == "Hello there friend"
    assert result.usage.to_dict() == {"calls": 1, "input_tokens": 6, "output_tokens": 3}
    assert result.model == settings.model
    [request] = fake.requests
    assert request.system == "You are kind." and request.temperature == 0.3
    assert request.headers.get("x-goog-api-key") == "test-key"


def test_json_completion_validated(fake: FakeGemini, settings: LLMSettings) -> None:
    fake.add_rule(r"Judge", json={"passed": False, "reason": "rude"})
    result = _llm(settings).complete_json("Judge this reply", Verdict)
    assert result.parsed == Verdict(passed=False, reason="rude")
    request = fake.requests[0]
    assert request.wants_json
    assert request.schema is not None and set(request.schema["properties"]) == {"passed", "reason"}


def test_429_twice_then_success(fake: FakeGemini, settings: LLMSettings) -> None:
    fake.add_fault(429, times=2)
    result = _llm(settings).complete("hi")
    assert result.text == "OK"
    assert fake.request_count == 3
    assert result.usage.calls == 1


def test_persistent_500_gives_up(fake: FakeGemini, settings: LLMSettings) -> None:
    fake.add_fault(500, times=None)
    with pytest.raises(LLMError) as caught:
        _llm(settings).complete("hi")
    assert not isinstance(caught.value, LLMTimeout)
    assert "500" in str(caught.value) and "4 attempt" in str(caught.value)
    assert fake.request_count == settings.max_retries + 1


def test_non_retryable_status_fails_at_once(fake: FakeGemini, settings: LLMSettings) -> None:
    fake.add_fault(403, times=None)
    with pytest.raises(LLMError, match="403"):
        _llm(settings).complete("hi")
    assert fake.request_count == 1


def test_malformed_json_retried_then_bad_output(fake: FakeGemini, settings: LLMSettings) -> None:
    fake.add_fault("malformed_json", times=None)
    with pytest.raises(LLMBadOutput, match="Verdict") as caught:
        _llm(settings, bad_output_retries=2).complete_json("Judge", Verdict)
    assert fake.request_count == 3
    assert caught.value.usage.calls == 1  # type: ignore[attr-defined]


def test_bad_output_then_good(fake: FakeGemini, settings: LLMSettings) -> None:
    fake.add_fault("wrong_schema", times=1)
    fake.add_fault("empty", times=1)
    fake.add_rule(r"Judge", json={"passed": True, "reason": "fine"})
    result = _llm(settings).complete_json("Judge", Verdict)
    assert result.parsed is not None and result.parsed.passed
    assert fake.request_count == 3 and result.usage.calls == 1
    assert result.usage.output_tokens > 0


def test_empty_text_is_bad_output(fake: FakeGemini, settings: LLMSettings) -> None:
    fake.add_fault("empty", times=None)
    with pytest.raises(LLMBadOutput, match="empty"):
        _llm(settings, bad_output_retries=1).complete("hi")


def test_timeout(fake: FakeGemini, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "k")
    fake.add_fault("timeout", times=None, delay_s=2)
    llm = _llm(LLMSettings(base_url=fake.base_url, timeout_s=0.5, max_retries=1))
    started = time.monotonic()
    with pytest.raises(LLMTimeout, match="timed out"):
        llm.complete("hi")
    assert time.monotonic() - started < 3
    assert fake.request_count == 2


def test_timeout_then_success(fake: FakeGemini, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "k")
    fake.add_fault("timeout", times=1, delay_s=2)
    llm = _llm(LLMSettings(base_url=fake.base_url, timeout_s=0.5, max_retries=2))
    assert llm.complete("hi").text == "OK"


def test_connection_refused_is_llm_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeGemini() as gone:
        url = gone.base_url
    llm = _llm(LLMSettings(base_url=url, timeout_s=1, max_retries=1), api_key="k")
    with pytest.raises(LLMError, match="connection"):
        llm.complete("hi")


def test_env_base_url_honoured(fake: FakeGemini, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", fake.base_url)
    monkeypatch.setenv("GOOGLE_API_KEY", "google-key")
    fake.add_rule(".", text="from env")
    llm = _llm(LLMSettings())
    assert llm.base_url == fake.base_url
    assert llm.complete("hi").text == "from env"
    assert fake.requests[0].headers.get("x-goog-api-key") == "google-key"


def test_gemini_key_preferred_and_api_key_env(fake: FakeGemini, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "gemini-key")
    monkeypatch.setenv("GOOGLE_API_KEY", "google-key")
    monkeypatch.setenv("MY_JUDGE_KEY", "judge-key")
    _llm(LLMSettings(base_url=fake.base_url)).complete("a")
    _llm(LLMSettings(base_url=fake.base_url, api_key_env="MY_JUDGE_KEY")).complete("b")
    assert [r.headers.get("x-goog-api-key") for r in fake.requests] == ["gemini-key", "judge-key"]


def test_missing_key() -> None:
    with pytest.raises(LLMNotConfigured, match="GEMINI_API_KEY"):
        GeminiLLM(LLMSettings())


def test_thread_safe_shared_instance(fake: FakeGemini, settings: LLMSettings) -> None:
    fake.add_rule(r"n=(\d+)", callback=lambda r: f"got {r.prompt}")
    llm = _llm(settings)
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda i: llm.complete(f"n={i}").text, range(24)))
    assert answers == [f"got n={i}" for i in range(24)]


def test_concurrency_limit_bounds_in_flight(fake: FakeGemini, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "k")
    fake.latency = 0.15
    # A unique path prefix gives this test its own process-wide semaphore key.
    url = f"{fake.base_url}/limit-{uuid.uuid4().hex[:8]}"
    settings = LLMSettings(base_url=url, max_concurrency=2)
    judge, simulator = _llm(settings), _llm(settings)  # two instances share one limit
    barrier = threading.Barrier(8)

    def call(i: int) -> str:
        barrier.wait()
        return (judge if i % 2 else simulator).complete(f"q{i}").text

    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(call, range(8))) == ["OK"] * 8
    assert fake.max_in_flight == 2
    assert fake.request_count == 8


def test_one_client_carries_as_many_calls_at_once_as_max_concurrency(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK's HTTP pool (100 connections by default) is no hidden cap under ``max_concurrency``:
    110 calls are all at the server at once (each waits there for the others)."""
    calls = 110
    barrier = threading.Barrier(calls, timeout=20)

    def handler(request: object) -> str:
        barrier.wait()  # breaks (and the calls fail) unless every call is in flight together
        return "ok"

    with FakeGemini(handler=handler) as server:
        monkeypatch.setenv("GEMINI_API_KEY", "test-key")
        llm = _llm(LLMSettings(base_url=server.base_url, timeout_s=30.0, max_retries=0, max_concurrency=128))
        with ThreadPoolExecutor(max_workers=calls) as pool:
            answers = list(pool.map(lambda i: llm.complete(f"call {i}").text, range(calls)))
        llm.close()
    assert answers == ["ok"] * calls
    assert server.max_in_flight == calls
