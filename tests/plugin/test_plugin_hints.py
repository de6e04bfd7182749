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


COUNTING_AGENT = '''
from pathlib import Path


def build(context):
    def chat(messages):
        with Path("calls.txt").open("a") as calls:
            calls.write(messages[-1].content + "\\n")
        return "hello"
    return chat
'''

TYPO_LATE = '''
Feature: A typo three turns in
  Scenario: Must mach
    When the user says "one"
    Then the response must match "hello"
    When the user says "two"
    When the user says "three"
    Then the response must mach "x"
'''


def test_a_step_no_definition_matches_fails_before_the_agent_is_called(project):
    """The typo in the last step was found only after the agent had run the three turns above it; and
    ``must mach`` was told its closest step is ``must not match``."""
    project.pyproject()
    project.agent(COUNTING_AGENT)
    project.feature("features/late.feature", TYPO_LATE)
    result = project.run("features", "--fabtest-no-preflight", "-p", "no:randomly")
    result.assert_outcomes(failed=1)
    [message] = _messages(project.output(result).replace("features/late.feature", "features/hints.feature")).values()
    assert message.startswith(f"features/hints.feature:{project.line_of(TYPO_LATE, 'must mach')}: no step definition")
    assert 'closest step: Then the response must match "(?i)sorry"' in message
    assert not (project.path / "calls.txt").exists(), "the agent ran before the unmatched step was found"
