"""One offline script for every model: ``--fabtest-fake-llm`` / ``offline_llm`` also play a built-in agent's
model (text and tool calls) through its real tool loop, so such scenarios run with no key; with a key set,
an ``offline_llm`` steps aside and the real model answers (issue 18, point 3).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from fabtest.agents.builtin import build_builtin_agent
from fabtest.agents.builtin_models import StandInModel
from fabtest.conversation import Message
from fabtest.errors import UsageError
from fabtest.testing import FakeGemini, FakeLLM, load_fake_llm

ARGS = ("-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:hypothesispytest", "-p", "no:benchmark")
TOOLS = "def lookup(key: str) -> dict:\n    'Look a key up.'\n    return {'key': key, 'value': len(key)}\n\nTOOLS = [lookup]\n"
SCRIPT = textwrap.dedent('''\
    agent_model:
      replies:
        - {call: lookup, args: {key: alpha}}
        - "alpha is 5"
      then: "Anything else?"
    ''')
FEATURE = textwrap.dedent('''\
    Feature: Built-in agent offline
      Scenario: Looks a key up
        Given the agent "helper"
        When the user says "What is alpha?"
        Then the agent must call "lookup" with:
          | argument | value |
          | key      | alpha |
        And the response must match "alpha is 5"
        When the user says "Thanks"
        Then the response must match "Anything else"
    ''')



def _project(pytester: pytest.Pytester, config: str = "") -> Path:
    pytester.makefile(".toml", pyproject='[tool.pytest.ini_options]\npythonpath = ["."]\n\n[tool.fabtest]\n'
                      f'{config}\n[tool.fabtest.agents.helper]\ngemini = "gemini-2.5-flash"\ntools = "mytools:TOOLS"\n')
    (pytester.path / "mytools.py").write_text(TOOLS, encoding="utf-8")
    (pytester.path / "offline.yaml").write_text(SCRIPT, encoding="utf-8")
    (pytester.path / "features").mkdir()
    (pytester.path / "features" / "helper.feature").write_text(FEATURE, encoding="utf-8")
    return pytester.path


def test_fake_llm_script_plays_the_builtin_agents_model_with_no_key(pytester: pytest.Pytester) -> None:
    _project(pytester)
    result = pytester.runpytest(*ARGS, "features", "--fabtest-fake-llm", "offline.yaml")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.OK


def test_offline_llm_plays_it_without_a_key_and_a_key_means_the_real_model(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    _project(pytester, config='offline_llm = "offline.yaml"')
    pytester.runpytest(*ARGS, "features").assert_outcomes(passed=1)

    with FakeGemini() as gemini:  # a key is set: the real client asks the (fake) Gemini server
        gemini.add_tool_script("alpha", [{"name": "lookup", "args": {"key": "alpha"}}, "alpha is 5 (from Gemini)"])
        gemini.add_rule("Thanks", text="Anything else? (from Gemini)")
        for name, value in gemini.env().items():
            monkeypatch.setenv(name, value)
        result = pytester.runpytest(*ARGS, "features")
        asked = [r for r in gemini.requests if r.tool_names]
    result.assert_outcomes(passed=1)
    assert len(asked) == 3  # the tool call, its summary, the second turn: all from the real model path


def test_a_script_that_runs_out_says_what_to_add() -> None:
    fake = FakeLLM().agent_model(["only one reply"])
    agent = build_builtin_agent({"gemini": "gemini-2.5-flash"}, {"fabtest_stand_in_model": StandInModel(fake, True)},
                                where="test")
    assert agent.chat([Message("user", "hi")]).text == "only one reply"
    with pytest.raises(Exception, match=r"asked for reply 2, and the script has 1: add replies, or give then"):
        agent.chat([Message("user", "hi"), Message("agent", "only one reply"), Message("user", "again")])


def test_a_bad_reply_in_a_script_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "offline.yaml"
    path.write_text("agent_model:\n  - {cal: lookup}\n", encoding="utf-8")
    with pytest.raises(UsageError, match=r"offline\.yaml: agent_model reply 1: unknown key 'cal'"):
        load_fake_llm(path)
