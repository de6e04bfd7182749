"""A failed scenario shows its whole conversation under the failure, like captured output."""

from __future__ import annotations


def test_failed_scenario_shows_the_conversation(project):
    project.pyproject('agent = "fabtest.demo:build_agent"')
    project.feature("features/fail.feature", '''
        Feature: Transcript
          Scenario: Not booked yet
            When the user says "Berlin, 12 March, 10 people"
            And the user says "Spreeblick Loft"
            Then the agent must call "book_venue"

          Scenario: Passes quietly
            When the user says "Hello"
            Then the response must match "(?i)which city"
    ''')
    result = project.run("features")
    result.assert_outcomes(passed=1, failed=1)
    out = project.output(result)
    section = out.split("fabtest conversation", 1)[1]
    assert "Turn 1" in section and "Turn 2" in section
    assert "user:  Spreeblick Loft" in section
    assert 'tools: search_venues(city="Berlin", capacity=10)' in section
    assert out.count("fabtest conversation") == 1  # only under the failure
