"""The feature's Gherkin steps are recorded into each scenario result and shown on its conversation
page (issue 31 point 2): a real pytest run of a feature with a Background, an Outline and a doc
string, then the view over its results directory."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from fabtest.view.catalog import Catalog
from fabtest.view.layout import conversation_path
from fabtest.view.site import Site

SCHEMA = Path(__file__).resolve().parents[2] / "docs" / "reference" / "experiment.schema.json"

FEATURE = '''Feature: Greetings
  Background:
    Given the agent's purpose is "greet people"

  Scenario Outline: Hello in <lang>
    When the user says "<word>"
    Then the response must match "(?i)<word>"

    Examples:
      | lang    | word    |
      | English | hello   |
      | French  | bonjour |

  Scenario: A long message
    When the user says:
      """
      hello there, a message on two lines
      second line
      """
    And the user says "bye"
    Then the transcript should contain "bye"
'''


@pytest.fixture
def ran(pytester: pytest.Pytester) -> Path:
    pytester.makefile(".toml", pyproject='[tool.pytest.ini_options]\npythonpath = ["."]\n\n'
                                         '[tool.fabtest]\nagent = "bot:build"\nresults_dir = "results"\n')
    pytester.makepyfile(bot="def build(context):\n    return lambda messages: 'You said: ' + messages[-1]['content']\n")
    pytester.makefile(".feature", greet=FEATURE)
    pytester.runpytest("-p", "no:randomly", "--fabtest-no-preflight").assert_outcomes(passed=3)
    return pytester.path / "results"


def test_steps_are_recorded_as_written_with_outline_values_and_doc_strings(ran: Path) -> None:
    [path] = ran.glob("exp_*.json")
    doc = json.loads(path.read_text())
    jsonschema.validate(doc, json.loads(SCHEMA.read_text()))  # the published schema knows the new key
    by_name = {r["name"]: r["steps"] for r in doc["scenario_results"]}
    assert by_name["Hello in <lang> (lang=French, word=bonjour)"] == [
        {"keyword": "Given", "text": "the agent's purpose is \"greet people\""},  # the background first
        {"keyword": "When", "text": 'the user says "bonjour"'},  # the example's value, not <word>
        {"keyword": "Then", "text": 'the response must match "(?i)bonjour"'},
    ]
    long = by_name["A long message"]
    assert [s["keyword"] for s in long] == ["Given", "When", "And", "Then"]
    assert long[1]["docstring"] == "hello there, a message on two lines\nsecond line"


def test_the_conversation_page_shows_the_steps_beside_the_transcript(ran: Path) -> None:
    site = Site(Catalog(ran))
    row = site.catalog.rows()[0]
    entry = next(r for r in site.catalog.document(row)["scenario_results"] if r["name"] == "A long message")
    page = site.render(conversation_path(row.id, entry["id"], 1))
    assert page is not None
    html = page.body.decode()
    steps = html[html.index('id="steps"'):html.index("<h2>Conversation</h2>")]  # above the transcript
    assert '<b class="kw">And</b> the user says &quot;bye&quot;' in steps
    assert "hello there, a message on two lines\nsecond line" in steps  # the doc string under its step
    assert steps.index("the agent&#x27;s purpose") < steps.index("the transcript should contain")


def test_the_html_report_shows_the_steps_above_each_transcript(ran: Path) -> None:
    """``fabtest report``'s page shows the same list as the view, under each scenario."""
    from fabtest.report.html import render_experiment_html

    [path] = ran.glob("exp_*.json")
    html = render_experiment_html(json.loads(path.read_text()))
    long = html[html.index("A long message"):]
    steps = long[long.index("<h3>Steps</h3>"):long.index("<h3>Transcript</h3>")]
    assert '<b class="kw">And</b> the user says &quot;bye&quot;' in steps
    assert "hello there, a message on two lines\nsecond line" in steps
