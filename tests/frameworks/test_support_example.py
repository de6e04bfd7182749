"""examples/langgraph_support runs offline with one command: a LangGraph agent tested on what it did.

The billing API behind ``lookup_account`` is unreachable (the real tool raises), so the example
passes only because the project's stub answers; a misspelt stub or trajectory tool is one line.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from .helpers import require

EXAMPLE = Path(__file__).parents[2] / "examples" / "langgraph_support"

MISSPELT = """
Feature: Typos
  Background:
    Given the agent "support"

  Scenario: A misspelt stub
    Given the tool "list_plan" fails with "503"
    When the user says "Switch me to unlimited, my number is 0176 555 0101"

  Scenario: A misspelt trajectory
    When the user says "Switch me to unlimited, my number is 0176 555 0101"
    Then the agent must call "lookup_acount" before "change_plan"
"""


def _run(project: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL")}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                           "--fabtest-experiment-id", "exp_support"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=300)


def test_the_support_example_passes_on_stubs_trajectories_and_end_state(tmp_path: Path) -> None:
    require("langgraph")
    project = tmp_path / "support"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("results", "__pycache__"))
    proc = _run(project)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    doc = json.loads((project / "results" / "exp_support.json").read_text())
    by_name = {s["name"]: s for s in doc["scenario_results"]}
    verified = by_name["The account is verified before the plan changes"]
    calls = verified["transcript"][0]["tool_calls"]
    assert [(c["name"], c.get("stubbed", False)) for c in calls] == [
        ("lookup_account", True), ("list_plans", False), ("change_plan", False)]
    assert calls[0]["result"] == {"account_id": "A-17", "plan": "basic"}
    kinds = [c["type"] for c in verified["expectations"]["details"]]
    assert kinds == ["tool_sequence", "call_order", "call_count", "only_tools", "match", "state"]
    down = by_name["The plans API is down"]["transcript"][0]["tool_calls"]
    assert down[-1]["name"] == "list_plans" and down[-1]["stubbed"] and down[-1]["metadata"]["error"]
    other = by_name["Another caller, another account"]["expectations"]["details"]
    assert [(c["path"], c["actual"]) for c in other] == [("account.id", "B-2"), ("account.plan", "basic")]
    deep = by_name["Deep in the conversation"]
    assert deep["history"][0] == {"role": "user", "content": "I want the unlimited plan"}
    assert any(c["type"] == "state" and c["expected"] == "A-17" and c["status"] == "passed"
               for c in deep["expectations"]["details"])


def test_a_misspelt_stub_or_trajectory_tool_is_one_line(tmp_path: Path) -> None:
    require("langgraph")
    project = tmp_path / "support"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("results", "__pycache__"))
    (project / "features" / "plans.feature").unlink()
    (project / "features" / "typos.feature").write_text(textwrap.dedent(MISSPELT))
    proc = _run(project)
    assert proc.returncode == 1
    doc = json.loads((project / "results" / "exp_support.json").read_text())
    messages = {s["name"]: s["failure_message"] for s in doc["scenario_results"]}
    assert messages == {
        "A misspelt stub": 'features/typos.feature:7: no tool "list_plan" to stub: the agent has "lookup_account", '
                           "\"list_plans\", \"change_plan\" (did you mean 'list_plans'?)",
        "A misspelt trajectory": 'features/typos.feature:12: unknown tool "lookup_acount" (did you mean '
                                 '"lookup_account"?): the agent declares "lookup_account", "list_plans", "change_plan"',
    }
