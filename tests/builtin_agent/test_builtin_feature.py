"""A new project tests a prompt + an MCP server with only a pyproject table and a feature file.

pytest runs in a subprocess (as a user would run it), its built-in agent talks to FakeGemini
through the real google-genai client, and the MCP server is the test server written with the mcp
SDK. The server is shared, so it must be gone once that pytest process has exited.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from fabtest.testing import FakeGemini

from .helpers import SERVER, alive, pids

PYPROJECT = """
[tool.fabtest]
results_dir = "results"

[tool.fabtest.agents.helper]
gemini = "gemini-2.5-flash"
instructions = "prompts/helper.md"
mcp = [{{ command = ["python", "{server}"], shared = true, env = {{ FABTEST_TEST_PID_DIR = "{pids}" }} }}]
max_tool_rounds = 3
"""

FEATURE = """
Feature: Helper
  Background:
    Given the agent "helper"

  Scenario: Looks a key up
    When the user says "What is alpha?"
    Then the agent must call "lookup" with:
      | argument | value |
      | key      | alpha |
    And the response must match "alpha is 1"

  Scenario: Remembers the earlier answer
    When the user says "What is beta?"
    And the user says "And doubled?"
    Then the conversation must include a call to "lookup"
    And the response must match "4"
"""


def test_a_project_with_a_builtin_agent_and_an_mcp_server(tmp_path: Path) -> None:
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    (tmp_path / "pyproject.toml").write_text(PYPROJECT.format(server=SERVER, pids=pid_dir))
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "helper.md").write_text("You look keys up with the lookup tool.")
    (tmp_path / "features").mkdir()
    (tmp_path / "features" / "helper.feature").write_text(textwrap.dedent(FEATURE))
    with FakeGemini() as fake:
        fake.add_tool_script(r"What is (alpha|beta)", [
            lambda req: {"name": "lookup", "args": {"key": "alpha" if "alpha" in req.last_user_text else "beta"}},
            lambda req: "{key} is {value}".format(**req.function_responses[0]["response"]),
        ])
        fake.add_rule(r"doubled", text="Doubled: 4")
        env = {**os.environ, **fake.env()}
        env.pop("GOOGLE_API_KEY", None)
        proc = subprocess.run([sys.executable, "-m", "pytest", "features", "-q", "-p", "no:randomly",
                               "-p", "no:cacheprovider", "--fabtest-experiment-id", "exp_helper"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "You look keys up with the lookup tool." in fake.requests[0].system
    # the remembered turn sent the first turn's function call and response back to the model
    doubled = next(r for r in fake.requests if "doubled" in r.last_user_text)
    assert any("functionResponse" in p for c in doubled.contents for p in c["parts"])
    doc = json.loads((tmp_path / "results" / "exp_helper.json").read_text())
    looked_up = next(s for s in doc["scenario_results"] if s["name"] == "Looks a key up")
    [call] = looked_up["transcript"][0]["tool_calls"]
    assert call["arguments"] == {"key": "alpha"} and call["result"]["value"] == 1
    assert looked_up["agent_metadata"]["tools"] == ["lookup", "slow", "broken"]
    assert looked_up["agent_metadata"]["usage"]["calls"] == 2
    [pid] = pids(pid_dir)  # shared: one server for both scenarios ...
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid), "the shared MCP server outlived the pytest run"  # ... stopped when pytest exited


def test_without_a_key_its_scenarios_are_skipped_naming_the_variable(pytester: pytest.Pytester,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    pytester.makefile(".toml", pyproject='[tool.fabtest.agents.helper]\ngemini = "gemini-2.5-flash"\n')
    pytester.makefile(".feature", helper=textwrap.dedent(FEATURE))
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "-rs")
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["*helper.feature:*the agent needs an LLM*set GEMINI_API_KEY*built-in agent*"])
