"""CLI and ACP agents may declare their tools (``tools = [...]`` in the agent table), as HTTP and
OpenAI agents do: steps naming another tool are usage errors, and coverage counts the declared tools
never called. Neither protocol has a call that lists an agent's tools, so the table is where they live.
An ACP table's misspelt key is named, with its likely spelling, before the run.
"""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest
from support.acp import ECHO

from fabtest.agents.acp import from_table
from fabtest.errors import UsageError

FAKE_CLI = Path(__file__).resolve().parents[1] / "fixtures" / "fake_cli.py"
ARGS = ("-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:hypothesispytest", "--fabtest-no-preflight")
FEATURE = '''Feature: Declared tools
  Background:
    Given the agent "tooled"

  Scenario: A typo in a tool name
    When the user says "{prompt}"
    Then the agent must not call "writ_file"

  Scenario: A declared tool
    When the user says "{prompt}"
    Then the agent must call "write_file"
'''


def _run(pytester: pytest.Pytester, table: str, prompt: str) -> dict:
    pytester.makefile(".toml", pyproject=f'[tool.fabtest]\nresults_dir = "results"\n\n'
                                         f'[tool.fabtest.agents]\ntooled = {{ {table} }}\n')
    (pytester.path / "features").mkdir()
    (pytester.path / "features" / "tools.feature").write_text(FEATURE.format(prompt=prompt), encoding="utf-8")
    result = pytester.runpytest_subprocess(*ARGS, "features", "--fabtest-experiment-id", "tools")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert 'unknown tool "writ_file"' in out and 'did you mean "write_file"?' in out, out
    return json.loads((pytester.path / "results" / "tools.json").read_text(encoding="utf-8"))


def _tools_coverage(document: dict) -> dict:
    tools = document["coverage"]["tools"]
    return {"declared": tools["declared"], "called": sorted(tools["called"]), "never": tools["never_called"]}


def test_an_acp_agent_declares_its_tools(pytester: pytest.Pytester) -> None:
    table = f'acp = [{json.dumps(sys.executable)}, {json.dumps(ECHO)}], tools = ["write_file", "read_file"]'
    document = _run(pytester, table, "write notes.txt hello")
    assert _tools_coverage(document) == {"declared": 2, "called": ["write_file"], "never": ["read_file"]}


def test_a_cli_agent_declares_its_tools(pytester: pytest.Pytester) -> None:
    """``acp = false`` is the Gemini CLI run per turn; here a fake CLI stands in for ``gemini``, named
    by a path relative to where pytest runs (the CLI itself starts in the scenario's directory)."""
    program = pytester.path / "fake-gemini"
    program.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE_CLI} \"$@\"\n", encoding="utf-8")
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    table = 'acp = false, executable = "./fake-gemini", tools = ["write_file", "read_file", "search"]'
    document = _run(pytester, table, "WRITE: go")
    assert _tools_coverage(document) == {"declared": 3, "called": ["write_file"], "never": ["read_file", "search"]}


@pytest.mark.parametrize(("table", "expected"), [
    ({"acp": ["agent"], "permision": "allow"}, "unknown key 'permision' in an ACP agent table (did you mean 'permission'?)"),
    ({"acp": ["agent"], "tols": ["a"]}, "(did you mean 'tools'?)"),
    ({"acp": True, "tools": "write_file"}, 'tools must be a list of tool names like ["search_venues"]'),
])
def test_an_acp_table_is_checked_before_any_process_starts(table: dict, expected: str) -> None:
    with pytest.raises(UsageError, match="^agents.helper: ") as raised:
        from_table(table, {}, where="agents.helper")
    assert expected in str(raised.value)
