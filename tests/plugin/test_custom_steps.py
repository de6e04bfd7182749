"""A project's own steps use ``fabtest.Scenario``: the conversation, the last turn, record_check, satisfy.

docs/how-to/custom-steps.md promises these four and nothing more; the inner run below writes a
step with each, judged by a scripted fake (``--fabtest-fake-llm``), and reads the experiment.
"""

from __future__ import annotations

import fabtest
from fabtest.config.criteria import Criterion
from fabtest.config.settings import Settings

STEPS = '''
from pytest_bdd import parsers, then

import fabtest


@then(parsers.re(r'the agent (?P<mode>should|must) say "(?P<word>[^"]+)"'))
def says(fabtest_scenario: fabtest.Scenario, mode, word):
    assert isinstance(fabtest_scenario, fabtest.Scenario)
    turn = fabtest_scenario.last_turn
    said = word in turn.response.text
    fabtest_scenario.record_check("says", mode, f"says:{word}", "passed" if said else "failed",
                                  f"expected {word!r} in the reply ({len(fabtest_scenario.conversation.turns)} turns)",
                                  turn=turn.number, data={"word": word})


@then(parsers.re(r'the agent (?P<mode>should|must) be (?P<name>\\w+) throughout'))
def throughout(fabtest_scenario: fabtest.Scenario, mode, name):
    fabtest_scenario.satisfy(fabtest_scenario.criteria[name], mode, "every")
'''

FEATURE = '''
Feature: Custom steps
  Scenario: A custom check and a custom judged criterion
    Given the criterion "polite" means "the reply is courteous"
    When the user says "hello"
    And the user says "again"
    Then the agent should say "nothing-like-this"
    And the agent must say "You said"
    And the agent should be polite throughout
'''

AGENT = '''
def build(context):
    return lambda messages: "You said " + messages[-1].content
'''


def test_criterion_settings_and_scenario_are_exported_from_fabtest():
    assert {"Criterion", "Scenario", "Settings"} <= set(fabtest.__all__)
    assert fabtest.Settings is Settings and fabtest.Criterion is Criterion
    # the inner run checks isinstance(fabtest_scenario, fabtest.Scenario); mypy checks the signatures


def test_a_custom_step_records_checks_and_judges_a_criterion_through_the_protocol(project):
    project.pyproject()
    project.agent(AGENT)
    project.write("my_steps/__init__.py", "")
    project.write("my_steps/custom.py", STEPS)
    project.write("conftest.py", 'pytest_plugins = ["my_steps.custom"]\n')
    project.write("fake.yaml", "verdicts: {default: passed, polite: failed}\n")
    project.feature("features/custom.feature", FEATURE)
    result = project.run("features", "--fabtest-fake-llm", "fake.yaml", "--fabtest-no-preflight")
    assert result.ret == 0, project.output(result)
    (scenario,) = project.scenarios().values()
    should = {(d["type"], d["criterion"]): d for d in scenario["evaluations"]["details"]}
    must = {(d["type"], d["criterion"]): d for d in scenario["expectations"]["details"]}
    assert should[("says", "says:nothing-like-this")]["status"] == "failed"
    assert "(2 turns)" in should[("says", "says:nothing-like-this")]["details"]
    assert must[("says", "says:You said")]["status"] == "passed"
    polite = [d for d in scenario["evaluations"]["details"] if d["criterion"] == "polite"]
    assert [(d["status"], d["turn"]) for d in polite] == [("failed", 1), ("failed", 2)]  # judged on every response, scripted failed
