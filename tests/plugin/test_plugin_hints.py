"""An unmatched step says what to write instead: keyword, quotes, or the closest step (README "The step vocabulary")."""

from __future__ import annotations

import re

AGENT = '''
def build(context):
    return lambda messages: "hello"
'''

CONFTEST = '''
from pytest_bdd import parsers, then


@then(parsers.parse('the pizza order must contain {count:d} pizzas'))
def _pizzas(count):
    pass


@then(parsers.re(r'the agent (?P<mode>should|must) quote the price of "(?P<item>[^"]+)"'))
def _price(mode, item):
    pass
'''

FEATURE = '''
Feature: Hints
  Scenario: And after When
    When the user says "hi"
    And the response must match "hello"

  Scenario: Then written as When
    When the response must match "hello"

  Scenario: Single quotes
    When the user says 'hi'

  Scenario: Smart quotes
    When the user says “hi”

  Scenario: Missing quotes
    When the user says "hi"
    Then the agent must not call serch_books

  Scenario: Typo in a built-in step
    When the user says "hi"
    Then the transcrpt must contain "hello"

  Scenario: Typo in a project step
    When the user says "hi"
    Then the pizza ordr must contain 2 pizzas

  Scenario: Typo in a project regex step
    When the user says "hi"
    Then the agent must quote teh price of "Pepperoni"

  Scenario: Nothing close
    When the user dances the tango
'''


def _messages(output: str) -> dict[str, str]:
    found = {}
    for line in output.splitlines():
        m = re.match(r"features/hints\.feature:(\d+): no step definition matches this step", line)
        if m:
            found[m.group(1)] = line
    return found


def test_unmatched_steps_get_a_hint(project):
    project.pyproject()
    project.agent(AGENT)
    project.write("conftest.py", CONFTEST)
    project.feature("features/hints.feature", FEATURE)
    result = project.run("features", "--fabtest-no-preflight", "-p", "no:randomly")
    out = project.output(result)
    result.assert_outcomes(failed=9)
    msgs = _messages(out)
    line = lambda needle: str(project.line_of(FEATURE, needle))  # noqa: E731

    and_step = msgs[line('And the response must match "hello"')]
    assert '(And the response must match "hello")' in and_step  # as written, not When "the response ..."
    assert '"And" continues the When step above, but this is a Then step: write Then the response must match' \
        in and_step
    assert "this is a Then step, not a When step" in msgs[line('When the response must match "hello"')]
    assert 'did you mean: When the user says "hi"?' in msgs[line("When the user says 'hi'")]
    assert 'did you mean: When the user says "hi"?' in msgs[line("When the user says “hi”")]
    assert 'did you mean: Then the agent must not call "serch_books"?' in msgs[line("call serch_books")]
    assert 'closest step: Then the transcript must contain "Configuration saved"' in msgs[line("transcrpt")]
    assert "closest step: Then the pizza order must contain {count:d} pizzas" in msgs[line("pizza ordr")]
    # a regex step is proposed as a line one would write, not as its regex (issue 18, point 7)
    assert 'closest step: Then the agent <mode> quote the price of "<item>"' in msgs[line("quote teh price")]
    tango = msgs[line("dances the tango")]
    assert "closest step" not in tango and "fabtest steps" in tango
    assert all("\n" not in m for m in msgs.values())
    recorded = project.scenarios()["And after When"]["failure_message"]
    assert recorded == and_step
