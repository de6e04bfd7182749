"""LLM outages (429 storms, 500s, refused connections, garbage, timeouts) stay with their own
scenario: on a hard check they are its error (the reason in the failure message); on a soft check
the check is skipped with the judge's error as its reason and the scenario passes. The other
scenarios pass either way.

Faults are aimed at one scenario with a pattern found only in that scenario's prompts (its user
line or its goal), so one run holds a healthy scenario next to the faulty ones.
"""

from __future__ import annotations

import socket

import pytest

from fault_helpers import FaultRun, run_project  # type: ignore[import-not-found]
from fabtest.testing import FakeGemini


def soft(name: str, line: str, mode: str = "should") -> str:
    return f"""
  Scenario: {name}
    When the user says "{line}"
    Then the response {mode} satisfy "The agent is polite"
"""


def simulated(name: str, goal: str) -> str:
    return f"""
  Scenario: {name}
    Given a simulated user with the goal "{goal}"
    When the simulated user talks to the agent
    Then every response should satisfy "The agent is polite"
"""


FEATURE = ("Feature: LLM faults\n"
           + soft("Healthy", "plain hello")
           + soft("429 within retries", "storm-ok")
           + soft("429 beyond retries", "storm-bad")
           + soft("Persistent 500 on a must", "five-hundred", mode="must")
           + soft("Malformed judge JSON", "garbled-json")
           + soft("Judge timeout", "slowpoke")
           + simulated("Empty simulator reply once", "Empty-once goal")
           + simulated("Healthy simulation", "Plain goal"))

_RUN: dict[str, tuple[FaultRun, FakeGemini]] = {}


def _requests(fake: FakeGemini, needle: str) -> int:
    return sum(1 for r in fake.requests if needle in r.text)


def _judge_failed(run: FaultRun, name: str, *reason: str) -> dict[str, object]:
    """A soft check whose judge failed for good: skipped with the reason; its scenario passed."""
    scenario = run.scenarios[name]
    assert scenario["passed"] is True and scenario["failure_type"] is None, scenario
    [check] = scenario["evaluations"]["details"]
    assert check["status"] == "skipped" and check["details"].startswith("judge failed: "), check
    for text in reason:
        assert text in check["details"], check["details"]
    return check


@pytest.fixture
def llm_run(pytester: pytest.Pytester, fake: FakeGemini) -> tuple[FaultRun, FakeGemini]:
    if "run" not in _RUN:
        fake.add_fault(429, times=2, pattern="storm-ok")          # max_retries = 2: the third attempt answers
        fake.add_fault(429, times=None, pattern="storm-bad")
        fake.add_fault(500, times=None, pattern="five-hundred")
        fake.add_fault("malformed_json", times=None, pattern="garbled-json")
        fake.add_fault("timeout", times=None, pattern="slowpoke", delay_s=3.0)
        fake.add_fault("empty", times=1, pattern="Empty-once goal")
        # six of eight scenarios are faulty on purpose: lift the suite's retry budget (tested below)
        run = run_project(pytester, FEATURE, "--fabtest-retry-budget", "100", judge_timeout=0.4)
        # keep only what the tests need: the fake stops when the fixture ends
        _RUN["run"] = (run, _Snapshot(fake))  # type: ignore[assignment]
    return _RUN["run"]


class _Snapshot:
    """The fake's requests, kept after the server is gone."""

    def __init__(self, fake: FakeGemini) -> None:
        self.requests = fake.requests


def test_only_the_faulty_scenarios_fail(llm_run) -> None:  # noqa: ANN001
    run, _ = llm_run
    run.result.assert_outcomes(passed=7, failed=1)  # only the must fails: soft judge failures skip their check
    # the judge's outage on a must is the judge's failure (issue 44), never the agent's error
    assert {k: v for k, v in run.doc["summary"]["failure_types"].items() if v} == {"judge": 1}
    assert run.doc["summary"]["skipped_checks"] == 3


def test_healthy_scenarios_are_unaffected(llm_run) -> None:  # noqa: ANN001
    run, _ = llm_run
    run.healthy("Healthy")
    run.healthy("Healthy simulation", turns=2)


def test_429_within_retries_passes(llm_run) -> None:  # noqa: ANN001
    run, fake = llm_run
    run.healthy("429 within retries")
    assert _requests(fake, "storm-ok") == 3


def test_429_beyond_retries_skips_the_soft_check_with_the_status(llm_run) -> None:  # noqa: ANN001
    run, fake = llm_run
    _judge_failed(run, "429 beyond retries", "429", "gave up after 3 attempt(s)")
    assert _requests(fake, "storm-bad") == 3


def test_persistent_500_on_a_must_is_the_judges_failure_not_an_assertion(llm_run) -> None:  # noqa: ANN001
    run, _ = llm_run
    scenario = run.failed("Persistent 500 on a must", "judge", "500")
    assert "faults.feature:" in scenario["failure_message"]


def test_malformed_json_skips_the_soft_check_saying_so(llm_run) -> None:  # noqa: ANN001
    run, _ = llm_run
    check = _judge_failed(run, "Malformed judge JSON")
    assert "json" in str(check["details"]).lower()


def test_judge_timeout_skips_the_soft_check_saying_it_timed_out(llm_run) -> None:  # noqa: ANN001
    run, fake = llm_run
    _judge_failed(run, "Judge timeout", "timed out")
    assert _requests(fake, "slowpoke") == 3


def test_empty_simulator_reply_is_retried(llm_run) -> None:  # noqa: ANN001
    run, fake = llm_run
    run.healthy("Empty simulator reply once", turns=2)
    simulator_calls = [r for r in fake.requests if "Empty-once goal" in r.text and "HUMAN USER" in r.text]
    assert len(simulator_calls) == 3 + 1  # two turns, one goal_complete message, one retry of the empty answer


def test_connection_refused_skips_soft_checks_and_deterministic_scenarios_pass(
        pytester: pytest.Pytester, clean_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as sock:  # a port that was free a moment ago and now refuses connections
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("GEMINI_API_KEY", "fake-key")
    feature = ("Feature: No server\n" + soft("Needs the judge", "hello")
               + '\n  Scenario: Deterministic\n    When the user says "hi"\n    Then the response must match "hello"\n')
    run = run_project(pytester, feature, "--fabtest-no-preflight")  # pre-flight would stop the run: see below
    run.result.assert_outcomes(passed=2)
    _judge_failed(run, "Needs the judge", "connection", "gave up after 3 attempt(s)")
    deterministic = run.scenarios["Deterministic"]
    assert deterministic["passed"] is True and deterministic["failure_message"] is None
