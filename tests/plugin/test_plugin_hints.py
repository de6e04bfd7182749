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
    When everybody dances the tango
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
    # collection reports every unmatched step (one error for the file); going on past it, each scenario
    # still fails before its first step with the same line, which its result records
    result = project.run("features", "--fabtest-no-preflight", "-p", "no:randomly", "--continue-on-collection-errors")
    out = project.output(result)
    result.assert_outcomes(failed=9, errors=1)
    msgs = _messages(out.split("short test summary info")[0])
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
    assert result.ret == 2  # pytest's "Interrupted: 1 error during collection", as a feature that does not parse
    result.assert_outcomes(errors=1)
    [message] = _messages(project.output(result).replace("features/late.feature", "features/hints.feature")).values()
    assert message.startswith(f"features/hints.feature:{project.line_of(TYPO_LATE, 'must mach')}: no step definition")
    assert 'closest step: Then the response must match "(?i)sorry"' in message
    assert not (project.path / "calls.txt").exists(), "the agent ran before the unmatched step was found"


PROJECT_STEPS = {
    "steps/__init__.py": "",
    "steps/shop.py": '''
        from pytest_bdd import parsers, then


        @then(parsers.parse("the basket holds {count:d} items"))
        def _basket(count):
            pass
        ''',
    "conftest.py": 'pytest_plugins = ["steps.shop"]\n',
    "features/sub/conftest.py": '''
        from pytest_bdd import given


        @given("a returning customer")
        def _returning():
            pass
        ''',
    "features/sub/own.feature": '''
        Feature: Own steps
          Scenario: Project steps only
            Given a returning customer
            When the user says "one"
            Then the basket holds 2 items

          @skip
          Scenario: Not written yet
            When the user says "one"
            Then the basket is full

          Scenario: Deselected
            When the user says "one"
            Then the baskt holds 2 items
        ''',
    "features/other.feature": '''
        Feature: Elsewhere
          Scenario: A sub-folder's step is not seen here
            Given a returning customer
        ''',
}


def test_steps_only_the_project_defines_are_found_at_collection(project):
    """A conftest's steps, a step module of pytest_plugins, a sub-folder's conftest: none is flagged where
    pytest-bdd will find it; a skipped or deselected scenario is not checked (it will not run)."""
    project.pyproject()
    project.agent(COUNTING_AGENT)
    for relative, text in PROJECT_STEPS.items():
        project.write(relative, text)
    ran = project.run("features/sub", "--fabtest-no-preflight", "-k", "not Deselected")
    ran.assert_outcomes(passed=1, skipped=1, deselected=1)
    stopped = project.run("features", "--fabtest-no-preflight")
    assert stopped.ret == 2
    out = project.output(stopped)
    assert f"features/sub/own.feature:{_line(PROJECT_STEPS['features/sub/own.feature'], 'baskt')}: no step " in out
    assert "features/other.feature:3: no step definition matches this step (Given a returning customer)" in out
    assert "Project steps only" not in out and "basket is full" not in out
    assert (project.path / "calls.txt").read_text(encoding="utf-8") == "one\n"  # only the first run called it


def _line(text: str, needle: str) -> int:
    import textwrap

    return next(i for i, line in enumerate(textwrap.dedent(text).lstrip("\n").splitlines(), 1) if needle in line)
