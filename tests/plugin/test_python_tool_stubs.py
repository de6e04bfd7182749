"""Tool stubs on a Python agent that opts in with ``@fabtest.tool``, and where stubs cannot reach.

The agent never reports its calls: fabtest records every call of a decorated tool, stubbed or
real. The run is a subprocess so the tool registry starts empty, as in a user's run.
"""

from __future__ import annotations

import json

AGENT = '''
import asyncio
from pathlib import Path

import fabtest


@fabtest.tool
def lookup_account(phone: str) -> dict:
    Path("real_calls.txt").open("a").write(f"lookup_account {phone}\\n")
    return {"plan": "real"}


@fabtest.tool
def list_plans() -> list:
    return ["real-a", "real-b"]


@fabtest.tool(name="change_plan")
async def change(account: str, plan: str) -> str:
    return f"{account} now on {plan}"


def chat(messages):
    account = lookup_account(messages[-1].content)
    try:
        plans = "plans: " + ", ".join(list_plans())
    except fabtest.ToolFailed as exc:
        plans = f"plans failed: {exc}"
    return f"{account['plan']}; {plans}"


async def async_chat(messages):
    return await change("A-17", plan=messages[-1].content)


def build(context):
    return chat


def build_async(context):
    return async_chat
'''

PYPROJECT = '''
agent = "mybot:build"

[tool.fabtest.agents]
async_bot = "mybot:build_async"
remote = { http = "http://127.0.0.1:9/chat" }
'''

FEATURE = '''
Feature: Python tools
  Scenario: Stubbed and real calls are recorded
    Given the tool "lookup_account" returns:
      """
      {"plan": "basic"}
      """
    When the user says "0176"
    Then the agent must call "lookup_account" before "list_plans"
    And the response must match "^basic; plans: real-a, real-b$"

  Scenario: A failure reaches the agent
    Given the tool "list_plans" fails with "503 Service Unavailable"
    When the user says "0176"
    Then the response must match "^real; plans failed: 503 Service Unavailable$"

  Scenario: An async tool, slowed down
    Given the agent "async_bot"
    And the tool "change_plan" takes 0.2 seconds
    When the user says "unlimited"
    Then the response must match "^A-17 now on unlimited$"
    And the agent must call "change_plan" with:
      | argument | value     |
      | plan     | unlimited |

  Scenario: An HTTP agent cannot be stubbed
    Given the agent "remote"
    And the tool "lookup_account" fails with "timeout"
    When the user says "hi"

  Scenario: A misspelt stub
    Given the tool "lookup_acount" fails with "timeout"
    When the user says "0176"
'''


def test_python_tools_opt_in_with_the_decorator(project):
    project.pyproject(PYPROJECT)
    project.agent(AGENT)
    project.feature("features/p.feature", FEATURE)
    result = project.run_subprocess("features", "--fabtest-no-preflight")
    result.assert_outcomes(passed=3, failed=2)
    by_name = project.scenarios()
    calls = by_name["Stubbed and real calls are recorded"]["transcript"][0]["tool_calls"]
    assert calls == [{"name": "lookup_account", "arguments": {"phone": "0176"}, "result": {"plan": "basic"},
                      "metadata": {}, "stubbed": True},
                     {"name": "list_plans", "arguments": {}, "result": ["real-a", "real-b"], "metadata": {}}]
    assert (project.path / "real_calls.txt").read_text().splitlines() == ["lookup_account 0176"]  # the unstubbed run
    [failed] = [c for c in by_name["A failure reaches the agent"]["transcript"][0]["tool_calls"] if c["name"] == "list_plans"]
    assert failed["stubbed"] is True and failed["metadata"] == {"error": True}
    slow = by_name["An async tool, slowed down"]["transcript"][0]
    assert slow["duration_s"] >= 0.2 and "stubbed" not in slow["tool_calls"][0]
    assert slow["tool_calls"][0]["arguments"] == {"account": "A-17", "plan": "unlimited"}

    line = lambda needle: f"features/p.feature:{project.line_of(FEATURE, needle)}"  # noqa: E731
    remote = by_name["An HTTP agent cannot be stubbed"]["failure_message"]
    at = project.line_of(FEATURE, 'Given the agent "remote"') + 1
    assert remote.startswith(f'features/p.feature:{at}: the tool "lookup_account" cannot be stubbed: '
                             "the agent (HttpAgent) runs its tools where fabtest cannot reach them"), remote
    assert "its calls can still be checked from its traces: traces = true" in remote
    misspelt = by_name["A misspelt stub"]["failure_message"]
    assert misspelt.startswith(f'{line("lookup_acount")}: no tool "lookup_acount" to stub: the agent has '), misspelt
    assert "(did you mean 'lookup_account'?)" in misspelt
    assert json.dumps(by_name["A misspelt stub"]["transcript"]) == "[]"  # stopped before the agent was called


