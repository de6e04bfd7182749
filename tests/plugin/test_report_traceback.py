"""A failure fabtest words itself (a failed check, an agent's error) costs no traceback: pytest's
own, which its report would throw away, parses the source file of every frame, about half a
second of CPU for each failing scenario (``pytest_plugin/reports.spare_traceback``). Any other
failure keeps pytest's traceback."""

from __future__ import annotations

CONFTEST = '''
import _pytest.nodes
import pytest


@pytest.fixture(autouse=True)
def count_tracebacks(request, monkeypatch):
    formatted = _pytest.nodes.Node._repr_failure_py

    def counted(self, excinfo, style=None):
        with open("tracebacks.txt", "a", encoding="utf-8") as fh:
            fh.write(self.name + "\\n")
        return formatted(self, excinfo, style)

    monkeypatch.setattr(_pytest.nodes.Node, "_repr_failure_py", counted)
'''
FEATURE = '''
Feature: Failing
  Scenario: A check fails
    When the user says "hello"
    Then the response must match "goodbye"

  Scenario: The agent raises
    When the user says "boom"
'''
AGENT = '''
def build(context):
    def chat(messages):
        if messages[-1].content == "boom":
            raise ValueError("boom in the agent")
        return "hello there"
    return chat
'''
PLAIN = "def test_plain():\n    assert 1 == 2\n"


def test_only_a_failure_fabtest_does_not_word_gets_pytests_traceback(project) -> None:
    project.pyproject()
    project.agent(AGENT)
    project.feature("features/failing.feature", FEATURE)
    project.write("conftest.py", CONFTEST)
    project.write("test_plain.py", PLAIN)
    result = project.run("features", "test_plain.py")
    result.assert_outcomes(failed=3)
    assert (project.path / "tracebacks.txt").read_text(encoding="utf-8").split() == ["test_plain"]
    output = project.output(result)
    assert "must match" in output and "goodbye" in output  # the short messages, as before
    assert "boom in the agent" in output and "assert 1 == 2" in output
    failures = {s["name"]: s["failure_type"] for s in project.experiment()["scenario_results"]}
    assert failures == {"A check fails": "assertion", "The agent raises": "error"}
