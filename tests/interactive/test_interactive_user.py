"""A person plays the simulated user: they send the proposal, type their own, end, or save the
conversation as a feature; the engine runs its checks as with any simulated user."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import fabtest
from fabtest.pytest_plugin.interactive import InteractiveUser
from fabtest.testing import FakeLLM


def _bot(messages):
    last = messages[-1].content
    return f"You said: {last}" + (" Booked, BK-1." if "book" in last.lower() else "")


def _person(*answers: str):
    said = list(answers)
    asked: list[str] = []

    def ask(prompt: str) -> str:
        asked.append(prompt)
        return said.pop(0)

    return ask, asked


def test_the_person_types_sends_the_proposal_and_ends(tmp_path: Path) -> None:
    shown: list[str] = []
    ask, asked = _person("", "Please book it", "/end")
    inner = FakeLLM().simulated_user(["I want a room", "Book the loft", "never sent"])
    person = InteractiveUser(inner, ask=ask, show=shown.append)
    result = fabtest.run(_bot, user=fabtest.SimulatedUser(goal="Book a room", max_turns=5), simulator=person,
                         root=tmp_path)
    assert [t.user for t in result.transcript] == ["I want a room", "Please book it"]
    assert result.transcript[1].agent.endswith("Booked, BK-1.")
    assert len(asked) == 3
    assert "proposed: Book the loft" in shown[1]
    assert "  agent: You said: I want a room" in shown[1]  # the conversation so far is on screen


def test_without_a_simulator_the_person_writes_every_message(tmp_path: Path) -> None:
    ask, _ = _person("", "book it please", "/end")  # an empty answer with nothing proposed asks again
    shown: list[str] = []
    result = fabtest.run(_bot, user=fabtest.SimulatedUser(goal="Book", max_turns=3),
                         simulator=InteractiveUser(None, ask=ask, show=shown.append), root=tmp_path)
    assert [t.user for t in result.transcript] == ["book it please"]
    assert "nothing proposed: type a message, or /end" in shown


def test_the_conversation_can_be_saved_as_a_scripted_feature(tmp_path: Path) -> None:
    target = tmp_path / "features" / "played.feature"
    ask, _ = _person("please book a room", "/save", f"/save {target}", f"/save {target}", "/end")
    shown: list[str] = []
    fabtest.run(_bot, user=fabtest.SimulatedUser(goal="Book", max_turns=3),
                simulator=InteractiveUser(None, ask=ask, show=shown.append), root=tmp_path)
    assert "usage: /save PATH (e.g. /save features/regressions/mine.feature)" in shown
    assert shown.index(f"saved 1 turn(s) to {target}") < shown.index(f"{target} exists: not overwritten")
    text = target.read_text()
    assert 'When the user says "please book a room"' in text and "played by a person" in text


@pytest.mark.parametrize("purpose_call", ["judge"])
def test_other_calls_pass_through(purpose_call: str, tmp_path: Path) -> None:
    inner = FakeLLM().verdicts(default="passed")
    ask, asked = _person("/end")
    result = fabtest.run(_bot, user=["hi"], should=["The agent is polite"], judge=InteractiveUser(inner, ask=ask),
                         root=tmp_path)
    assert asked == []  # the judge's call never reached the person
    assert result.evaluations[0].status == "passed"


FEATURE = '''
Feature: Booking
  Scenario: Book a room
    Given a simulated user with the goal "Book a room in Berlin"
    And the simulation takes at most 4 turns
    When the simulated user talks to the agent
    Then the conversation must include a call to "book"
'''

AGENT = '''
from fabtest import AgentResponse, ToolCall

def build(context):
    def chat(messages):
        if "book" in messages[-1].content.lower():
            return AgentResponse("Booked: BK-7.", [ToolCall("book", {"city": "Berlin"})])
        return "Which city?"
    return chat
'''


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    pytester.makefile(".toml", pyproject='[tool.pytest.ini_options]\npythonpath = ["."]\n\n'
                                         '[tool.fabtest]\nagent = "bot:build"\nresults_dir = "results"\nconcurrency = 4\n')
    pytester.makepyfile(bot=AGENT)
    pytester.makefile(".feature", booking=FEATURE)
    return pytester


def test_a_person_plays_the_user_of_a_feature_without_any_llm(project: pytest.Pytester) -> None:
    """No key: the person is the simulated user; the checks run as usual and the run is green."""
    result = project.run(sys.executable, "-m", "pytest", "-s", "-p", "no:randomly", "--fabtest-interactive",
                         stdin=b"Hi\nPlease book Berlin\n/end\n", timeout=120)
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "goal: Book a room in Berlin" in out and "  agent: Which city?" in out
    assert "no simulator configured: type the user's message" in out


@pytest.mark.parametrize("args, message", [
    ((), "--fabtest-interactive needs the terminal: add -s"),
    (("-s", "-n", "1"), "--fabtest-interactive plays one conversation at a time at this terminal: drop -n"),
])
def test_interactive_needs_the_terminal(project: pytest.Pytester, args: tuple[str, ...], message: str) -> None:
    result = project.runpytest_subprocess("-p", "no:randomly", "--fabtest-interactive", *args)
    assert result.ret == 4
    assert message in result.stderr.str()
