"""A first attempt whose server stays silent past the endpoint's recent p95 is hedged: sent again in
parallel, the first answer kept, the other abandoned (llm/hedging.py), through GeminiLLM against
FakeGemini (its lean path's own HTTP client, and the google-genai client for a call with files) and
the OpenAI-compatible client against a local fake."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fabtest.conversation import Attachment
from fabtest.llm import hedging, stalls
from fabtest.llm.base import LLMSettings
from fabtest.llm.calls import LLMCall, llm_call
from fabtest.llm.gemini import GeminiLLM
from fabtest.llm.openai_compat import OpenAICompatLLM
from fabtest.llm.retry_budget import RetryBudget
from fabtest.testing import FakeGemini
from fabtest.testing.gemini_wire import FakeRequest

#: the hedge delay in these tests (the recent calls took 10 ms: the floor decides); the stall limit stays 5 s
DELAY_S = 0.2


class Held:
    """A FakeGemini handler: the n-th request waits ``holds[n - 1]`` seconds (cut short when the test
    ends), then answers ``"answer n"``, so a test can tell which attempt's answer was kept."""

    def __init__(self, *holds: float) -> None:
        self.holds = holds
        self.count = 0
        self.lock = threading.Lock()
        self.released = threading.Event()

    def __call__(self, request: FakeRequest) -> str:
        with self.lock:
            self.count += 1
            n = self.count
        if n <= len(self.holds):
            self.released.wait(self.holds[n - 1])
        return f"answer {n}"


@pytest.fixture
def held(fake: FakeGemini, monkeypatch: pytest.MonkeyPatch) -> Iterator[Held]:
    monkeypatch.setattr(stalls, "HEDGE_FLOOR_S", DELAY_S)
    handler = Held()
    fake.handler = handler
    yield handler
    handler.released.set()


def _llm(fake: FakeGemini, budget: RetryBudget | None = None, *, concurrency: int = 8) -> GeminiLLM:
    llm = GeminiLLM(LLMSettings(base_url=fake.base_url, timeout_s=30, max_retries=2, max_concurrency=concurrency),
                    api_key="k", backoff_base_s=0.01, backoff_max_s=0.02, retry_budget=budget)
    for _ in range(stalls.MIN_SAMPLES):  # the endpoint's recent calls: quick ones
        llm._latency.record(0.01)
    return llm


def _wait_for(condition: object, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.02)
    return False


def test_a_first_attempt_the_server_holds_is_hedged_and_the_second_answer_kept(fake: FakeGemini, held: Held) -> None:
    held.holds = (30.0,)  # the lost request: released when the test ends
    budget = RetryBudget(0.1)
    llm = _llm(fake, budget)
    started = time.monotonic()
    answer = llm.complete("hello")
    elapsed = time.monotonic() - started
    assert answer.text == "answer 2"
    assert elapsed < 4.0  # the hedge delay plus one call, not the 5 s stall limit plus a retry
    assert fake.request_count == 2 and llm._latency.hedges == (1, 1) and llm._latency.cut == 0
    assert budget.retries == budget.hedges == 1 and budget.refused == 0  # paid like a retry
    assert answer.usage.calls == 1  # one logical call
    assert "second's answer kept" in answer.metadata["hedged"]
    assert _wait_for(lambda: llm._semaphore.held == 0)


def test_an_answer_before_the_hedge_delay_sends_no_hedge(fake: FakeGemini, held: Held) -> None:
    budget = RetryBudget(0.1)
    llm = _llm(fake, budget)
    answer = llm.complete("hello")
    assert answer.text == "answer 1" and "hedged" not in answer.metadata
    assert fake.request_count == 1 and llm._latency.hedges == (0, 0) and budget.retries == 0


def test_a_spent_retry_budget_sends_no_hedge(fake: FakeGemini, held: Held) -> None:
    held.holds = (0.6,)  # three times the hedge delay, far under the stall limit
    budget = RetryBudget(0.0, floor=0)
    llm = _llm(fake, budget)
    assert llm.complete("hello").text == "answer 1"
    assert fake.request_count == 1 and llm._latency.hedges == (0, 0)
    assert budget.retries == 0 and budget.refused == 0  # a hedge not sent is not a refused retry


def test_no_hedge_when_every_slot_of_the_endpoint_is_taken(fake: FakeGemini, held: Held) -> None:
    """The first attempt holds the endpoint's only slot: a hedge would queue on fabtest's own limiter."""
    held.holds = (0.6,)
    budget = RetryBudget(0.1)
    llm = _llm(fake, budget, concurrency=1)
    assert llm.complete("hello").text == "answer 1"
    assert fake.request_count == 1 and llm._latency.hedges == (0, 0) and budget.retries == 0


def test_the_first_attempt_wins_when_it_answers_before_the_hedge(fake: FakeGemini, held: Held) -> None:
    held.holds = (0.6, 30.0)  # the first answers after the hedge was sent; the hedge would take 30 s
    llm = _llm(fake, RetryBudget(0.1))
    answer = llm.complete("hello")
    assert answer.text == "answer 1" and "first's answer kept" in answer.metadata["hedged"]
    assert fake.request_count == 2 and llm._latency.hedges == (1, 0)
    plain = llm.complete("hello")  # a third request, answered at once: one answer's tokens
    assert answer.usage.input_tokens == plain.usage.input_tokens and answer.usage.calls == 1
    # the hedge was abandoned: its socket shut, its thread gave back its slot long before its 30 s
    assert _wait_for(lambda: llm._semaphore.held == 0)


