"""The suite-wide retry budget, through the real google-genai client against FakeGemini (and the
OpenAI-compatible provider against its fake): retries stop once the budget is spent, re-asks pay
from it too, and the provider probe used by the pre-flight check answers or says why not."""

from __future__ import annotations

import pytest

from fabtest.report.console import render_summary
from fabtest.llm.base import LLMBadOutput, LLMError, LLMSettings
from fabtest.llm.gemini import GeminiLLM
from fabtest.llm.openai_compat import OpenAICompatLLM
from fabtest.llm.retry_budget import BUDGET_SPENT_MARKER, RetryBudget, RetryBudgetSpent, budget_line
from fabtest.llm.limits import PROBE_PROMPT
from fabtest.testing import FakeGemini

FAST = {"backoff_base_s": 0.01, "backoff_max_s": 0.05}


def _llm(settings: LLMSettings, budget: RetryBudget | None) -> GeminiLLM:
    return GeminiLLM(settings, retry_budget=budget, **FAST)  # type: ignore[arg-type]


def test_budget_allows_the_floor_then_a_fraction_of_the_calls() -> None:
    budget = RetryBudget(0.1, floor=2)
    for _ in range(30):
        budget.record_call()
    assert budget.allowed == 3  # 10 % of 30 calls beats the floor of 2
    assert [budget.spend() for _ in range(4)] == [True, True, True, False]
    assert budget.spent and budget.retries == 3 and budget.refused == 1
    for _ in range(10):
        budget.record_call()
    assert budget.spend()  # 40 calls: a fourth retry is paid for again


@pytest.mark.parametrize("ratio", [float("inf"), float("nan"), -0.1])
def test_budget_refuses_a_ratio_that_is_not_a_finite_fraction(ratio: float) -> None:
    with pytest.raises(ValueError, match="retry_budget"):
        RetryBudget(ratio)


def test_a_429_storm_stops_retrying_once_the_budget_is_spent(fake: FakeGemini, settings: LLMSettings) -> None:
    fake.add_fault(429, times=None)
    budget = RetryBudget(0.0, floor=1)
    llm = _llm(settings, budget)
    with pytest.raises(RetryBudgetSpent) as first:
        llm.complete("first")
    assert fake.request_count == 2  # one attempt, the one retry the budget allows, then no more
    with pytest.raises(RetryBudgetSpent) as second:
        llm.complete("second")
    assert fake.request_count == 3  # not retried at all
    for caught in (first, second):
        message = str(caught.value)
        assert isinstance(caught.value, LLMError) and "429" in message and BUDGET_SPENT_MARKER in message
        assert "retry_budget = 0" in message


def test_without_a_budget_every_call_keeps_its_own_retries(fake: FakeGemini, settings: LLMSettings) -> None:
    fake.add_fault(429, times=None)
    llm = _llm(settings, None)
    for _ in range(2):
        with pytest.raises(LLMError) as caught:
            llm.complete("hi")
        assert not isinstance(caught.value, RetryBudgetSpent)
    assert fake.request_count == 2 * (settings.max_retries + 1)


def test_a_healthy_call_pays_nothing_and_counts_as_a_call(fake: FakeGemini, settings: LLMSettings) -> None:
    budget = RetryBudget(0.5, floor=0)
    llm = _llm(settings, budget)
    for _ in range(4):
        assert llm.complete("hi").text == "OK"
    assert (budget.calls, budget.retries, budget.allowed) == (4, 0, 2)


def test_re_asking_for_an_empty_answer_pays_from_the_budget(fake: FakeGemini, settings: LLMSettings) -> None:
    fake.add_fault("empty", times=None)
    with pytest.raises(LLMBadOutput) as caught:
        _llm(settings, RetryBudget(0.0, floor=1)).complete("hi")
    assert fake.request_count == 2  # asked once, re-asked once, then the budget said no
    assert "empty answer" in str(caught.value) and BUDGET_SPENT_MARKER in str(caught.value)


