"""Each shard of a CI run records its shard in its experiment part, for ``fabtest merge``."""

from __future__ import annotations

FEATURE = 'Feature: F\n  Scenario: S\n    When the user says "hi"\n    Then the response must match ".*"\n'


def test_fabtest_shard_is_recorded(project):
    project.pyproject('agent = "fabtest.demo:build_agent"')
    project.feature("features/f.feature", FEATURE)
    project.run("features", "--fabtest-shard", "2/4").assert_outcomes(passed=1)
    assert project.experiment()["experiment"]["shard"] == "2/4"


def test_pytest_split_group_is_recorded(project):
    project.pyproject('agent = "fabtest.demo:build_agent"')
    project.feature("features/f.feature", FEATURE)
    project.run("features", "--splits", "3", "--group", "1").assert_outcomes(passed=1)
    assert project.experiment()["experiment"]["shard"] == "1/3"


def test_bad_shard_is_one_line(project):
    project.pyproject('agent = "fabtest.demo:build_agent"')
    project.feature("features/f.feature", FEATURE)
    result = project.run("features", "--fabtest-shard", "5/4")
    assert "--fabtest-shard '5/4': expected i/n" in project.output(result)
    assert "Traceback" not in project.output(result) and "INTERNALERROR" not in project.output(result)
