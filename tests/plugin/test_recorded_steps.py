"""Each scenario run records the Gherkin steps it ran, and a conversation page shows them beside the
transcript (issue 31: "the conversation page lacks the simulated user's goal and the Gherkin steps")."""

from __future__ import annotations

from fabtest.view.scenarios import conversation_page


def test_the_steps_are_recorded_background_first_with_outline_values_and_tables(project):
    project.pyproject('agent = "fabtest.demo:build_agent"', extra='[tool.fabtest.agents]\nvenue_bot = "fabtest.demo:build_agent"')
    project.feature("features/steps.feature", '''
        Feature: Steps
          Background:
            Given the agent "venue_bot"

          Scenario: A search
            When the user says "I need a room in Berlin for 10 people on 12 March"
            Then the agent must call "search_venues" with:
              | argument | value  |
              | city     | Berlin |

          Scenario Outline: A greeting
            When the user says "<greeting>"
            Then the response must match "(?i)which city"

            Examples:
              | greeting |
              | Hello    |
              | Hi there |
    ''')
    project.run("features").assert_outcomes(passed=3)
    runs = project.scenarios()
    assert runs["A search"]["steps"] == [
        'Given the agent "venue_bot"',
        'When the user says "I need a room in Berlin for 10 people on 12 March"',
        'Then the agent must call "search_venues" with:\n  | argument | value |\n  | city | Berlin |',
    ]
    assert runs["A greeting (greeting=Hi there)"]["steps"][1] == 'When the user says "Hi there"'  # the example's value
    doc = project.experiment()
    html = conversation_page(doc, runs["A greeting (greeting=Hello)"])
    panel = html[html.index('id="steps"'):html.index("</details>")]
    assert "The scenario's steps (3)" in panel and "features/steps.feature" in panel
    assert "When the user says &quot;Hello&quot;" in panel
    assert 'id="steps"' not in conversation_page(doc, {**runs["A search"], "steps": []})  # older files: no panel
