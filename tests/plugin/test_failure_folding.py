"""Runs that fail the same way print one pytest failure block, the rest folded into a line, and
fabtest's failure summary stays last on the screen (50 identical blocks pushed it off)."""

from __future__ import annotations

AGENT = '''
def build(context):
    return lambda messages: "no"
'''

FEATURE = '''
Feature: F
  Scenario: Broken
    When the user says "hi"
    Then the response must match "yes"

  Scenario: Fine
    When the user says "hi"
    Then the response must match "no"

  Scenario: Broken otherwise
    When the user says "hi"
    Then the response must match "maybe"
'''


def test_runs_failing_the_same_way_print_one_block_each(project):
    project.pyproject()
    project.agent(AGENT)
    project.feature("features/f.feature", FEATURE)
    result = project.run("features", "--fabtest-no-preflight", "-p", "no:randomly", "--fabtest-iterations", "5")
    out = project.output(result)
    result.assert_outcomes(failed=10, passed=5)  # the counts are every run's
    blocks = [line for line in out.splitlines() if line.startswith("____") and "Scenario:" in line]
    assert len(blocks) == 2, blocks  # one per distinct failure, not 10
    assert len([line for line in out.splitlines() if line.startswith("FAILED ")]) == 2
    assert out.count("more runs of ") == 2 and "... and 4 more runs of " in out and "failed the same way" in out
    # fabtest's summary after pytest's, its failures named: what the last screen shows
    assert out.index("failed the same way") < out.index("fabtest experiment") < out.rindex("Failures: 10 failed runs")
