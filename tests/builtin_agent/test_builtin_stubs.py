"""Tool stubs on the built-in agent: the scenario decides what its Python tools return.

The model is FakeGemini through the real google-genai client; its second answer repeats the
function response it was sent, so the reply shows what the tool returned. The real tools append
to a file: a stubbed call must leave it untouched.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from fabtest.testing import FakeGemini

PYPROJECT = """
[tool.fabtest]
results_dir = "results"
agent_timeout = 20

[tool.fabtest.agents.support]
gemini = "gemini-2.5-flash"
instructions = "You help with phone plans."
tools = "support_tools:TOOLS"
"""

TOOLS = '''
from pathlib import Path


def lookup_account(phone: str) -> dict:
    """The account of a phone number."""
    with open(Path(__file__).parent / "real_calls.txt", "a") as log:
        log.write(f"lookup_account {phone}\\n")
    return {"account_id": "REAL", "plan": "real"}


def list_plans() -> list:
    """Every plan on offer."""
    with open(Path(__file__).parent / "real_calls.txt", "a") as log:
        log.write("list_plans\\n")
    return ["real"]


TOOLS = [lookup_account, list_plans]
'''

FEATURE = '''
Feature: Plans
  Background:
    Given the agent "support"
    And the tool "lookup_account" returns:
      """
      {"account_id": "A-17", "plan": "basic"}
      """

  Scenario: The Background's stub answers
    When the user says "account of 0176"
    Then the agent must call "lookup_account"
    And the response must match "plan=basic"

  Scenario: A table of argument patterns
    Given the tool "lookup_account" returns:
      | phone  | result                                     |
      | /^030/ | {"account_id": "B-2", "plan": "unlimited"} |
    When the user says "account of 0301"
    Then the response must match "plan=unlimited"

  Scenario: The plans API is down and slow
    Given the tool "list_plans" fails with "503 Service Unavailable"
    And the tool "list_plans" takes 0.3 seconds
    When the user says "which plans?"
    Then the response must match "error=503 Service Unavailable"

  Scenario: A real call is not stubbed
    When the user says "which plans?"
    Then the response must match "result=\\['real'\\]"

  Scenario: A misspelt stub
    Given the tool "list_plan" fails with "timeout"
    When the user says "which plans?"
'''


def _echo(req: object) -> str:
    response = req.function_responses[0]["response"]  # type: ignore[attr-defined]
    return " ".join(f"{k}={v}" for k, v in response.items())


def test_builtin_agent_tools_are_stubbed_per_scenario(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "support_tools.py").write_text(textwrap.dedent(TOOLS))
    (tmp_path / "features").mkdir()
    (tmp_path / "features" / "plans.feature").write_text(textwrap.dedent(FEATURE))
    with FakeGemini() as fake:
        fake.add_tool_script(r"account of", [
            lambda req: {"name": "lookup_account", "args": {"phone": req.last_user_text.split()[-1]}}, _echo])
        fake.add_tool_script(r"which plans", [lambda req: {"name": "list_plans", "args": {}}, _echo])
        env = {**os.environ, **fake.env(), "PYTHONPATH": str(tmp_path)}
        env.pop("GOOGLE_API_KEY", None)
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "pytest", "features", "-q", "-p", "no:randomly",
                               "-p", "no:cacheprovider", "--fabtest-experiment-id", "exp_stubs"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
        elapsed = time.perf_counter() - started
    out = proc.stdout + proc.stderr
    assert "4 passed" in out and "1 failed" in out, out[-4000:]
    # only the scenario without a stub of list_plans reached the real tools
    assert (tmp_path / "real_calls.txt").read_text().splitlines() == ["list_plans"]
    doc = json.loads((tmp_path / "results" / "exp_stubs.json").read_text())
    by_name = {s["name"]: s for s in doc["scenario_results"]}
    [call] = by_name["The Background's stub answers"]["transcript"][0]["tool_calls"]
    assert call["stubbed"] is True and call["result"] == {"account_id": "A-17", "plan": "basic"}
    assert call["arguments"] == {"phone": "0176"}
    [failed] = by_name["The plans API is down and slow"]["transcript"][0]["tool_calls"]
    assert failed["stubbed"] is True and failed["result"] == "503 Service Unavailable" and failed["metadata"]["error"]
    assert by_name["The plans API is down and slow"]["transcript"][0]["duration_s"] >= 0.3
    [real] = by_name["A real call is not stubbed"]["transcript"][0]["tool_calls"]
    assert "stubbed" not in real and real["result"] == ["real"]  # older readers see the same record
    misspelt = by_name["A misspelt stub"]
    line = textwrap.dedent(FEATURE).splitlines().index('    Given the tool "list_plan" fails with "timeout"') + 1
    assert misspelt["failure_message"] == (
        f'features/plans.feature:{line}: no tool "list_plan" to stub: the agent has "lookup_account", "list_plans" '
        "(did you mean 'list_plans'?)")
    assert misspelt["failure_type"] == "error"
    assert elapsed < 120


def test_an_mcp_tool_is_stubbed_in_the_tool_loop(fake: FakeGemini, tmp_path: Path, pid_dir: Path) -> None:
    """The MCP server starts (it lists the tools) but the stubbed call never reaches it: the real
    lookup would return the server's pid."""
    from fabtest.agents.builtin import BuiltinAgent
    from fabtest.agents.registry import make_agent
    from fabtest.agents.stubs import ToolStub, ToolStubs
    from fabtest.conversation import Message
    from fabtest.engine.turns import call_agent

    from .helpers import stdio_spec

    fake.add_tool_script(r"alpha", [{"name": "lookup", "args": {"key": "alpha"}}, _echo])
    agent = make_agent({"gemini": "gemini-2.5-flash", "mcp": [stdio_spec(pid_dir)]}, {"rootdir": str(tmp_path)}, where="x")
    assert isinstance(agent, BuiltinAgent) and agent.stubbable_tools() == ["lookup", "slow", "broken"]
    stubs = ToolStubs()
    stubs.define(ToolStub("lookup", "f:1", result={"key": "alpha", "value": 42}))
    with agent.around():
        reply = call_agent(agent, [Message("user", "what is alpha?")], timeout=30, tool_stubs=stubs)
    [call] = reply.tool_calls
    assert call.stubbed and call.result == {"key": "alpha", "value": 42} and call.metadata["source"].startswith("mcp:")
    assert reply.text == "key=alpha value=42"
