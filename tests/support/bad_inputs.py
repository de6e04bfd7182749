"""The good project the bad-input tests (tests/bad_inputs) put a bad file into, and how they run it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from support.child import child_env

BASE_ARGS = ("-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:unraisableexception", "-p", "no:hypothesispytest", "-p", "no:benchmark")

GOOD_AGENT = '''
from fabtest import AgentResponse


def build(context):
    return lambda messages: AgentResponse(text="hello")
'''

GOOD_PYPROJECT = '''
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.fabtest]
agent = "goodbot:build"
results_dir = "results"

[tool.fabtest.agents]
x = "goodbot:build"
'''

GOOD_FEATURE = '''
Feature: Fine
  Scenario: Fine
    When the user says "hi"
    Then the response must match "hello"
'''

def clean_env() -> dict[str, str]:
    env = child_env("FABTEST_", "GEMINI_", "GOOGLE_")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def write_file(root: Path, relative: str, text: str) -> None:
    target = root / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


def run_inline_feature(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, text: str) -> str:
    """Run a project whose ``bad.feature`` is ``text`` (beside a good agent and feature), with no
    LLM configured; the run must fail without a traceback. Returns its output."""
    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    root = pytester.path
    (root / "goodbot.py").write_text(textwrap.dedent(GOOD_AGENT), encoding="utf-8")
    (root / "pyproject.toml").write_text(textwrap.dedent(GOOD_PYPROJECT), encoding="utf-8")
    (root / "fine.feature").write_text(textwrap.dedent(GOOD_FEATURE).lstrip("\n"), encoding="utf-8")
    (root / "bad.feature").write_text(text, encoding="utf-8")
    result = pytester.runpytest(*BASE_ARGS, "-q", str(root))
    output = result.stdout.str() + "\n" + result.stderr.str()
    assert result.ret != 0, output
    assert "Traceback" not in output, output
    return output


def assert_one_line_holds(output: str, expected: tuple[str, ...]) -> None:
    """Some single line of ``output`` holds every text of ``expected``."""
    lines = [line for line in output.splitlines() if all(text in line for text in expected)]
    assert lines, f"no single line holds all of {expected}:\n{output}"
