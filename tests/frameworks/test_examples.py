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