def test_when_both_attempts_are_held_the_stall_cut_retries(fake: FakeGemini, held: Held,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stalls, "FLOOR_S", 0.6)  # the stall limit: the hedge is given as long
    held.holds = (30.0, 30.0)
    budget = RetryBudget(0.1)
    llm = _llm(fake, budget)
    answer = llm.complete("hello")
    assert answer.text == "answer 3"  # the cut's retry, after the hedge had the stall limit too
    assert fake.request_count == 3 and llm._latency.hedges == (1, 0) and llm._latency.cut == 1
    assert budget.retries == 2 and budget.hedges == 1


def test_a_call_with_files_takes_the_sdk_path_and_is_hedged_on_its_own_latency(fake: FakeGemini,
                                                                              held: Held) -> None:
    """Calls with files are another class of requests (an image takes longer to read): the text
    calls' p95 does not hedge them; their own does."""
    held.holds = (0.6, 30.0)
    llm = _llm(fake, RetryBudget(0.1))  # the text calls' recent latency: 10 ms
    photo = Attachment.from_bytes(b"\x89PNG\r\n\x1a\nfake", name="photo.png")
    with llm_call(LLMCall("criteria", files=(photo,))):
        assert llm.complete("the user sent [attached: file 1]").text == "answer 1"  # waited 0.6 s, alone
        assert fake.request_count == 1
        for _ in range(stalls.MIN_SAMPLES):  # now the calls with files have a recent latency too
            llm._latency_files.record(0.01)
        assert llm.complete("the user sent [attached: file 1]").text == "answer 3"
    assert fake.request_count == 3 and llm._latency_files.hedges == (1, 1) and llm._latency.hedges == (0, 0)
    assert all(r.body["contents"][0]["parts"][1].get("inlineData") for r in fake.requests)  # the SDK's parts


def test_an_openai_compatible_call_is_hedged_too(fake_openai, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stalls, "HEDGE_FLOOR_S", DELAY_S)
    llm = OpenAICompatLLM(LLMSettings(provider="openai", base_url=fake_openai.base_url, timeout_s=30, max_retries=2),
                          backoff_base_s=0.01, backoff_max_s=0.02)
    for _ in range(stalls.MIN_SAMPLES):
        llm._latency.record(0.01)
    fake_openai.replies.append(3.0)  # the first request answers after 3 s
    started = time.monotonic()
    assert llm.complete("hello").text == "hello from openai"
    assert time.monotonic() - started < 2.5
    assert len(fake_openai.requests) == 2 and llm._latency.hedges == (1, 1)


def test_the_trace_span_says_the_call_was_hedged(fake: FakeGemini, held: Held) -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from fabtest import tracing

    held.holds = (30.0,)
    exporter = InMemorySpanExporter()
    tracing.enable(exporter=exporter)
    try:
        llm = tracing.traced(_llm(fake, RetryBudget(0.1)), "judge")
        assert llm is not None and llm.complete("hello").text == "answer 2"
        assert llm.complete("hello again").text == "answer 3"  # answered at once: not hedged
    finally:
        tracing.shutdown()
    hedged, plain = [s.attributes.get("fabtest.llm.hedged") for s in exporter.get_finished_spans()]
    assert hedged is not None and "asked again in parallel, the second's answer kept" in hedged
    assert plain is None


def test_a_silence_noticed_late_sends_no_hedge() -> None:
    """The thread noticed the silence more than LATE_S after the delay: it waited for this process's
    CPU, which a second request would only load more."""
    launched: list[object] = []

    class Launcher:
        def launch(self, race: object) -> None:
            launched.append(race)

    tracker = stalls.LatencyTracker()
    late = hedging._Race(Launcher(), tracker, lambda limit: None, 1.0)  # type: ignore[arg-type]
    late._silent(hedging.LATE_S + 0.1)
    on_time = hedging._Race(Launcher(), tracker, lambda limit: None, 1.0)  # type: ignore[arg-type]
    on_time._silent(0.01)
    on_time._silent(0.01)  # one hedge at most
    assert launched == [on_time]


def test_no_hedging_without_retries_or_on_a_transport_it_cannot_watch(fake: FakeGemini, fake_openai) -> None:
    import httpx

    no_retries = GeminiLLM(LLMSettings(base_url=fake.base_url, max_retries=0), api_key="k")
    no_retries.warm()
    assert no_retries._hedging is None
    custom = OpenAICompatLLM(LLMSettings(provider="openai", base_url=fake_openai.base_url),
                             transport=httpx.HTTPTransport(http2=False, retries=0))
    assert custom._hedging is not None  # a plain httpx transport: its connection pool is watched
    mocked = OpenAICompatLLM(LLMSettings(provider="openai", base_url=fake_openai.base_url),
                             transport=httpx.MockTransport(lambda request: httpx.Response(500)))
    assert mocked._hedging is None


def test_a_hedge_under_a_shared_limiter_takes_and_gives_back_its_own_slot(fake: FakeGemini, held: Held,
                                                                           tmp_path: Path) -> None:
    """Under -n the endpoint's slots are shared between processes and belong to the thread that took
    one: the hedge's thread takes its own and gives it back, the first attempt's thread keeps its."""
    from fabtest.llm import limits
    from fabtest.llm.shared_limit import SharedSemaphore

    held.holds = (30.0,)
    limits.share_across_processes(str(tmp_path / "slots"))
    try:
        llm = _llm(fake, RetryBudget(0.1))
        assert isinstance(llm._semaphore, SharedSemaphore)
        assert llm.complete("hello").text == "answer 2" and llm._latency.hedges == (1, 1)
        assert _wait_for(lambda: llm._semaphore.held == 0)
        assert llm.complete("hello").text == "answer 3"  # every slot usable again
    finally:
        limits.share_across_processes(None)
