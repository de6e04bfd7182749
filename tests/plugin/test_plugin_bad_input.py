"""Bad input gives a clear one-line error naming the file (and line), never a Python traceback."""

from __future__ import annotations

import pytest

AGENT = '''
from fabtest import AgentResponse, ToolCall


def build(context):
    def reply(messages):
        return AgentResponse(text="hello", tool_calls=[ToolCall("search_venues", {"city": "Berlin"})])
    return reply
'''

BROKEN_MODULE = '''
import this_dependency_is_not_installed_anywhere  # noqa: F401


def build(context):
    return lambda messages: "never"
'''

PYPROJECT = '''
agent = "mybot:build"

[tool.fabtest.agents]
good = "mybot:build"
no_attribute = "mybot:does_not_exist"
no_module = "no_such_module_xyz:build"
broken_import = "brokenbot:build"
'''

BAD = r'''
Feature: Bad input
  Scenario: Unknown agent name
    Given the agent "nobody"
    When the user says "hi"

  Scenario: Agent attribute missing
    Given the agent "no_attribute"
    When the user says "hi"

  Scenario: Agent module missing
    Given the agent "no_module"
    When the user says "hi"

  Scenario: Agent module fails to import
    Given the agent "broken_import"
    When the user says "hi"

  Scenario: With table has the wrong header
    When the user says "hi"
    Then the agent must call "search_venues" with:
      | name | expected |
      | city | Berlin   |

  Scenario: With table has no rows
    When the user says "hi"
    Then the agent should call "search_venues" with:
      | argument | value |

  Scenario: With table is missing
    When the user says "hi"
    Then the agent must call "search_venues" with:

  Scenario: Invalid regex
    When the user says "hi"
    Then the response should match "(unclosed"

  Scenario: Invalid regex in a with table
    When the user says "hi"
    Then the agent must call "search_venues" with:
      | argument | value      |
      | city     | /[Berlin/  |

  Scenario: Step that matches nothing
    When the user dances the tango
    Then the response must match "hello"

  Scenario: Unknown topic successor
    Given the topics:
      | topic    | characteristic    | triggers | next    |
      | greeting | The agent greets  |          | nowhere |
    When the user says "hi"

  Scenario: Assertion before anything was said
    Then the response must match "hello"

  Scenario: Good scenario is unaffected
    Given the agent "good"
    When the user says "hi"
    Then the response must match "hello"
'''

# scenario name -> (the step line it must name, text the one-line message must contain)
EXPECTED = {
    "Unknown agent name": ('Given the agent "nobody"', 'unknown agent "nobody"; [tool.fabtest.agents] defines: '
                                                       "broken_import, good, no_attribute, no_module"),
    "Agent attribute missing": ('When the user says "hi"', "module 'mybot' has no attribute 'does_not_exist'"),
    "Agent module missing": ('When the user says "hi"', "agent 'no_such_module_xyz:build' does not import: "
                                                        "ModuleNotFoundError"),
    "Agent module fails to import": ('When the user says "hi"', "agent 'brokenbot:build' does not import: "
                                                                "ModuleNotFoundError: No module named "
                                                                "'this_dependency_is_not_installed_anywhere'"),
    "With table has the wrong header": ('| name | expected |', "header | argument | value |, got | name | expected |"),
    "With table has no rows": ("| argument | value |", "has a header but no argument rows"),
    "With table is missing": ("with:\n\n", "the 'with:' table is empty"),
    "Invalid regex": ('"(unclosed"', "invalid regular expression '(unclosed'"),
    "Invalid regex in a with table": ("/[Berlin/", "invalid regular expression '[Berlin'"),
    "Step that matches nothing": ("When the user dances the tango", "no step definition matches this step"),
    "Unknown topic successor": ("Given the topics:", "nowhere"),
    "Assertion before anything was said": ('Scenario: Assertion before', "there is no response yet"),
}


def _step_line(needle: str) -> int:
    """The line of the step that carries ``needle``, inside the scenario where the needle appears."""
    lines = BAD.lstrip("\n").splitlines()
    if needle == "with:\n\n":
        start = next(i for i, line in enumerate(lines) if "Scenario: With table is missing" in line)
        return next(i for i in range(start, len(lines)) if lines[i].rstrip().endswith("with:")) + 1
    index = next(i for i, line in enumerate(lines) if needle in line)
    if needle.startswith("Scenario:"):
        return index + 2
    while lines[index].lstrip().startswith("|"):  # a table row: the step is above the table
        index -= 1
    return index + 1


