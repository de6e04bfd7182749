"""Direct collection of ``.feature`` files (DESIGN section 5): ``pytest features/`` needs no test module."""

from __future__ import annotations

ECHO_AGENT = '''
import json
from pathlib import Path

LOG = Path(__file__).parent / "log.jsonl"


def build(context):
    with LOG.open("a") as fh:
        fh.write(json.dumps({"scenario": context["scenario"], "tags": context["tags"]}) + "\\n")

    def reply(messages):
        return "echo: " + messages[-1].content

    return reply


def shout(messages):
    return messages[-1].content.upper()
'''

GREETINGS = '''
@greetings
Feature: Greetings
  Scenario: Say hello
    When the user says "hello"
    Then the response must match "echo: hello"

  @slow
  Scenario: Say goodbye
    When the user says "goodbye"
    Then the response must match "echo: goodbye"

  @smoke @slow
  Scenario: Say thanks
    When the user says "thanks"
    Then the response must match "echo: thanks"
'''


def _greetings(project):
    project.pyproject()
    project.agent(ECHO_AGENT)
    project.feature("features/greetings.feature", GREETINGS)


def test_feature_in_a_directory_without_test_module_is_collected_and_run(project):
    _greetings(project)
    assert [p.name for p in project.path.rglob("*.py")] == ["mybot.py"], "no test module, no conftest"
    result = project.run("features", "-v")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*features/greetings.feature::test_say_hello PASSED*",
                                 "*features/greetings.feature::test_say_goodbye PASSED*",
                                 "*features/greetings.feature::test_say_thanks PASSED*"])
    # the agent was really called, once per scenario
    assert sorted(e["scenario"] for e in project.log()) == ["Say goodbye", "Say hello", "Say thanks"]
    doc = project.experiment()
    assert doc["summary"]["total_scenarios"] == 3
    assert doc["summary"]["passed"] == 3
    assert {r["feature"] for r in doc["scenario_results"]} == {"Greetings"}
    for entry in doc["scenario_results"]:
        assert entry["id"].startswith("example:") and len(entry["id"]) == len("example:") + 12
        assert entry["failure_type"] is None


def test_collect_only_lists_scenarios(project):
    _greetings(project)
    result = project.run("features", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["features/greetings.feature::test_say_hello",
                                 "features/greetings.feature::test_say_goodbye",
                                 "features/greetings.feature::test_say_thanks"])
    assert project.log() == []


def test_dash_k_selects_by_scenario_name(project):
    _greetings(project)
    result = project.run("features", "-k", "goodbye")
    result.assert_outcomes(passed=1, deselected=2)
    assert [e["scenario"] for e in project.log()] == ["Say goodbye"]
    assert list(project.scenarios()) == ["Say goodbye"]


def test_gherkin_tags_become_markers_usable_with_dash_m_and_strict_markers(project):
    _greetings(project)
    result = project.run("features", "-m", "slow and not smoke", "--strict-markers")
    assert result.ret == 0, project.output(result)
    result.assert_outcomes(passed=1, deselected=2)
    assert [e["scenario"] for e in project.log()] == ["Say goodbye"]
    assert "is not registered" not in project.output(result)


def test_feature_tags_apply_to_every_scenario_and_reach_the_agent_context(project):
    _greetings(project)
    result = project.run("features", "-m", "greetings", "--strict-markers")
    result.assert_outcomes(passed=3)
    tags = {e["scenario"]: e["tags"] for e in project.log()}
    assert tags == {"Say hello": ["greetings"], "Say goodbye": ["greetings", "slow"],
                    "Say thanks": ["greetings", "slow", "smoke"]}


