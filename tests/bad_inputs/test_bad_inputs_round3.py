"""Smaller leftovers of issue 30 (from round 2): an exception whose ``__str__`` raises is reported as
itself, not as the error its formatting caused; the shipped demo CLI takes ``--`` as a prompt."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fabtest.agents.boundary import guarded
from fabtest.engine.outcome import failure_message
from fabtest.errors import AgentError, describe


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("str exploded")


class NotAString(Exception):
    def __str__(self):  # type: ignore[override]
        return 42


@pytest.mark.parametrize("exc", [Unprintable("the real problem"), NotAString("the real problem")])
def test_an_exception_that_cannot_be_printed_is_reported_as_itself(exc: Exception) -> None:
    def chat() -> None:
        raise exc

    with pytest.raises(AgentError) as raised:
        guarded("the agent raised", chat)
    message = str(raised.value)
    assert message.startswith(f"the agent raised {type(exc).__name__}: ") and "the real problem" in message
    assert "__str__" in message
    assert "the real problem" in failure_message(exc, where="f.feature:3", step="When the user says")
    assert describe(exc).startswith(type(exc).__name__)


PYPROJECT = '''
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.fabtest]
results_dir = "results"
agent = "bad:agent"
'''

BAD = '''
class Weird(Exception):
    def __str__(self):
        raise RuntimeError("str exploded")


def agent(messages):
    raise Weird("the real problem")
'''


def test_a_run_records_the_agents_own_exception(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    pytester.makefile(".toml", pyproject=PYPROJECT)
    pytester.makepyfile(bad=BAD)
    pytester.makefile(".feature", e='Feature: E\n  Scenario: e\n    When the user says "hi"\n'
                                    '    Then the response must match "x"\n')
    pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", "--fabtest-experiment-id", "exp_e",
                                  "--fabtest-no-preflight")
    [scenario] = json.loads((pytester.path / "results" / "exp_e.json").read_text())["scenario_results"]
    assert "RuntimeError: str exploded" not in scenario["failure_message"]
    assert "Weird" in scenario["failure_message"] and "the real problem" in scenario["failure_message"]


@pytest.mark.parametrize("prompt", ["--", "-x", "a -- b", "--prompt=x"])
def test_the_demo_cli_takes_any_prompt(tmp_path: Path, prompt: str) -> None:
    done = subprocess.run([sys.executable, "-m", "fabtest.demo.fake_cli", "--skip-trust", f"--prompt={prompt}",
                           "-o", "json"], capture_output=True, text=True, timeout=60,
                          env={"FABTEST_DEMO_STATE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["response"]


def test_replay_agent_imports_a_module_of_the_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``fabtest replay --agent mybot:Bot`` run by the ``fabtest`` script (the project is not on
    sys.path, unlike ``python -m``) imports the project's module, as pytest and ``fabtest run`` do."""
    import argparse

    from fabtest.cli.replay import replay_env as _env

    (tmp_path / "pyproject.toml").write_text('[tool.fabtest]\nresults_dir = "results"\n', encoding="utf-8")
    (tmp_path / "mybot_r3.py").write_text("class Bot:\n    def chat(self, messages):\n        return 'hi'\n",
                                          encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "mybot_r3", raising=False)
    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    env = _env(argparse.Namespace(agent="mybot_r3:Bot", similarity=0.9, no_continue=False))
    assert env is not None and "mybot_r3" in sys.modules