def _line_in_scenario(scenario: str, step: str) -> int:
    lines = BAD.lstrip("\n").splitlines()
    start = next(i for i, line in enumerate(lines) if f"Scenario: {scenario}" in line)
    return next(i for i in range(start, len(lines)) if step in lines[i]) + 1


def _bad_project(project):
    project.pyproject(PYPROJECT)
    project.agent(AGENT)
    project.agent(BROKEN_MODULE, module="brokenbot")
    project.feature("features/bad.feature", BAD)


@pytest.fixture
def bad_run(shared_run):
    # each scenario fails alone; the unmatched step is a collection error first, gone past here so that
    # its scenario's own failure (the fallback before its first step) is checked too
    return shared_run("bad-input", _bad_project, "features", "--fabtest-no-preflight", "--continue-on-collection-errors")


def _where(scenario: str) -> str:
    needle, _ = EXPECTED[scenario]
    if needle == 'When the user says "hi"':
        return f"features/bad.feature:{_line_in_scenario(scenario, needle)}"
    return f"features/bad.feature:{_step_line(needle)}"


def _sections(out: str) -> dict[str, str]:
    """The text pytest printed under each failing scenario's ``____ Scenario: Name ____`` header,
    keyed by the scenario's test function name."""
    import re

    failures = out.split("= FAILURES =", 1)[1].split("\n", 1)[1]
    failures = re.split(r"^={3,}", failures, flags=re.M)[0]
    parts = re.split(r"^_{3,} Scenario: (.+?) _{3,}$", failures, flags=re.M)
    return {_test_name(parts[i]): parts[i + 1].strip() for i in range(1, len(parts), 2)}


def _test_name(scenario: str) -> str:
    return "test_" + scenario.lower().replace(" ", "_")


def test_bad_input_fails_only_its_own_scenario(bad_run):
    bad_run.assert_outcomes(passed=1, failed=len(EXPECTED), errors=1)  # the error: collection's unmatched step
    by_name = bad_run.scenarios
    assert by_name["Good scenario is unaffected"]["passed"] is True
    for name in EXPECTED:
        assert by_name[name]["failure_type"] == "error", name


def test_bad_input_message_is_one_line_naming_file_and_line(bad_run):
    """One run, every bad scenario checked (a parametrized test would rerun the project each time)."""
    sections = _sections(bad_run.output)
    recorded = bad_run.scenarios
    problems = []
    for scenario, (_, text) in sorted(EXPECTED.items()):
        where = _where(scenario)
        printed = sections[_test_name(scenario)]
        # exactly one line: no traceback, no framework source, no "E   " lines
        if "\n" in printed:
            problems.append(f"{scenario}: more than one line: {printed!r}")
        if not printed.startswith(f"{where}: "):
            problems.append(f"{scenario}: does not start with {where}: {printed!r}")
        if text not in printed:
            problems.append(f"{scenario}: {text!r} not in {printed!r}")
        if recorded[scenario]["failure_message"] != printed:
            problems.append(f"{scenario}: recorded message differs: {recorded[scenario]['failure_message']!r}")
    assert not problems, "\n".join(problems)


def test_bad_input_prints_no_traceback(bad_run):
    out = bad_run.output
    assert "Traceback" not in out
    assert "site-packages" not in out
    assert "src/fabtest" not in out
    assert "\nE   " not in out
    assert "raise " not in out


def test_step_that_matches_nothing_names_the_step(bad_run):
    printed = _sections(bad_run.output)["test_step_that_matches_nothing"]
    assert '(When the user dances the tango)' in printed  # the step as written in the file
    assert "pytest-bdd @given/@when/@then" in printed


def test_unknown_topic_successor_names_the_topic(bad_run):
    message = bad_run.scenarios["Unknown topic successor"]["failure_message"]
    assert 'topic "greeting" has unknown next topic "nowhere"' in message


def test_scenario_failing_before_any_fabtest_step_is_recorded(bad_run):
    """Regression (fixed in 0f6f855): the unmatched step fails before fabtest_scenario exists."""
    entry = bad_run.scenarios.get("Step that matches nothing")
    assert entry is not None
    assert entry["failure_type"] == "error"
    assert bad_run.experiment["summary"]["total_scenarios"] == len(EXPECTED) + 1