PROJECT_STUBS = '''
agent = "mybot:build"

[tool.fabtest.stubs.lookup_account]
returns = { plan = "project" }

[tool.fabtest.stubs.list_plans]
takes = 0.2
'''

LEVELS = '''
Feature: Levels
  Scenario: The project's stub
    When the user says "0176"
    Then the response must match "^project; plans: real-a, real-b$"

  Rule: A Rule Background over the project
    Background:
      Given the tool "list_plans" returns:
        """
        ["rule"]
        """

    Scenario: The Rule's stub, the project's delay
      When the user says "0176"
      Then the response must match "^project; plans: rule$"

    Scenario: The scenario's stub over both
      Given the tool "lookup_account" fails with "down"
      And the tool "list_plans" fails with "also down"
      When the user says "0176"
'''


def test_stubs_are_inherited_project_rule_scenario(project):
    project.pyproject(PROJECT_STUBS)
    project.agent(AGENT)
    project.feature("features/l.feature", LEVELS)
    result = project.run_subprocess("features", "--fabtest-no-preflight")
    result.assert_outcomes(passed=2, failed=1)
    by_name = project.scenarios()
    assert all(t["duration_s"] >= 0.2 for s in by_name.values() for t in s["transcript"])  # the project's delay
    rule = by_name["The Rule's stub, the project's delay"]["transcript"][0]["tool_calls"]
    assert [(c["name"], c["result"], c.get("stubbed")) for c in rule] == [
        ("lookup_account", {"plan": "project"}, True), ("list_plans", ["rule"], True)]
    # fails with "down" raised fabtest.ToolFailed inside the agent, which did not catch it there
    assert "ToolFailed: down" in by_name["The scenario's stub over both"]["failure_message"]


def test_a_project_stub_that_returns_and_fails_is_one_line(project):
    project.pyproject('agent = "mybot:build"\n\n[tool.fabtest.stubs.list_plans]\nreturns = []\nfails = "x"\n')
    project.agent(AGENT)
    project.feature("features/l.feature", LEVELS)
    result = project.run("features", "--fabtest-no-preflight")
    assert result.ret == 4
    assert "[tool.fabtest.stubs.list_plans]: give returns or fails, not both" in project.output(result)


SIMULATED = '''
Feature: Simulated
  Scenario: The plans come from the simulator
    Given the tool "list_plans" is simulated as "three plans: basic, plus and unlimited"
    When the user says "0176"
    Then the response must match "^real; plans: sim-basic, sim-plus$"
'''


def test_a_simulated_tool_is_answered_by_the_simulator_llm(project):
    project.pyproject()
    project.agent(AGENT)
    project.feature("features/s.feature", SIMULATED)
    project.write("fake.yaml", "tools:\n  list_plans: [[sim-basic, sim-plus]]\n")
    result = project.run_subprocess("features", "--fabtest-no-preflight", "--fabtest-fake-llm", "fake.yaml")
    result.assert_outcomes(passed=1)
    scenario = project.scenarios()["The plans come from the simulator"]
    plans = scenario["transcript"][0]["tool_calls"][1]
    assert (plans["name"], plans["result"], plans["stubbed"]) == ("list_plans", ["sim-basic", "sim-plus"], True)
    assert scenario["usage"]["simulator"]["calls"] == 1  # the simulated tool's call, charged to the simulator
