"""A simulated user that leaves its role on every try: the scenario is not run, not passed or failed
(issue 27, point 9). The run ends with "did not run" (exit 6) unless ``allow_skip`` names ``simulator``,
and the console summary shows the simulator's validity rate."""

from __future__ import annotations

from typing import Any

AGENT = '''
from fabtest import AgentResponse, ToolCall
from fabtest.testing import FakeLLM


def build(context):
    def chat(messages):
        if "elm" in messages[-1].content.lower():
            return AgentResponse("Done: order P-7 is placed.", [ToolCall("place_order", {})])
        return AgentResponse("Sure! Where should we deliver?")
    return chat


# the simulated user gives every fact at once, before the agent asked: an invalid conversation
dumping = FakeLLM().simulated_user(["A pepperoni to 12 Elm Street, my phone is 555-0101"])
'''

FEATURE = '''
Feature: Pizza
  Scenario: Ordering
    Given a simulated user with the goal "Order a pepperoni pizza"
    And the simulated user knows:
      | fact    | value         |
      | address | 12 Elm Street |
      | phone   | 555-0101      |
    And the simulation stops when the agent calls "place_order"
    When the simulated user talks to the agent
'''


def _run(project: Any, allow: str = "") -> Any:
    project.pyproject(f'agent = "mybot:build"\nsimulator_retries = 1\n{allow}')
    project.agent(AGENT)
    project.feature("features/pizza.feature", FEATURE)
    return project.run("features", "--fabtest-no-preflight", "--fabtest-fake-llm", "mybot:dumping",
                       "-p", "no:randomly")


def test_an_always_invalid_simulation_does_not_run_and_fails_the_run(project: Any) -> None:
    result = _run(project)
    out = project.output(result)
    result.assert_outcomes(skipped=1)
    assert result.ret == 6, out
    assert "did not run: the simulated user left its role on every try" in out
    [entry] = project.experiment()["scenario_results"]
    assert entry["skipped"] and "the simulated user left its role in 2 tries" in entry["skip_reason"]
    assert [t["valid"] for t in entry["simulation"]["tries"]] == [False, False]
    summary = project.experiment()["summary"]
    assert summary["simulator_validity"]["rate"] == 0.0 and summary["simulator_validity"]["invalid_runs"] == 1
    assert "Simulator valid:  0.0% (0/2 simulated conversations)" in out


def test_allow_skip_simulator_keeps_the_run_green(project: Any) -> None:
    result = _run(project, 'allow_skip = ["simulator"]')
    result.assert_outcomes(skipped=1)
    assert result.ret == 0, project.output(result)
