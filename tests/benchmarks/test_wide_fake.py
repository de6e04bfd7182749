"""The benchmarks' asyncio fake (benchmarks/_wide_fake.py) answers what FakeGemini answers (the same
responses through the real google-genai client), and holds many calls open at once on one thread: a
benchmark that switched fakes must measure fabtest, not a different wire format. The peer's
OpenAI-compatible fake (peer_scenario.py) is served by the same half, checked here too, since the
peer itself runs only in a scratch virtualenv."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from fabtest.testing import FakeGemini
from fabtest.testing.gemini_wire import FakeRequest, Reply

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
from _wide_fake import WideFake


def _handler(request: FakeRequest) -> Any:
    if "json" in request.text:
        return {"verdicts": [{"criterion": "polite", "verdict": "passed"}]}
    if "tool" in request.text:
        return Reply(text="calling it", function_call={"name": "finish", "args": {"turn": 3}})
    if "boom" in request.text:
        raise RuntimeError("boom")
    return None  # the default text


def _conversation(base_url: str) -> list[Any]:
    """What a client sees of each kind of call, response ids (random) left out."""
    from google import genai
    from google.genai import errors, types

    client = genai.Client(api_key="x", http_options=types.HttpOptions(base_url=base_url))
    seen: list[Any] = []
    for prompt in ("hello there", "json please", "tool now"):
        response = client.models.generate_content(model="gemini-2.5-flash", contents=prompt)
        seen.append(response.model_dump(mode="json", exclude={"response_id", "sdk_http_response"}))
    stream = client.models.generate_content_stream(model="gemini-2.5-flash", contents="tool in a stream of words")
    seen.append([chunk.model_dump(mode="json", exclude={"response_id", "sdk_http_response"}) for chunk in stream])
    seen.append(client.models.count_tokens(model="gemini-2.5-flash", contents="one two three").total_tokens)
    with pytest.raises(errors.ServerError) as raised:
        client.models.generate_content(model="gemini-2.5-flash", contents="boom")
    seen.append((raised.value.code, raised.value.message))
    seen.append(httpx.post(f"{base_url}/v1beta/models/m:unknownAction", content=b"{}").json())
    seen.append(httpx.get(f"{base_url}/v1beta/models").json())
    return seen


def test_it_answers_every_kind_of_call_as_fake_gemini_does() -> None:
    with FakeGemini(handler=_handler) as threaded:
        expected = _conversation(threaded.base_url)
        expected_texts = [r.text for r in threaded.requests]
    with WideFake(handler=_handler) as wide:
        assert _conversation(wide.base_url) == expected
        assert [r.text for r in wide.requests] == expected_texts
        assert wide.errors == ["callback raised RuntimeError: boom", "unknown path /v1beta/models/m:unknownAction"]
        wide.reset()
        assert wide.requests == [] and wide.errors == [] and wide.max_in_flight == 0


def test_calls_wait_their_latency_together_on_one_thread() -> None:
    """20 calls sent at once are all in flight at once (none waits for a thread), and a fake stopped
    while calls still wait returns at once."""
    with WideFake(latency=1.0) as fake:
        url = f"{fake.base_url}/v1beta/models/m:generateContent"
        body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
        start = threading.Barrier(20)
        answers: list[str] = []

        def call() -> None:
            with httpx.Client(timeout=30) as client:
                start.wait()
                answers.append(client.post(url, json=body).json()["candidates"][0]["content"]["parts"][0]["text"])

        threads = [threading.Thread(target=call) for _ in range(20)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert answers == ["OK"] * 20
        assert fake.max_in_flight == 20 and len(fake.requests) == 20
        assert fake.cpu_s() > 0
        fake.latency = 60.0
        dropped: list[type[Exception]] = []

        def wait_in_vain() -> None:
            try:
                httpx.post(url, json=body, timeout=120)
            except httpx.HTTPError as exc:
                dropped.append(type(exc))

        waiting = threading.Thread(target=wait_in_vain, daemon=True)
        waiting.start()
        for _ in range(500):  # bounded: until the call is waiting in the fake
            if len(fake.requests) == 21:
                break
            time.sleep(0.01)
    waiting.join(timeout=10)  # stop() closed its connection: the client sees it at once, not after 60 s
    assert dropped == [httpx.RemoteProtocolError]


def test_the_peers_wide_fake_answers_its_completions() -> None:
    """peer_scenario.py's OpenAI-compatible fake on the same serving half: a judge's tool call gets a
    ``finish_test`` call with arguments matching the tool's schema, a user turn gets text."""
    import peer_scenario

    server = peer_scenario._WideServer(0.01).start()
    try:
        schema = {"type": "object", "properties": {"verdict": {"enum": ["success", "failure"]},
                                                   "reasoning": {"type": "string"}}}
        tool = {"type": "function", "function": {"name": "finish_test", "parameters": schema}}
        judged = httpx.post(f"{server.base_url}/v1/chat/completions",
                            json={"model": "fake", "messages": [], "tools": [tool]}).json()
        spoken = httpx.post(f"{server.base_url}/v1/chat/completions", json={"model": "fake", "messages": []}).json()
    finally:
        server.stop()
    call = judged["choices"][0]["message"]["tool_calls"][0]["function"]
    assert (call["name"], call["arguments"]) == ("finish_test", '{"verdict": "success", "reasoning": "ok"}')
    assert spoken["choices"][0]["message"]["content"] == "Hi, I need help with my order."
    assert server.requests == 2 and server.max_in_flight == 1
