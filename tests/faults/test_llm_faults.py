"""LLM outages (429 storms, 500s, refused connections, garbage, timeouts) are errors of their own
scenario only: the reason is in the failure message and the other scenarios pass.

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
    run.result.assert_outcomes(passed=4, failed=4)
    assert {k: v for k, v in run.doc["summary"]["failure_types"].items() if v} == {"error": 4}


def test_healthy_scenarios_are_unaffected(llm_run) -> None:  # noqa: ANN001
    run, _ = llm_run
    run.healthy("Healthy")
    run.healthy("Healthy simulation", turns=2)


def test_429_within_retries_passes(llm_run) -> None:  # noqa: ANN001
    run, fake = llm_run
    run.healthy("429 within retries")
    assert _requests(fake, "storm-ok") == 3


def test_429_beyond_retries_is_an_error_with_the_status(llm_run) -> None:  # noqa: ANN001
    run, fake = llm_run
    run.failed("429 beyond retries", "error", "429", "gave up after 3 attempt(s)")
    assert _requests(fake, "storm-bad") == 3


def test_persistent_500_on_a_must_is_an_error_not_an_assertion(llm_run) -> None:  # noqa: ANN001
    run, _ = llm_run
    scenario = run.failed("Persistent 500 on a must", "error", "500")
    assert "faults.feature:" in scenario["failure_message"]


def test_malformed_json_is_an_error_saying_so(llm_run) -> None:  # noqa: ANN001
    run, _ = llm_run
    scenario = run.failed("Malformed judge JSON", "error")
    assert "json" in scenario["failure_message"].lower()


def test_judge_timeout_is_an_error_saying_it_timed_out(llm_run) -> None:  # noqa: ANN001
    run, fake = llm_run
    run.failed("Judge timeout", "error", "timed out")
    assert _requests(fake, "slowpoke") == 3


def test_empty_simulator_reply_is_retried(llm_run) -> None:  # noqa: ANN001
    run, fake = llm_run
    run.healthy("Empty simulator reply once", turns=2)
    simulator_calls = [r for r in fake.requests if "Empty-once goal" in r.text and "HUMAN USER" in r.text]
    assert len(simulator_calls) == 3 + 1  # two turns, one goal_complete message, one retry of the empty answer


def test_connection_refused_is_an_error_and_deterministic_scenarios_pass(
        pytester: pytest.Pytester, clean_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as sock:  # a port that was free a moment ago and now refuses connections
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("GEMINI_API_KEY", "fake-key")
    feature = ("Feature: No server\n" + soft("Needs the judge", "hello")
               + '\n  Scenario: Deterministic\n    When the user says "hi"\n    Then the response must match "hello"\n')
    run = run_project(pytester, feature, "--fabtest-no-preflight")  # pre-flight would stop the run: see below
    run.result.assert_outcomes(passed=1, failed=1)
    run.failed("Needs the judge", "error", "connection", "gave up after 3 attempt(s)")
    deterministic = run.scenarios["Deterministic"]
    assert deterministic["passed"] is True and deterministic["failure_message"] is None
