"""Each worked example under examples/ runs offline with one command (`pytest` in its folder), as a user
would run it: the real framework, a fake model, a tool that really runs, and the experiment file
records the call's arguments and result, the grounding verdict and the turn's cost."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import require

EXAMPLES = Path(__file__).parents[2] / "examples"
MODELS = {"adk": "gemini-2.5-flash", "langgraph": "gemini-2.5-flash", "openai_agents": "gpt-4.1-mini",
          "pydantic_ai": "gemini-2.5-flash"}


@pytest.mark.parametrize("key", sorted(MODELS))
def test_the_example_runs_offline_and_records_the_tool_call_grounding_and_cost(key: str, tmp_path: Path) -> None:
    require(key)
    project = tmp_path / key
    shutil.copytree(EXAMPLES / key, project, ignore=shutil.ignore_patterns("results", "__pycache__"))
    env = {k: v for k, v in os.environ.items()
           if k not in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "OPENAI_API_KEY", "SHOP_MODEL")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                           "--fabtest-experiment-id", "exp_example"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    doc = json.loads((project / "results" / "exp_example.json").read_text())
    quoted, asked = sorted(doc["scenario_results"], key=lambda s: s["name"])
    [turn] = quoted["transcript"]
    [call] = turn["tool_calls"]
    assert (call["name"], call["arguments"]) == ("get_price", {"item": "green tea"})
    assert call["result"]["price"] == 4.5 and "4.50 EUR" in turn["agent"]
    grounded = [d for d in quoted["expectations"]["details"] if d["type"] == "grounded_in"]
    assert [d["passed"] for d in grounded] == [True]
    assert turn["metadata"]["model"] == MODELS[key] and turn["metadata"]["usage"]["input_tokens"] > 0
    assert quoted["cost"]["complete"] and quoted["cost"]["roles"]["agent"]["usd"] > 0
    assert asked["transcript"][0]["tool_calls"] == [] and "green tea" in asked["transcript"][0]["agent"]


def test_the_approval_example_records_each_pause_and_its_decision(tmp_path: Path) -> None:
    """examples/langgraph_approval (issue 40 item 10): a LangGraph refund tool that waits for a person;
    the features approve, reject and edit it, and the experiment holds each pause on its turn."""
    require("langgraph")
    project = tmp_path / "langgraph_approval"
    shutil.copytree(EXAMPLES / "langgraph_approval", project, ignore=shutil.ignore_patterns("results", "__pycache__"))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                           "--fabtest-experiment-id", "exp_approval"],
                          cwd=project, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    doc = json.loads((project / "results" / "exp_approval.json").read_text())
    runs = {s["name"]: s for s in doc["scenario_results"]}
    pauses = {name: [p for t in run["transcript"] for p in t.get("pauses", [])] for name, run in runs.items()}
    [approved] = pauses["An approved refund is made"]
    assert (approved["tool"], approved["arguments"], approved["decision"], approved["decided_in_turn"]) == (
        "refund", {"order": "A1", "amount": 30.0}, "approved", 2)
    rejected = pauses["A rejected refund is not made"]
    assert [(p["decision"], p["reason"]) for p in rejected] == [("rejected", "no receipt")]
    assert pauses["The person lowers the amount"][0]["edited_arguments"] == {"order": "B2", "amount": 50}
    assert pauses["A question is not an approval"] == []
    made = runs["An approved refund is made"]["transcript"][1]["tool_calls"]
    assert [(c["name"], c["result"]["refunded"]) for c in made] == [("refund", True)]
    coverage = doc["coverage"]["pauses"]
    assert (coverage["asked"], coverage["decided"], coverage["approved"], coverage["rejected"], coverage["edited"]) == (
        3, 3, 1, 1, 1)
    assert "Pauses:      3/3 decided (1 approved, 1 rejected, 1 edited)" in proc.stdout  # the summary's coverage
