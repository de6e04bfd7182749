"""An agent that raises, hangs or answers garbage fails only its own scenario, with the reason shown."""

from __future__ import annotations

import pytest

from fault_helpers import FaultRun, run_project  # type: ignore[import-not-found]

FEATURE = """
Feature: Agent faults
  Scenario: Healthy before
    Given the agent "good"
    When the user says "hi"
    Then the response must match "hello"
    And the response should satisfy "The agent is polite"

  Scenario: Agent raises
    Given the agent "raiser"
    When the user says "hi"

  Scenario: Agent hangs
    Given the agent "hanger"
    When the user says "hi"

  Scenario: Agent returns an int
    Given the agent "int_bot"
    When the user says "hi"

  Scenario: Agent returns None
    Given the agent "none_bot"
    When the user says "hi"

  Scenario: Healthy after
    Given the agent "good"
    When the user says "hi"
    Then the response must match "hello"
    And the response should satisfy "The agent is polite"
"""

_RUN: dict[str, FaultRun] = {}


@pytest.fixture
def agent_run(pytester: pytest.Pytester, fake) -> FaultRun:  # noqa: ANN001 - fixture from conftest
    if "run" not in _RUN:
        _RUN["run"] = run_project(pytester, FEATURE, "--fabtest-agent-timeout", "0.5")
    return _RUN["run"]


def test_outcomes_only_the_faulty_scenarios_fail(agent_run: FaultRun) -> None:
    agent_run.result.assert_outcomes(passed=2, failed=4)
    assert {k: v for k, v in agent_run.doc["summary"]["failure_types"].items() if v} == {"error": 3, "timeout": 1}


def test_healthy_scenarios_around_the_faults_are_unaffected(agent_run: FaultRun) -> None:
    for name in ("Healthy before", "Healthy after"):
        scenario = agent_run.healthy(name)
        assert scenario["expectations"]["passed"] == scenario["expectations"]["total"] == 1


def test_agent_that_raises_is_an_error_naming_the_exception(agent_run: FaultRun) -> None:
    scenario = agent_run.failed("Agent raises", "error", "RuntimeError", "database is down")
    assert "faults.feature:" in scenario["failure_message"]


def test_agent_that_hangs_is_a_timeout_naming_the_limit(agent_run: FaultRun) -> None:
    scenario = agent_run.failed("Agent hangs", "timeout", "did not answer within 0.5s")
    assert scenario["turns"] == 0
    assert scenario["duration_s"] < 2.5  # the hung agent (3 s) was not waited for


@pytest.mark.parametrize(("name", "shown"), [("Agent returns an int", "agent returned int (42)"),
                                             ("Agent returns None", "agent returned NoneType")])
def test_agent_that_returns_garbage_is_an_error_naming_the_value(agent_run: FaultRun, name: str, shown: str) -> None:
    scenario = agent_run.failed(name, "error", shown, "expected str or AgentResponse")
    assert scenario["turns"] == 0
