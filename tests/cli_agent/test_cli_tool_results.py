"""The CLI adapter keeps a ``tool_result``'s status and output on the recorded tool call, also when the
CLI sends a status without output (Gemini CLI 0.61 for ``write_file``) or an error without a ``tool_id``."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

FAKE = str(Path(__file__).resolve().parents[1] / "fixtures" / "fake_cli.py")

AGENT = f'''
import sys

from fabtest.agents.cli_agent import CliAgent


def build(context):
    return CliAgent([sys.executable, {FAKE!r}, "--prompt={{prompt}}", "-o", "stream-json"], timeout_s=30)
'''

FEATURE = '''
Feature: Tool results
  Scenario: Write and fail
    When the user says "WRITE: FAILTOOL: TOOL:search go"
    Then the agent must call "write_file"
    And the agent must call "run_shell_command"
'''


def test_tool_results_are_recorded_on_the_calls(pytester: pytest.Pytester) -> None:
    root = pytester.path
    (root / "pyproject.toml").write_text('[tool.fabtest]\nagent = "clibot:build"\nresults_dir = "results"\n',
                                         encoding="utf-8")
    (root / "clibot.py").write_text(textwrap.dedent(AGENT), encoding="utf-8")
    (root / "tools.feature").write_text(textwrap.dedent(FEATURE).lstrip(), encoding="utf-8")
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", "--fabtest-no-preflight",
                                f"--rootdir={root}", "-o", "pythonpath=.", str(root))
    result.assert_outcomes(passed=1)
    [experiment] = [p for p in (root / "results").glob("*.json") if not p.name.startswith(".")]
    [scenario] = json.loads(experiment.read_text(encoding="utf-8"))["scenario_results"]
    calls = {c["name"]: c for c in scenario["transcript"][0]["tool_calls"]}
    assert calls["write_file"]["metadata"]["status"] == "success" and calls["write_file"]["result"] is None
    assert calls["run_shell_command"]["metadata"]["status"] == "error"
    assert calls["run_shell_command"]["result"] == "permission denied"
    assert calls["run_shell_command"]["metadata"]["error"]["type"] == "TOOL_EXECUTION_ERROR"
    assert calls["search"]["result"] == "tool output" and calls["search"]["metadata"]["status"] == "success"
