"""Issue 9 item 3: every collected scenario has its own stable id, or collection says why not.

The stable id is ``Feature::Rule::Scenario`` (no file path, no line), so it survives moves and
reordering; two scenarios that would share it are a collection error naming both locations.
"""

from __future__ import annotations

import shutil

AGENT = '''
def build(context):
    return lambda messages: "echo: " + messages[-1].content
'''


def _scenario(name: str, said: str, indent: str = "  ") -> str:
    return (f'{indent}Scenario: {name}\n{indent}  When the user says "{said}"\n'
            f'{indent}  Then the response must match "echo: {said}"\n')


def test_two_scenarios_with_one_name_in_one_file_are_a_collection_error(project):
    project.pyproject()
    project.agent(AGENT)
    project.feature("features/a.feature", "Feature: Greetings\n" + _scenario("Say hi", "hi") + "\n"
                    + _scenario("Say hi", "hello"))
    result = project.run("features")
    out = project.output(result)
    assert result.ret != 0
    assert ('features/a.feature:6: scenario "Say hi" has the same Feature and name as features/a.feature:2, '
            "so both would get one stable id in results and comparisons; rename one of them, "
            "or put them under different Rules") in out, out
    assert "Traceback" not in out


def test_same_feature_and_scenario_in_two_files_is_a_collection_error(project):
    project.pyproject()
    project.agent(AGENT)
    project.feature("features/a.feature", "Feature: Greetings\n" + _scenario("Say hi", "hi"))
    project.feature("features/b.feature", "Feature: Greetings\n\n" + _scenario("Say hi", "hello"))
    result = project.run("features")
    out = project.output(result)
    assert result.ret != 0
    assert 'features/b.feature:3: scenario "Say hi" has the same Feature and name as features/a.feature:2' in out, out


def test_one_name_under_two_rules_runs_both_with_distinct_ids(project):
    project.pyproject()
    project.agent(AGENT)
    text = ("Feature: Greetings\n  Rule: Morning\n" + _scenario("Say hi", "good morning", "    ")
            + "\n  Rule: Evening\n" + _scenario("Say hi", "good evening", "    "))
    project.feature("features/a.feature", text)
    result = project.run("features", "-v")
    result.assert_outcomes(passed=2)
    results = project.experiment()["scenario_results"]
    assert sorted(r["rule"] for r in results) == ["Evening", "Morning"]
    assert len({r["id"] for r in results}) == 2


def test_ids_survive_moving_and_reordering(project):
    """The guard must not turn an edited file into a different set of ids."""
    project.pyproject()
    project.agent(AGENT)
    first, second = _scenario("Say hi", "hi"), _scenario("Say bye", "bye")
    project.feature("features/a.feature", "Feature: Greetings\n" + first + "\n" + second)
    project.run("features").assert_outcomes(passed=2)
    before = {r["name"]: r["id"] for r in project.experiment()["scenario_results"]}
    shutil.rmtree(project.results_dir)
    (project.path / "features/a.feature").unlink()
    project.feature("elsewhere/renamed.feature", "# moved\nFeature: Greetings\n\n" + second + "\n\n" + first)
    project.run("elsewhere").assert_outcomes(passed=2)
    after = {r["name"]: r["id"] for r in project.experiment()["scenario_results"]}
    assert after == before
