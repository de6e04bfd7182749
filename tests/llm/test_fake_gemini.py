"""FakeGemini speaks enough of the Gemini REST API for the real google-genai client."""

from __future__ import annotations

import pytest
from google import genai
from google.genai import errors, types

from fabtest.testing import FakeGemini, FakeRequest, Reply

MODEL = "gemini-2.5-flash"


def _client(fake: FakeGemini) -> genai.Client:
    return genai.Client(api_key="x", http_options=types.HttpOptions(base_url=fake.base_url))


def test_text_reply_usage_and_record(fake: FakeGemini) -> None:
    fake.add_rule(r"capital of France", text="Paris, of course")
    client = _client(fake)  # keep a reference: a collected Client closes its connections
    response = client.models.generate_content(
        model=MODEL, contents="What is the capital of France?", config=types.GenerateContentConfig(system_instruction="Be brief.")
    )
    assert response.text == "Paris, of course"
    assert response.model_version == MODEL
    usage = response.usage_metadata
    assert (usage.prompt_token_count, usage.candidates_token_count, usage.total_token_count) == (8, 3, 11)
    [request] = fake.requests
    assert request.model == MODEL and not request.stream
    assert request.system == "Be brief." and request.prompt == "What is the capital of France?"
    assert request.text == "Be brief.\nWhat is the capital of France?"
    assert request.body["contents"][0]["parts"][0]["text"] == "What is the capital of France?"


def test_first_matching_rule_wins_times_and_default(fake: FakeGemini) -> None:
    fake.default_text = "no idea"
    once = fake.add_rule(r"hello", text="first", times=1)
    fake.add_rule(r"hel+o", text="second")
    client = _client(fake)
    answers = [client.models.generate_content(model=MODEL, contents=c).text for c in ("hello", "hello", "bye")]
    assert answers == ["first", "second", "no idea"]
    assert once.hits == 1


def test_json_mode_returns_rule_json_as_text(fake: FakeGemini) -> None:
    fake.add_rule(r"grade", json={"passed": True, "score": 3})
    config = types.GenerateContentConfig(
        response_mime_type="application/json", response_json_schema={"type": "object", "properties": {"passed": {"type": "boolean"}}}
    )
    client = _client(fake)
    response = client.models.generate_content(model=MODEL, contents="grade it", config=config)
    assert response.parsed == {"passed": True, "score": 3}
    assert fake.requests[0].wants_json and fake.requests[0].schema is not None


def test_streaming_sse_with_function_call(fake: FakeGemini) -> None:
    fake.add_rule(r"weather", text="Let me look that up.", function_call={"name": "get_weather", "args": {"city": "Oslo"}})
    client = _client(fake)
    chunks = list(client.models.generate_content_stream(model=MODEL, contents="weather in Oslo?"))
    assert len(chunks) >= 2
    text = "".join(part.text for c in chunks for part in c.candidates[0].content.parts if part.text)
    calls = [part.function_call for c in chunks for part in c.candidates[0].content.parts if part.function_call]
    assert text == "Let me look that up."
    assert [(c.name, c.args) for c in calls] == [("get_weather", {"city": "Oslo"})]
    assert chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP
    assert chunks[-1].usage_metadata.total_token_count > 0
    assert fake.requests[0].stream and "alt=sse" in fake.requests[0].path


def test_non_streaming_function_call(fake: FakeGemini) -> None:
    fake.add_rule(r"book", function_call={"name": "book_table", "args": {"people": 2}})
    client = _client(fake)
    response = client.models.generate_content(model=MODEL, contents="book a table")
    assert response.function_calls[0].name == "book_table"
    assert response.function_calls[0].args == {"people": 2}


def test_callback_rule_and_handler_mode() -> None:
    seen: list[FakeRequest] = []

    def handler(request: FakeRequest) -> str:
        seen.append(request)
        return f"echo: {request.prompt}"

    with FakeGemini(handler=handler) as fake:
        fake.add_rule(r"special", callback=lambda r: Reply(text="from rule"))
        fake.add_rule(r"pass", callback=lambda r: None)  # falls through to the handler
        client = _client(fake)
        assert client.models.generate_content(model=MODEL, contents="special").text == "from rule"
        assert client.models.generate_content(model=MODEL, contents="pass it on").text == "echo: pass it on"
    assert [r.prompt for r in seen] == ["pass it on"]


def test_env_var_base_url(fake: FakeGemini, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in fake.env().items():
        monkeypatch.setenv(name, value)
    fake.add_rule(r".", text="via env")
    client = genai.Client()
    assert client.models.generate_content(model=MODEL, contents="hi").text == "via env"
    assert fake.request_count == 1


def test_http_faults_and_pattern(fake: FakeGemini) -> None:
    fake.add_fault(429, times=1)
    fake.add_fault(500, times=None, pattern=r"doomed")
    client = _client(fake)
    with pytest.raises(errors.ClientError) as rate_limited:
        client.models.generate_content(model=MODEL, contents="hi")
    assert rate_limited.value.code == 429 and rate_limited.value.status == "RESOURCE_EXHAUSTED"
    assert client.models.generate_content(model=MODEL, contents="hi").text == "OK"
    for _ in range(2):
        with pytest.raises(errors.ServerError):
            client.models.generate_content(model=MODEL, contents="doomed")


def test_output_faults(fake: FakeGemini) -> None:
    fake.add_fault("malformed_json")
    fake.add_fault("empty")
    client = _client(fake)
    text = client.models.generate_content(model=MODEL, contents="x").text
    with pytest.raises(ValueError):
        import json

        json.loads(text)
    assert not client.models.generate_content(model=MODEL, contents="x").text
    with pytest.raises(ValueError):
        fake.add_fault("explode")


def test_stop_interrupts_timeout_fault() -> None:
    import threading
    import time

    fake = FakeGemini().start()
    fake.add_fault("timeout", delay_s=25)
    client = genai.Client(api_key="x", http_options=types.HttpOptions(base_url=fake.base_url, timeout=20_000))
    errors_seen: list[BaseException] = []

    def call() -> None:
        try:
            client.models.generate_content(model=MODEL, contents="slow")
        except BaseException as exc:  # noqa: BLE001
            errors_seen.append(exc)

    worker = threading.Thread(target=call)
    worker.start()
    while fake.in_flight == 0:
        time.sleep(0.01)
    started = time.monotonic()
    fake.stop()
    worker.join(5)
    assert time.monotonic() - started < 3
    assert not worker.is_alive() and errors_seen