def test_xdist_runs_features_and_results_reach_the_controller(project):
    _greetings(project)
    project.feature("features/more.feature", '''
        Feature: More
          Scenario: Soft miss in a worker
            When the user says "ping"
            Then the response should match "pong"
            And the response must match "echo: ping"

          Scenario Outline: Echo <word> in a worker
            When the user says "<word>"
            Then the response must match "echo: <word>"

            Examples:
              | word |
              | one  |
              | two  |
    ''')
    result = project.run("features", "-n", "2", "--strict-markers")
    assert result.ret == 0, project.output(result)
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*2 workers*"])
    scenarios = project.scenarios()
    assert len(scenarios) == 6
    assert all(s["passed"] for s in scenarios.values())
    # soft evaluations recorded in a worker survive the trip to the controller
    soft = scenarios["Soft miss in a worker"]["evaluations"]
    assert [d["status"] for d in soft["details"]] == ["failed"]
    assert project.experiment()["summary"]["total_scenarios"] == 6


def test_scenario_outline_runs_once_per_examples_row(project):
    project.pyproject()
    project.agent(ECHO_AGENT)
    project.feature("features/outline.feature", '''
        Feature: Outlines
          Scenario Outline: Echo a word
            When the user says "<word>"
            Then the response must match "^echo: <word>$"
            And the response must not match "<other>"

            Examples:
              | word  | other |
              | alpha | beta  |
              | beta  | gamma |
              | gamma | alpha |
    ''')
    result = project.run("features", "-v")
    result.assert_outcomes(passed=3)
    assert len(project.log()) == 3  # one fresh agent per row
    results = project.experiment()["scenario_results"]
    names = sorted(r["name"] for r in results)
    assert names == ["Echo a word (word=alpha, other=beta)", "Echo a word (word=beta, other=gamma)",
                     "Echo a word (word=gamma, other=alpha)"]
    assert len({r["id"] for r in results}) == 3, "each row has its own stable id"
    users = sorted(r["transcript"][0]["user"] for r in results)
    assert users == ["alpha", "beta", "gamma"]


def test_failing_outline_row_fails_alone(project):
    project.pyproject()
    project.agent(ECHO_AGENT)
    project.feature("features/outline.feature", '''
        Feature: Outlines
          Scenario Outline: Echo a word
            When the user says "<word>"
            Then the response must match "^echo: <expected>$"

            Examples:
              | word  | expected |
              | alpha | alpha    |
              | beta  | BETA     |
    ''')
    result = project.run("features")
    result.assert_outcomes(passed=1, failed=1)
    by_name = project.scenarios()
    assert by_name["Echo a word (word=alpha, expected=alpha)"]["passed"] is True
    assert by_name["Echo a word (word=beta, expected=BETA)"]["failure_type"] == "assertion"


RULES = '''
Feature: Rules
  Background:
    Given the criterion "polite" means "The agent is polite"

  Rule: Shouting
    Background:
      Given the agent "shouty"
      And the criterion "loud" means "The agent uses capitals"

    Scenario: Shouted hello
      When the user says "hello"
      Then the response must match "^HELLO$"

  @quiet
  Rule: Quiet
    Scenario: Quiet hello
      When the user says "hello"
      Then the response must match "^echo: hello$"
'''


def test_rule_and_rule_background(project):
    project.pyproject('''
        agent = "mybot:build"

        [tool.fabtest.agents]
        shouty = "mybot:shout"
    ''')
    project.agent(ECHO_AGENT)
    project.feature("features/rules.feature", RULES)
    result = project.run("features", "-v")
    result.assert_outcomes(passed=2)
    by_name = project.scenarios()
    shouted, quiet = by_name["Shouted hello"], by_name["Quiet hello"]
    assert shouted["rule"] == "Shouting" and quiet["rule"] == "Quiet"
    # Feature Background then the Rule's Background; the other Rule gets only the Feature's
    assert shouted["criteria"] == {"polite": "The agent is polite", "loud": "The agent uses capitals"}
    assert quiet["criteria"] == {"polite": "The agent is polite"}
    assert shouted["transcript"][0]["agent"] == "HELLO"
    assert shouted["id"] != quiet["id"]
    # the rule's Background agent is used, the default factory is not built for that scenario;
    # the Rule's tag reaches the context of its scenarios
    assert project.log() == [{"scenario": "Quiet hello", "tags": ["quiet"]}]
    # and is a marker too
    result = project.run("features", "-m", "quiet", "--strict-markers")
    result.assert_outcomes(passed=1, deselected=1)