def test_unmatched_step_location_is_relative_like_the_others(bad_run):
    """Regression (fixed in 0f6f855): it used the absolute path, every other message a relative one."""
    printed = _sections(bad_run.output)["test_step_that_matches_nothing"]
    assert printed.startswith(_where("Step that matches nothing") + ": ")


def test_default_agent_that_does_not_import(project):
    project.pyproject('agent = "no_such_module_xyz:build"')
    feature = '''
        Feature: Broken default
          Scenario: Uses the default agent
            When the user says "hi"
    '''
    project.feature("features/default.feature", feature)
    result = project.run("features", "--fabtest-no-preflight")  # the scenario's own guard (pre-flight: tests/preflight)
    result.assert_outcomes(failed=1)
    out = project.output(result)
    line = project.line_of(feature, "When the user says")
    result.stdout.fnmatch_lines([f"features/default.feature:{line}: agent 'no_such_module_xyz:build' does not import: "
                                 "ModuleNotFoundError: No module named 'no_such_module_xyz'"])
    assert "Traceback" not in out and "src/fabtest" not in out


def test_no_agent_configured(project):
    project.pyproject("")
    feature = '''
        Feature: No agent
          Scenario: Nobody to talk to
            When the user says "hi"
    '''
    project.feature("features/none.feature", feature)
    result = project.run("features")
    result.assert_outcomes(failed=1)
    line = project.line_of(feature, "When the user says")
    result.stdout.fnmatch_lines([f"features/none.feature:{line}: no agent configured: *"])
    assert "Traceback" not in project.output(result)


@pytest.mark.parametrize(("table", "expected"), [
    ('agent = "mybot:build"\nagnet_timeout = 5', "[tool.fabtest]: unknown key 'agnet_timeout' (did you mean 'agent_timeout'?)"),
    ('agent = "mybot:build"\n[tool.fabtest.judge]\nmodle = "x"', "[tool.fabtest]: unknown key 'judge.modle' (did you mean 'model'?)"),
    ('agent = "mybot:build"\nagent_timeout = "fast"', "[tool.fabtest]: agent_timeout: "),
    ('agent = "mybot:build"\nllm_cache = "sometimes"', "[tool.fabtest]: llm_cache: "),
])
def test_bad_fabtest_settings_are_a_usage_error(project, table, expected):
    project.pyproject(table)
    project.agent(AGENT)
    project.feature("features/any.feature", '''
        Feature: Any
          Scenario: Never runs
            When the user says "hi"
    ''')
    result = project.run("features")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    out = project.output(result)
    errors = [line for line in out.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1, out
    assert str(project.path / "pyproject.toml") in errors[0]
    assert expected in errors[0]
    assert "Traceback" not in out
    assert not project.results_dir.exists()


def test_invalid_toml_is_a_usage_error(project):
    project.write("pyproject.toml", '[tool.fabtest]\nagent = "mybot:build\n')
    result = project.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    out = project.output(result)
    assert "pyproject.toml" in out and "Traceback" not in out


def test_invalid_project_topic_table_is_a_usage_error(project):
    project.pyproject('''
        agent = "mybot:build"

        [[tool.fabtest.topics]]
        topic = "greeting"
        next = "nowhere"
    ''')
    project.agent(AGENT)
    project.feature("features/any.feature", '''
        Feature: Any
          Scenario: Never runs
            When the user says "hi"
    ''')
    result = project.run("features")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    out = project.output(result)
    errors = [line for line in out.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and "pyproject.toml" in errors[0] and "nowhere" in errors[0], out
    assert "Traceback" not in out


def test_malformed_gherkin_names_the_file_and_line(project):
    project.pyproject()
    project.agent(AGENT)
    project.feature("features/good.feature", '''
        Feature: Good
          Scenario: Fine
            When the user says "hi"
    ''')
    project.feature("features/broken.feature", '''
        Feature: Broken
          Scenario Outline: S
            When the user says "<x>"

            Examples:
              | x |
              | a |

            Given a step after the examples
    ''')
    result = project.run("features")
    out = project.output(result)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*ERROR collecting features/broken.feature*",
                                 "*Line number: 9*features/broken.feature*"])
    assert "Traceback" not in out and "src/fabtest" not in out
