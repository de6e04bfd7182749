"""A tool name the agent does not declare (metadata ``tools``) is a usage error with a "did you mean"."""

from __future__ import annotations

AGENT = '''
from fabtest import AgentResponse, ToolCall


class Bot:
    def chat(self, messages, on_tool_call=None):
        return AgentResponse(text="hello", tool_calls=[ToolCall("search_books", {"q": "x"})])

    def metadata(self):
        return {"tools": ["search_books", "book_venue"]}


def build(context):
    return Bot()


def plain(context):
    return lambda messages: "hello"
'''

PYPROJECT = '''
agent = "mybot:build"

[tool.fabtest.agents]
plain = "mybot:plain"
'''

FEATURE = '''
Feature: Tool names
  Scenario: Must not call a misspelled tool
    When the user says "hi"
    Then the agent must not call "serch_books"

  Scenario: Call with a misspelled tool
    When the user says "hi"
    Then the agent should call "serch_books" with:
      | argument | value |
      | q        | x     |

  Scenario: Include a call to an unknown tool
    When the user says "hi"
    Then the conversation must not include a call to "delete_everything"

  Scenario: Stop condition names a misspelled tool
    Given a simulated user with the goal "book a venue"
    And the simulation stops when the agent calls "bok_venue"
    When the simulated user talks to the agent

  Scenario: Declared tools pass
    When the user says "hi"
    Then the agent must call "search_books"
    And the conversation must not include a call to "book_venue"

  Scenario: Agent without declared tools is not checked
    Given the agent "plain"
    When the user says "hi"
    Then the agent must not call "serch_books"
'''


def test_unknown_tool_names_are_usage_errors(project):
    project.pyproject(PYPROJECT)
    project.agent(AGENT)
    project.feature("features/tools.feature", FEATURE)
    result = project.run("features", "--fabtest-no-preflight", "--fabtest-fake-llm", "-p", "no:randomly")
    out = project.output(result)
    result.assert_outcomes(passed=2, failed=4)
    by_name = project.scenarios()
    line = lambda needle: f"features/tools.feature:{project.line_of(FEATURE, needle)}"  # noqa: E731
    expected = {
        "Must not call a misspelled tool": (line('must not call "serch_books"'),
                                            'unknown tool "serch_books" (did you mean "search_books"?): the agent '
                                            'declares "search_books", "book_venue"'),
        "Call with a misspelled tool": (line('should call "serch_books" with:'), 'did you mean "search_books"?'),
        "Include a call to an unknown tool": (line("delete_everything"), 'unknown tool "delete_everything"'),
        "Stop condition names a misspelled tool": (line('calls "bok_venue"'), 'did you mean "book_venue"?'),
    }
    for name, (where, text) in expected.items():
        message = by_name[name]["failure_message"]
        assert message.startswith(f"{where}: ") and text in message and "\n" not in message, (name, message)
        assert by_name[name]["failure_type"] == "error"
        assert message in out