# -- collect_features ---------------------------------------------------------------------------------
TWO_SCENARIOS = '''
Feature: Twice
  Scenario: First
    When the user says "one"
    Then the response must match "echo: one"

  Scenario: Second
    When the user says "two"
    Then the response must match "echo: two"
'''

BDD_MODULE = '''
from pytest_bdd import scenarios

scenarios("twice.feature")
'''


def _bdd_style_project(project, collect_features: bool) -> None:
    setting = "true" if collect_features else "false"
    project.pyproject(f'agent = "mybot:build"\ncollect_features = {setting}')
    project.agent(ECHO_AGENT)
    project.feature("features/twice.feature", TWO_SCENARIOS)
    project.write("features/test_twice.py", BDD_MODULE)


def test_collect_features_false_with_pytest_bdd_scenarios_runs_each_scenario_once(project):
    """A project that already binds its features with ``pytest_bdd.scenarios()`` (the pytest-bdd
    way) would see every scenario twice once fabtest also collects the ``.feature`` file directly:
    once from the test module, once from the file. ``collect_features = false`` switches direct
    collection off so such projects keep running each scenario exactly once, with fabtest steps,
    agents and results still working through the user's own scenario functions."""
    _bdd_style_project(project, collect_features=False)
    result = project.run("features", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*features/test_twice.py::test_first PASSED*",
                                 "*features/test_twice.py::test_second PASSED*"])
    assert "twice.feature::" not in result.stdout.str()
    assert sorted(e["scenario"] for e in project.log()) == ["First", "Second"]
    # the user's scenario functions still produce fabtest results
    results = project.experiment()["scenario_results"]
    assert sorted(r["name"] for r in results) == ["First", "Second"]
    assert all(r["passed"] and r["turns"] == 1 for r in results)


def test_collect_features_true_with_pytest_bdd_scenarios_runs_each_scenario_twice(project):
    """The counterpart of the test above: the default (direct collection on) doubles the runs."""
    _bdd_style_project(project, collect_features=True)
    result = project.run("features", "-v")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*features/test_twice.py::test_first PASSED*",
                                 "*features/twice.feature::test_first PASSED*"])
    assert sorted(e["scenario"] for e in project.log()) == ["First", "First", "Second", "Second"]
    assert len(project.experiment()["scenario_results"]) == 4


def test_two_scenarios_with_the_same_python_name_are_both_collected(project):
    project.pyproject()
    project.agent(ECHO_AGENT)
    project.feature("features/names.feature", '''
        Feature: Names
          Scenario: Say hi!
            When the user says "a"
            Then the response must match "echo: a"

          Scenario: Say hi?
            When the user says "b"
            Then the response must match "echo: b"
    ''')
    result = project.run("features")
    result.assert_outcomes(passed=2)
    assert sorted(e["scenario"] for e in project.log()) == ["Say hi!", "Say hi?"]


def test_tag_with_a_colon_passes_strict_markers(project):
    project.pyproject()
    project.agent(ECHO_AGENT)
    project.feature("features/owned.feature", '''
        @owner:alice
        Feature: Owned
          Scenario: Owned hello
            When the user says "hello"
            Then the response must match "echo: hello"
    ''')
    result = project.run("features", "--strict-markers")
    result.assert_outcomes(passed=1)
    # the tag's name is the marker, its value the marker's argument: -m owner selects it
    selected = project.run("features", "--strict-markers", "-m", "owner")
    selected.assert_outcomes(passed=1)
