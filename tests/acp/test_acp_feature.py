"""A .feature run end to end with an ACP agent configured in pyproject.toml (``{acp = [argv...]}``)."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import pytest
from support.acp import ECHO, gone

FEATURE = """
Feature: an ACP agent
  Background:
    Given the agent "echo"

  Scenario: Tools and memory over one session
    When the user says "remember KIWI"
    Then the response must match "remember that"
    When the user says "write notes.txt vlan 100"
    Then the agent must call "write_file" with:
      | argument  | value           |
      | file_path | /notes\\.txt$/  |
      | content   | /vlan 100/      |
    And the file "notes.txt" must contain "vlan 100"
    When the user says "recall"
    Then the response must match "You told me KIWI"

  Scenario: The agent crashes
    When the user says "crash"

  Scenario: The agent hangs
    When the user says "hello"
    And the user says "hang"
"""


def write_project(pytester: pytest.Pytester, marker: str, *, agent_timeout: float, **options: float) -> None:
    table = json.dumps({"acp": [sys.executable, ECHO], **options})[1:-1].replace('":', '" =')
    pytester.makefile(".toml", pyproject=(
        f'[tool.fabtest]\nagent_timeout = {agent_timeout}\n\n[tool.fabtest.agents]\n'
        f'echo = {{ {table}, env = {{ FABTEST_ACP_MARKER = "{marker}" }} }}\n'))
    (pytester.path / "features").mkdir()
    (pytester.path / "features" / "acp.feature").write_text(FEATURE)


def test_a_feature_runs_end_to_end_over_acp(pytester: pytest.Pytester) -> None:
    marker = f"FABTEST_ACP_FEATURE_{uuid.uuid4().hex}"
    # The agent's own timeout (8 s a prompt) ends the hang; start-up and the runner get far more,
    # so a slow machine never turns the first turn into a timeout.
    write_project(pytester, marker, agent_timeout=150, timeout=8, startup_timeout=120)
    results = pytester.path / "results"
    run = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "features",
                                        "--fabtest-results-dir", str(results))
    assert gone(marker)  # nothing left behind: not after the crash, not after the hang
    experiment = json.loads(next(p for p in results.glob("*.json") if not p.name.startswith(".")).read_text())
    by_name = {r["name"]: r for r in experiment["scenario_results"]}
    assert by_name["Tools and memory over one session"]["passed"] is True, run.stdout.str()
    crash = by_name["The agent crashes"]
    assert crash["failure_type"] == "error"
    assert "exited with code 3" in crash["failure_message"]
    hang = by_name["The agent hangs"]
    assert hang["failure_type"] == "timeout", hang["failure_message"]
    assert "took longer than 8s to answer; its processes were killed" in hang["failure_message"]
    run.assert_outcomes(passed=1, failed=2)
    assert Path(pytester.path / "notes.txt").exists() is False  # the agent wrote in the scenario's directory


def test_a_scenario_timeout_kills_the_agent_too(pytester: pytest.Pytester) -> None:
    marker = f"FABTEST_ACP_FEATURE_{uuid.uuid4().hex}"
    write_project(pytester, marker, agent_timeout=150, startup_timeout=120)
    results = pytester.path / "results"
    run = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "features", "-k", "hangs",
                                        "--fabtest-results-dir", str(results), "--fabtest-scenario-timeout", "8")
    assert gone(marker)
    experiment = json.loads(next(p for p in results.glob("*.json") if not p.name.startswith(".")).read_text())
    (hang,) = experiment["scenario_results"]
    assert hang["failure_type"] == "timeout", run.stdout.str()
    assert "--fabtest-scenario-timeout" in hang["failure_message"]