def test_openai_provider_shares_the_budget(fake_openai, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    fake_openai.replies = [429, 429, 429, 429]
    budget = RetryBudget(0.0, floor=2)
    llm = OpenAICompatLLM(LLMSettings(provider="openai", base_url=fake_openai.base_url, max_retries=3),
                          retry_budget=budget, **FAST)  # type: ignore[arg-type]
    with pytest.raises(RetryBudgetSpent):
        llm.complete("hi")
    assert len(fake_openai.requests) == 3 and budget.retries == 2


def test_summary_says_the_budget_ran_out_and_what_it_cost() -> None:
    spent = f"judge: HTTP 429; not retried: the suite's {BUDGET_SPENT_MARKER} (10 retries for 40 calls)"
    doc = {
        "experiment": {"id": "exp_1"},
        "summary": {"total_scenarios": 3, "passed": 1, "failed": 2},
        "scenario_results": [{"failure_message": spent}, {"failure_message": "agent raised"},
                             {"failure_message": None}, "not a dict"],
    }
    assert budget_line(doc) == ["  Retry budget:     ran out; 1 scenario(s) ended as error without retrying "
                                "(raise retry_budget in [tool.fabtest])"]
    assert "Retry budget:     ran out; 1 scenario(s)" in render_summary(doc)
    doc["scenario_results"] = [{"failure_message": "agent raised"}]
    assert budget_line(doc) == [] and "Retry budget" not in render_summary(doc)


def test_probe_is_one_cheap_call(fake: FakeGemini, settings: LLMSettings) -> None:
    _llm(settings, None).probe()
    [request] = fake.requests
    assert request.prompt == PROBE_PROMPT
    assert request.generation_config.get("maxOutputTokens") == 16


def test_probe_names_a_rejected_key_without_retrying(fake: FakeGemini, settings: LLMSettings) -> None:
    fake.add_fault(403, times=None)
    with pytest.raises(LLMError, match="HTTP 403.*check the API key"):
        _llm(settings, None).probe()
    assert fake.request_count == 1


def test_probe_retries_a_transient_failure_at_most_twice(fake: FakeGemini, settings: LLMSettings) -> None:
    fake.add_fault(503, times=None)
    with pytest.raises(LLMError, match="gave up after 3 attempt"):
        _llm(settings, RetryBudget(0.0, floor=0)).probe()  # the probe never pays from the run's budget
    assert fake.request_count == 3


def test_openai_probe(fake_openai) -> None:  # noqa: ANN001
    llm = OpenAICompatLLM(LLMSettings(provider="openai", model="m", base_url=fake_openai.base_url), **FAST)  # type: ignore[arg-type]
    llm.probe()
    [body] = fake_openai.requests
    assert body["messages"][0]["content"] == PROBE_PROMPT and body["max_tokens"] == 4
    fake_openai.replies = [401]
    with pytest.raises(LLMError, match="HTTP 401"):
        llm.probe()


@pytest.mark.parametrize(("workerinput", "floor"), [(None, 10), ({"workercount": 2}, 5), ({"workercount": 32}, 1)])
def test_each_xdist_worker_gets_its_share_of_the_floor(workerinput: dict[str, int] | None, floor: int) -> None:
    from types import SimpleNamespace

    from fabtest.config.settings import Settings
    from fabtest.pytest_plugin.llm_roles import SessionLLMs

    config = SimpleNamespace(getoption=lambda *_: None)
    if workerinput is not None:
        config.workerinput = workerinput  # type: ignore[attr-defined]
    budget = SessionLLMs(config, Settings(retry_budget=0.2)).retry_budget  # type: ignore[arg-type]
    assert (budget.floor, budget.ratio) == (floor, 0.2)


def test_hedges_spend_at_most_half_the_budget() -> None:
    budget = RetryBudget(0.1, floor=10)
    assert [budget.spend_on_hedge() for _ in range(6)] == [True] * 5 + [False]
    assert budget.hedges == budget.retries == 5 and budget.refused == 0 and not budget.spent
    assert [budget.spend() for _ in range(6)] == [True] * 5 + [False]  # the other half stays for failures
