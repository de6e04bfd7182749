"""A first attempt far slower than the endpoint's recent calls is cut and asked again from the retry
budget (llm/stalls.py): a call that hangs once does not hold its scenario for the whole timeout."""

from __future__ import annotations

import pytest

from fabtest.conversation import Attachment
from fabtest.llm import stalls
from fabtest.llm.base import LLMSettings
from fabtest.llm.calls import LLMCall, llm_call
from fabtest.llm.gemini import GeminiLLM
from fabtest.llm.openai_compat import OpenAICompatLLM
from fabtest.llm.retry_budget import RetryBudget
from fabtest.testing import FakeGemini


@pytest.fixture
def quick_stalls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stalls, "FLOOR_S", 0.3)


def _llm(fake: FakeGemini, budget: RetryBudget | None = None, *, warm: bool = True) -> GeminiLLM:
    llm = GeminiLLM(LLMSettings(base_url=fake.base_url, timeout_s=30, max_retries=2), api_key="k",
                    backoff_base_s=0.01, backoff_max_s=0.02, retry_budget=budget)
    for _ in range(stalls.MIN_SAMPLES if warm else 0):  # the endpoint's recent calls: quick ones
        llm._latency.record(0.01)
    return llm


def test_a_call_that_hangs_once_is_cut_and_answered_by_its_retry(fake: FakeGemini, quick_stalls: None) -> None:
    budget = RetryBudget(0.1)
    llm = _llm(fake, budget)
    fake.add_fault("timeout", times=1, delay_s=30)  # the hung request: stop() wakes it at the end
    assert llm.complete("hello").text == "OK"
    assert fake.request_count == 2 and budget.retries == 1 and llm._latency.cut == 1


def test_a_slow_retry_waits_the_whole_timeout(fake: FakeGemini, quick_stalls: None) -> None:
    """Slow for a good reason: the first attempt is cut, the second is given the role's timeout."""
    llm = _llm(fake)
    fake.add_fault("timeout", times=2, delay_s=0.6)  # twice the stall limit, far under the timeout
    assert llm.complete("a long verdict").text == "OK"
    assert fake.request_count == 2 and llm._latency.cut == 1


def test_nothing_is_cut_before_the_endpoint_has_a_recent_latency(fake: FakeGemini, quick_stalls: None) -> None:
    llm = _llm(fake, warm=False)
    fake.add_fault("timeout", times=1, delay_s=0.6)
    assert llm.complete("hello").text == "OK"
    assert fake.request_count == 1 and llm._latency.cut == 0


def test_a_call_with_files_takes_the_sdk_path_and_is_cut_too(fake: FakeGemini, quick_stalls: None) -> None:
    llm = _llm(fake)
    for _ in range(stalls.MIN_SAMPLES):  # calls with files: a recent latency of their own
        llm._latency_files.record(0.01)
    fake.add_fault("timeout", times=1, delay_s=30)
    photo = Attachment.from_bytes(b"\x89PNG\r\n\x1a\nfake", name="photo.png")
    with llm_call(LLMCall("criteria", files=(photo,))):
        assert llm.complete("the user sent [attached: file 1]").text == "OK"
    assert fake.request_count == 2 and llm._latency_files.cut == 1 and llm._latency.cut == 0


def test_an_openai_compatible_call_that_hangs_once_is_cut_too(fake_openai, quick_stalls: None) -> None:
    llm = OpenAICompatLLM(LLMSettings(provider="openai", base_url=fake_openai.base_url, timeout_s=30, max_retries=2),
                          backoff_base_s=0.01, backoff_max_s=0.02)
    for _ in range(stalls.MIN_SAMPLES):
        llm._latency.record(0.01)
    fake_openai.replies.append(3.0)  # hangs for ten times the stall limit
    assert llm.complete("hello").text == "hello from openai"
    assert len(fake_openai.requests) == 2 and llm._latency.cut == 1


def test_the_limit_is_a_multiple_of_the_p95_with_a_floor() -> None:
    tracker = stalls.LatencyTracker()
    assert tracker.limits(60)[0] is None
    for i in range(100):
        tracker.record(1.0 if i < 95 else 9.0)  # 5% outliers do not move the p95
    assert tracker.p95() == 1.0
    for _ in range(stalls.WINDOW):
        tracker.record(2.0)
    assert tracker.limits(60)[0] == stalls.MULTIPLE * 2.0
    assert tracker.limits(5.0)[0] is None  # never longer than the role's own timeout
    tracker = stalls.LatencyTracker()
    for _ in range(stalls.MIN_SAMPLES):
        tracker.record(0.05)
    assert tracker.limits(60)[0] == stalls.FLOOR_S


def test_the_p95_is_sorted_again_only_every_few_answers() -> None:
    """Sorting the window on every first attempt cost 3-4 % of a busy process's CPU: the p95 is
    at most ``REFRESH`` answers old, then computed again."""
    tracker = stalls.LatencyTracker()
    for _ in range(stalls.MIN_SAMPLES):
        tracker.record(1.0)
    assert tracker.p95() == 1.0
    for _ in range(stalls.REFRESH - 1):
        tracker.record(10.0)
    assert tracker.p95() == 1.0  # not yet: a few answers old
    tracker.record(10.0)
    assert tracker.p95() == 10.0


def test_a_narrow_latency_is_hedged_only_well_above_its_median() -> None:
    """The p95 of a fixed-latency server is barely above its median: hedging there would send about
    5 % of calls twice for nothing. The delay is at least 1.25x the median; a spread-out latency
    keeps the paper's p95."""
    narrow = stalls.LatencyTracker()
    for n in range(100):
        narrow.record(2.0 + n / 1000)  # 2.000-2.099 s
    assert narrow.limits(60)[1] == pytest.approx(1.25 * 2.049)  # 1.25 x the median, not the p95 (2.094)
    spread = stalls.LatencyTracker()
    for n in range(100):
        spread.record(1.0 + n / 10)  # 1.0-10.9 s
    assert spread.limits(60)[1] == pytest.approx(10.4)  # the p95
