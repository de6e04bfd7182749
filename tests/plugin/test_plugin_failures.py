"""Failure types in the experiment JSON (DESIGN section 3): assertion, error, timeout, null."""

from __future__ import annotations

AGENT = '''
import time


def build(context):
    def reply(messages):
        text = messages[-1].content
        if text == "crash":
            raise ValueError("database is down")
        if text == "sleep":
            time.sleep(1.5)
            return "late"
        if text == "garbage":
            return 42
        return "ok: " + text
    return reply
'''

FEATURE = '''
Feature: Outcomes
  Scenario: Passes first
    When the user says "hi"
    Then the response must match "^ok: hi$"

  Scenario: Hard expectation fails
    When the user says "hi"
    Then the response must match "^never$"

  Scenario: Agent raises
    When the user says "hi"
    And the user says "crash"
    Then the response must match "never reached"

  Scenario: Agent answers garbage
    When the user says "garbage"

  Scenario: Agent times out
    When the user says "sleep"
    Then the response must match "late"

  Scenario: Passes last
    When the user says "bye"
    Then the response must match "^ok: bye$"
    And the response should match "never"
'''


def test_failure_types_in_the_results(project):
    project.pyproject()
    project.agent(AGENT)
    project.feature("features/outcomes.feature", FEATURE)
    result = project.run("features", "--fabtest-agent-timeout", "0.5")
    result.assert_outcomes(passed=2, failed=4)
    by_name = project.scenarios()

    assert by_name["Passes first"]["failure_type"] is None
    assert by_name["Passes first"]["failure_message"] is None
    assert by_name["Passes last"]["passed"] is True and by_name["Passes last"]["failure_type"] is None
    assert by_name["Passes last"]["turns"] == 1

    assertion = by_name["Hard expectation fails"]
    assert assertion["failure_type"] == "assertion"
    assert "no match for /^never$/" in assertion["failure_message"]

    error = by_name["Agent raises"]
    assert error["failure_type"] == "error"
    assert "ValueError" in error["failure_message"] and "database is down" in error["failure_message"]
    line = project.line_of(FEATURE, 'the user says "crash"')
    assert error["failure_message"].startswith(f"features/outcomes.feature:{line}:")
    assert error["turns"] == 1, "the turn that raised is not recorded"

    garbage = by_name["Agent answers garbage"]
    assert garbage["failure_type"] == "error"
    assert "agent returned int (42); expected str or AgentResponse" in garbage["failure_message"]

    timeout = by_name["Agent times out"]
    assert timeout["failure_type"] == "timeout"
    assert "did not answer within 0.5s" in timeout["failure_message"]

    summary = project.experiment()["summary"]
    assert summary["total_scenarios"] == 6 and summary["passed"] == 2 and summary["failed"] == 4
    assert {k: v for k, v in summary["failure_types"].items() if v} == {"assertion": 1, "error": 2, "timeout": 1}

    out = project.output(result)
    assert "Traceback" not in out
    assert "AgentError: the agent raised ValueError: database is down" in out
    assert "AgentTimeout: the agent did not answer within 0.5s" in out


def test_agent_timeout_from_pyproject(project):
    project.pyproject('agent = "mybot:build"\nagent_timeout = 0.3')
    project.agent(AGENT)
    project.feature("features/slow.feature", '''
        Feature: Slow
          Scenario: Sleeps
            When the user says "sleep"
    ''')
    result = project.run("features")
    result.assert_outcomes(failed=1)
    entry = project.scenarios()["Sleeps"]
    assert entry["failure_type"] == "timeout"
    assert "within 0.3s" in entry["failure_message"]


def test_scenario_timeout_is_enforced(project):
    project.pyproject()
    project.agent('''
        import time


        def build(context):
            def reply(messages):
                time.sleep(0.25)
                return "slow but steady"
            return reply
    ''')
    project.feature("features/long.feature", '''
        Feature: Long
          Scenario: Many slow turns
            When the user says "one"
            And the user says "two"
            And the user says "three"
    ''')
    result = project.run("features", "--fabtest-scenario-timeout", "0.3")
    result.assert_outcomes(failed=1)
    entry = project.scenarios()["Many slow turns"]
    assert entry["failure_type"] == "timeout"
    assert "--fabtest-scenario-timeout" in entry["failure_message"]
    assert entry["turns"] == 1  # the first turn fit in the budget, the second did not
    assert "Traceback" not in project.output(result)
