"""Shared helpers for the benchmarks (not collected by pytest: no test_ prefix, outside testpaths)."""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from fabtest.testing.fake_gemini import FakeGemini, FakeRequest

CRITERION_NAME = re.compile(r"^\d+\. name: (.+)$", re.MULTILINE)

# A project whose judge and simulator retry quickly (the fake never fails, so retries are rare).
SIM_PYPROJECT = '''
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.fabtest]
agent = "benchagent:build"
results_dir = "results"

[tool.fabtest.judge]
backoff = 0.01
max_retries = 2
timeout = 10

[tool.fabtest.simulator]
backoff = 0.01
max_retries = 2
timeout = 10
'''


def finishing_agent(turns: int) -> str:
    """Source of ``benchagent.py``: an instant agent that calls ``finish`` on its ``turns``-th reply."""
    return f'''
from fabtest import AgentResponse, ToolCall


def build(context):
    def chat(messages):
        n = sum(1 for m in messages if m.role == "user")
        calls = [ToolCall("finish", {{"turn": n}})] if n >= {turns} else []
        return AgentResponse(text=f"Step {{n}}: noted, thank you. What else?", tool_calls=calls)
    return chat
'''


# hypothesis and langsmith (the [langgraph] extra) load seconds of pytest plugins no benchmark uses
BASE_ARGS = ["-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:hypothesispytest", "-p", "no:langsmith_plugin", "-q"]


def write(root: Path, relative: str, text: str) -> Path:
    target = root / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return target


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("FABTEST_", "GEMINI_", "GOOGLE_", "PYTEST_"))}
    env.update(extra or {})
    return env


def run_pytest(root: Path, args: list[str], env: dict[str, str], timeout: float = 900) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Run ``python -m pytest`` in ``root``; returns (wall seconds, process)."""
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", *BASE_ARGS, *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=timeout)
    return time.perf_counter() - started, proc


def kind_of(request: FakeRequest) -> str:
    """Which fabtest prompt a request carries (the way demo.offline_llm recognises them)."""
    text = request.text
    if "role-playing a HUMAN USER" in text:
        return "simulator"
    if "Evaluate the " in text and "CRITERIA" in text:
        return "criteria"
    if "CANDIDATE TOPICS" in text:
        return "topic"
    return "other"


def all_criteria_pass(request: FakeRequest) -> dict[str, Any]:
    names = [n.strip() for n in CRITERION_NAME.findall(request.prompt)]
    return {"verdicts": [{"criterion": n, "verdict": "passed", "reasoning": "fine"} for n in names]}


def plain_call_s(fake: FakeGemini) -> float:
    """A plain google-genai call to the same server: what one simulator call cannot go below."""
    from google import genai
    from google.genai import types

    client = genai.Client(api_key="x", http_options=types.HttpOptions(base_url=fake.base_url))
    client.models.generate_content(model="gemini-2.5-flash", contents="warm up")
    times = []
    for _ in range(5):
        started = time.perf_counter()
        client.models.generate_content(model="gemini-2.5-flash", contents="plain call")
        times.append(time.perf_counter() - started)
    return statistics.median(times)
