"""Issue 10 items 6 and 10: odd tags, a keyword without its colon, a byte order mark, a criterion
defined twice at one level. Each either works or is one line naming file:line, never a traceback."""

from __future__ import annotations

AGENT = '''
import json
from pathlib import Path

LOG = Path(__file__).parent / "log.jsonl"


def build(context):
    with LOG.open("a") as fh:
        fh.write(json.dumps({"scenario": context["scenario"], "tags": context["tags"]}) + "\\n")
    return lambda messages: "echo: " + messages[-1].content
'''

SAY_HI = '''    When the user says "hi"
    Then the response must match "echo: hi"
'''


def _project(project, relative: str, text: str) -> None:
    project.pyproject()
    project.agent(AGENT)
    project.feature(relative, text)


def test_private_and_parametrize_tags_run_and_reach_the_context(project):
    _project(project, "features/t.feature", "@_wip @parametrize\nFeature: Tags\n  @parametrize:x\n  Scenario: Tagged\n"
             + SAY_HI)
    result = project.run("features", "--strict-markers")
    out = project.output(result)
    result.assert_outcomes(passed=1)
    assert "Traceback" not in out
    assert project.log() == [{"scenario": "Tagged", "tags": ["_wip", "parametrize", "parametrize:x"]}]


def test_ordinary_tags_still_select_with_dash_m(project):
    _project(project, "features/t.feature", "Feature: Tags\n  @_wip @smoke\n  Scenario: Tagged\n" + SAY_HI
             + "\n  Scenario: Untagged\n" + SAY_HI)
    project.run("features", "-m", "smoke").assert_outcomes(passed=1, deselected=1)


def test_scenario_without_colon_is_a_collection_error(project):
    _project(project, "features/t.feature", "Feature: Colon\n  Scenario Forgot the colon\n" + SAY_HI)
    result = project.run("features")
    out = project.output(result)
    assert result.ret != 0
    assert ('features/t.feature:2: "Scenario" needs a colon ("Scenario: name"); without it the line is read as '
            "description text and its scenario is lost") in out, out


def test_scenario_without_colon_after_a_good_one_is_reported(project):
    _project(project, "features/t.feature",
             "Feature: Colon\n  Scenario: Fine\n" + SAY_HI + "\n  Scenario Outline Forgot\n" + SAY_HI)
    result = project.run("features")
    out = project.output(result)
    assert result.ret != 0
    # Gherkin itself refuses this one (it follows steps): still one line with file and line
    assert "Line number: 6 Line: Scenario Outline Forgot File: " in out, out
    assert "Traceback" not in out


def test_a_description_that_merely_mentions_scenarios_is_fine(project):
    _project(project, "features/t.feature", "Feature: Colon\n  Scenarios here are short.\n\n  Scenario: Fine\n" + SAY_HI)
    project.run("features").assert_outcomes(passed=1)


def test_a_byte_order_mark_is_ignored(project):
    project.pyproject()
    project.agent(AGENT)
    (project.path / "features").mkdir()
    (project.path / "features/bom.feature").write_bytes(
        b"\xef\xbb\xbf" + ("Feature: With a BOM\n  Scenario: Hi\n" + SAY_HI).encode("utf-8"))
    result = project.run("features")
    result.assert_outcomes(passed=1)
    assert project.experiment()["scenario_results"][0]["feature"] == "With a BOM"


TWICE_IN_BACKGROUND = '''
Feature: Criteria
  Background:
    Given the criterion "friendly" means "the reply is warm"
    Given the criterion "friendly" means "the reply is polite"

  Scenario: Hi
    When the user says "hi"
    Then the response must match "echo: hi"
'''


def test_a_criterion_defined_twice_in_one_background_is_an_error(project):
    _project(project, "features/c.feature", TWICE_IN_BACKGROUND)
    result = project.run("features")
    out = project.output(result)
    result.assert_outcomes(failed=1)
    assert ('features/c.feature:4: the criterion "friendly" is already defined in this Feature Background at '
            "features/c.feature:3; remove one of them") in out, out
    assert project.experiment()["scenario_results"][0]["failure_type"] == "error"


DUPLICATE_ROWS = '''
Feature: Criteria
  Scenario: Hi
    Given the criteria:
      | criterion | description         |
      | friendly  | the reply is warm   |
      | concise   | one sentence        |
      | friendly  | the reply is polite |
    When the user says "hi"
    Then the response must match "echo: hi"
'''


def test_duplicate_rows_in_the_criteria_table_are_an_error(project):
    _project(project, "features/c.feature", DUPLICATE_ROWS)
    result = project.run("features")
    out = project.output(result)
    result.assert_outcomes(failed=1)
    assert ('features/c.feature:7: the criterion "friendly" is already defined in this Scenario at '
            "features/c.feature:5") in out, out


REDEFINED_LOWER = '''
Feature: Criteria
  Background:
    Given the criterion "friendly" means "the reply is warm"

  Rule: Formal
    Background:
      Given the criterion "friendly" means "the reply is polite"

    Scenario: Hi
      Given the criterion "friendly" means "the reply says hi"
      When the user says "hi"
      Then the response must match "echo: hi"
'''


def test_redefining_a_criterion_at_a_lower_level_still_overrides(project):
    _project(project, "features/c.feature", REDEFINED_LOWER)
    project.run("features").assert_outcomes(passed=1)
    criteria = project.experiment()["scenario_results"][0]["criteria"]
    assert criteria["friendly"] == "the reply says hi", criteria
