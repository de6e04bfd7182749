"""Helpers for the fault tests: a throwaway project run by pytester against a FakeGemini."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

from fabtest.testing.fake_gemini import FakeRequest

BASE_ARGS = ("-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:unraisableexception",
             "-p", "no:hypothesispytest", "-p", "no:benchmark")

_CRITERION_NAME = re.compile(r"^\d+\. name: (.+)$", re.MULTILINE)


def handler(request: FakeRequest) -> Any:
    """Plays a user who is done after two agent replies and passes every criterion."""
    text = request.text
    if "role-playing a HUMAN USER" in text:
        replies = request.prompt.count("\nAgent: ")
        if replies >= 2:
            return {"message": "Thanks, that is all.", "goal_complete": True}
        return {"message": f"Question number {replies + 1}", "goal_complete": False}
    if "Evaluate the " in text and "CRITERIA" in text:
        names = [n.strip() for n in _CRITERION_NAME.findall(request.prompt)]
        return {"verdicts": [{"criterion": n, "verdict": "passed", "reasoning": "fine"} for n in names]}
    return "OK"


AGENTS = '''
import time

from fabtest import AgentResponse


def good(context):
    return lambda messages: "hello, happy to help"


def raiser(context):
    def chat(messages):
        raise RuntimeError("database is down")
    return chat


def hanger(context):
    def chat(messages):
        time.sleep(3)
        return "too late"
    return chat


def int_bot(context):
    return lambda messages: 42


def none_bot(context):
    return lambda messages: None
'''


def pyproject(judge_timeout: float = 5.0) -> str:
    return f'''
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.fabtest]
agent = "faultbots:good"
results_dir = "results"

[tool.fabtest.agents]
good = "faultbots:good"
raiser = "faultbots:raiser"
hanger = "faultbots:hanger"
int_bot = "faultbots:int_bot"
none_bot = "faultbots:none_bot"

[tool.fabtest.judge]
backoff = 0.01
max_retries = 2
timeout = {judge_timeout}

[tool.fabtest.simulator]
backoff = 0.01
max_retries = 2
timeout = 5
'''


class FaultRun:
    def __init__(self, result: pytest.RunResult, path: Path) -> None:
        self.result = result
        self.output = result.stdout.str() + "\n" + result.stderr.str()
        files = [p for p in (path / "results").glob("*.json") if not p.name.startswith(".")]
        assert len(files) == 1, self.output
        self.doc = json.loads(files[0].read_text(encoding="utf-8"))
        self.scenarios = {s["name"]: s for s in self.doc["scenario_results"]}

    def failed(self, name: str, kind: str, *reason: str) -> dict[str, Any]:
        """Scenario ``name`` failed with ``kind`` and every ``reason`` in its message and in pytest's output."""
        scenario = self.scenarios[name]
        assert scenario["passed"] is False, scenario
        assert scenario["failure_type"] == kind, (scenario["failure_type"], scenario["failure_message"])
        for text in reason:
            assert text in scenario["failure_message"], scenario["failure_message"]
            assert text in self.output
        assert "Traceback" not in self.output
        return scenario

    def healthy(self, name: str, turns: int = 1) -> dict[str, Any]:
        scenario = self.scenarios[name]
        assert scenario["passed"] is True, scenario
        assert scenario["failure_type"] is None and scenario["failure_message"] is None
        assert scenario["turns"] == turns
        statuses = [d["status"] for d in scenario["evaluations"]["details"]]
        assert statuses and set(statuses) == {"passed"}, statuses
        return scenario


def run_project(pytester: pytest.Pytester, feature: str, *args: str, judge_timeout: float = 5.0) -> FaultRun:
    pytester.makefile(".toml", pyproject=textwrap.dedent(pyproject(judge_timeout)))
    (pytester.path / "faultbots.py").write_text(textwrap.dedent(AGENTS), encoding="utf-8")
    (pytester.path / "features").mkdir(exist_ok=True)
    (pytester.path / "features" / "faults.feature").write_text(textwrap.dedent(feature).lstrip(), encoding="utf-8")
    result = pytester.runpytest(*BASE_ARGS, "features", *args)
    return FaultRun(result, pytester.path)


